"""report.html's furniture: its CSS (light and dark), the outcome filter's rules and the script
that improves the filter. Data-free: report/html.py writes the page, this module styles it.

The outcome filter works without JavaScript: a radio button per outcome, and CSS rules
(`:has()`) that hide the result rows, and the contracts, of other outcomes. The script only
adds what CSS cannot do: a text filter over the rows, and opening the contracts a filter shows
(passes are collapsed by default).
"""

from __future__ import annotations

from conformance.outcomes import Outcome

OUTCOMES = tuple(o.value for o in Outcome)

# Colours are variables, so that dark mode (prefers-color-scheme) is one block of values.
CSS = """
:root { color-scheme: light dark; --fg: #1b1f23; --bg: #fff; --muted: #57606a; --line: #d0d7de; --th: #f3f4f6; --pre: #f6f8fa;
  --green: #1a7f37; --red: #cf222e; --amber: #9a6700; --purple: #8250df; --link: #0969da;
  --cap-supported: #aceebb; --cap-broken: #ff8182; --cap-required_but_missing: #ffb3b8; --cap-not_required: #eaeef2;
  --cap-unverified: #ddf4ff; --cap-unsupported: #fff1b8; --failure-bg: #fff8f8; --finding-bg: #fbf8ff; --unverified-bg: #fff8c5;
  --verdict-conformant: #1a7f37; --verdict-non_conformant: #cf222e; --verdict-incomplete: #9a6700; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --bg: #0d1117; --muted: #9198a1; --line: #3d444d; --th: #161b22; --pre: #161b22;
    --green: #3fb950; --red: #f85149; --amber: #d29922; --purple: #bc8cff; --link: #4493f8;
    --cap-supported: #1f4f2c; --cap-broken: #8e1519; --cap-required_but_missing: #6e2a30; --cap-not_required: #262c36;
    --cap-unverified: #12385e; --cap-unsupported: #4b3b0a; --failure-bg: #25171c; --finding-bg: #1f1a2e; --unverified-bg: #3b2e05;
    --verdict-conformant: #238636; --verdict-non_conformant: #da3633; --verdict-incomplete: #9e6a03; }
}
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto 3em; padding: 0 2em; max-width: 1400px; color: var(--fg); background: var(--bg); }
a { color: var(--link); }
h1 { margin: .6em 0 .2em; overflow-wrap: anywhere; } h2 { border-bottom: 2px solid var(--line); padding-bottom: .2em; margin-top: 1.6em; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: .5em 0 1em; } th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: var(--th); } code, pre { font: 12px/1.4 ui-monospace, monospace; }
pre { background: var(--pre); border: 1px solid var(--line); padding: 8px; overflow-x: auto; white-space: pre-wrap; }
.verdict { font-size: 1.5em; font-weight: bold; padding: .4em .8em; border-radius: 6px; display: inline-block; color: #fff; }
.verdict-conformant { background: var(--verdict-conformant); } .verdict-non_conformant { background: var(--verdict-non_conformant); }
.verdict-incomplete { background: var(--verdict-incomplete); }
.contested { font-size: .85em; font-weight: bold; color: var(--purple); border: 1px solid var(--purple); border-radius: 4px; padding: 0 .3em; }
.provenance { font-size: .9em; margin: .3em 0; }
.strict { font-weight: bold; color: var(--purple); }
.cap-supported { background: var(--cap-supported); } .cap-broken { background: var(--cap-broken); }
.cap-required_but_missing { background: var(--cap-required_but_missing); } .cap-not_required { background: var(--cap-not_required); }
.cap-unverified { background: var(--cap-unverified); } .cap-unsupported { background: var(--cap-unsupported); }
.out-pass { color: var(--green); } .out-fail, .out-crash, .out-timeout, .out-flaky { color: var(--red); font-weight: bold; }
.out-error { color: var(--amber); font-weight: bold; } .out-not_run, .out-waived { color: var(--amber); }
.out-not_applicable { color: var(--muted); }
.runtime-counts, .runtime-counts span { color: var(--purple); font-weight: normal; }
h5 { margin: 1em 0 .3em; font-size: 1em; }
.failure { border-left: 5px solid var(--red); padding: .2em 1em; margin: 1em 0; background: var(--failure-bg); }
.finding { border-left: 5px solid var(--purple); padding: .2em 1em; margin: 1em 0; background: var(--finding-bg); }
/* onnxruntime's messages hold long unbroken words (source paths, C++ names): they wrap rather than widen the page */
.failure p, .finding p, .failure li, .finding li { overflow-wrap: anywhere; }
/* and so do a contract's provenance and sources (header paths with their C++ names) */
.provenance, details > p, details li { overflow-wrap: anywhere; }
.muted { color: var(--muted); }
.claim-unverified td { background: var(--unverified-bg); } .claim-unverified .verified { font-weight: bold; color: var(--amber); }
.throughput td.figure { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.throughput .ratio { color: var(--muted); } .throughput tr.host td, .throughput tr.host th { background: var(--pre); }
nav#contents ul { margin: .2em 0; padding-left: 1.4em; } nav#contents li { margin: .1em 0; }
details.contract { margin: .3em 0; } details.contract > summary { cursor: pointer; padding: .15em 0; }
tr:target, .failure:target, .finding:target, details:target > summary { outline: 3px solid var(--link); }
#filter { position: sticky; top: 0; background: var(--bg); padding: .4em 0; border-bottom: 1px solid var(--line); z-index: 1; }
#filter label { margin-right: .8em; white-space: nowrap; } #filter input[type=search] { font: inherit; width: 16em; max-width: 100%; }
.text-hidden { display: none; }
@media (max-width: 700px) {
  body { padding: 0 .7em; font-size: 13px; } .verdict { font-size: 1.2em; } td small { overflow-wrap: anywhere; }
}
"""


def filter_css() -> str:
    """While the radio of an outcome is checked, only rows of that outcome show, and only the
    contracts that have one; the 'all' radio shows everything."""
    rules = []
    for outcome in OUTCOMES:
        checked = f"body:has(#show-{outcome}:checked)"
        rules.append(f"{checked} tr.result:not(.is-{outcome}), {checked} details.contract:not(.has-{outcome}), "
                     f"{checked} .family:not(.has-{outcome}) {{ display: none; }}")
    return "\n".join(rules) + "\n"


SCRIPT = """
(function () {
  var box = document.getElementById('filter-text');
  if (!box) return;
  box.hidden = false;
  var rows = Array.prototype.slice.call(document.querySelectorAll('tr.result'));
  // a row is found by its contract's id too, which its entry's summary holds
  var texts = rows.map(function (r) {
    var name = r.closest('details').querySelector('summary code');
    return ((name ? name.textContent + ' ' : '') + r.textContent).toLowerCase();
  });
  var contracts = Array.prototype.slice.call(document.querySelectorAll('details.contract'));
  var families = Array.prototype.slice.call(document.querySelectorAll('.family'));
  function apply() {
    var text = box.value.trim().toLowerCase();
    var picked = document.querySelector('input[name=outcome]:checked');
    var outcome = picked && picked.value !== 'all' ? picked.value : '';
    rows.forEach(function (r, i) { r.classList.toggle('text-hidden', text !== '' && texts[i].indexOf(text) < 0); });
    contracts.forEach(function (d) {
      var shown = d.querySelector('tr.result:not(.text-hidden)' + (outcome ? '.is-' + outcome : ''));
      d.classList.toggle('text-hidden', !shown);
      if ((text || outcome) && shown) d.open = true;
    });
    families.forEach(function (f) { f.classList.toggle('text-hidden', !f.querySelector('details.contract:not(.text-hidden)')); });
  }
  box.addEventListener('input', apply);
  Array.prototype.forEach.call(document.querySelectorAll('input[name=outcome]'), function (r) { r.addEventListener('change', apply); });
})();
"""
