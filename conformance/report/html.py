"""report.html: one self-contained page for a reviewer, that scales to thousands of results.

No network, no external assets: inline CSS and one inline script only, so the page reads the
same from a bundle on a machine without access to anything. The verdict (its reasons linking to
their failures, the EP's counts apart from onnxruntime's findings) and a table of contents with
counts come first, then the version chain, the copy-capability matrix, the spec's claims, the
EP's failures (by family, then by contract: the contract once, a row per case naming its
`repro/` script; report/groups.py), the findings against onnxruntime, waivers, and every result:
a collapsed entry per contract (open where a case broke), an anchor per contract and per case
(report/common.py names them; summary.md links to them), and a filter by outcome that works
without JavaScript (report/page.py) and by text with it. Tables scroll inside the page on a
narrow screen; dark mode follows prefers-color-scheme.

Written with f-strings and one escaping function (`_e`) rather than Jinja2: every value from
the run passes through `_e` (a test renders hostile text in each place), the page is built in
one linear pass (a few milliseconds for thousands of results), and the kit keeps its
dependencies to what a run needs; a template engine would add a dependency for no markup this
page needs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from html import escape
from typing import Any, Iterable

from conformance.catalogue.claims import unverified_count
from conformance.report.evidence import claim_evidence
import conformance.report.curve as curve
import conformance.report.groups as groups
import conformance.report.throughput as throughput
import conformance.report.page as page
from conformance.report.common import (BROKEN_VALUES, MACHINE_NOTE, anchor, case_anchor, case_name, contract_anchor, device_line, ep_origin,
                                       failure_anchor, failures_of_the_ep, findings_apart, imports_lines, params_label, partial_run, provenance_text,
                                       reason_contract, run_conditions, shared_with_the_ep, tally, unlisted_note, verdict_of)

STATUS_LEGEND = {
    "supported": "the bytes arrived intact",
    "unverified": "the copy returned, but its bytes could not be read back to check them",
    "broken": "the copy claimed success but the bytes differ",
    "required_but_missing": "refused, though the contract requires it",
    "not_required": "refused; both ends are CPU-visible, no copy is needed",
    "unsupported": "refused, and no contract requires it",
}

CSS = page.CSS


def render(data: dict[str, Any]) -> str:
    ep = data["ep"]
    title = f"Conformance report: {ep.get('name', '?')}"
    body = [
        f"<h1>{_e(title)}</h1>",
        *_verdict(data),
        *_contents(data),
        *_version_chain(data),
        *_capabilities(data["capabilities"], data.get("eps", [data["ep"]])),
        *(line for index, entry in enumerate(data.get("eps", [data["ep"]])) for line in _spec_claims(entry, first=index == 0)),
        *_failures(data),
        *_findings(data),
        *_waivers(data.get("waivers", [])),
        *_lost(data["run"]["lost"]),
        *_machine(data),
        *_all_results(data),
    ]
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{CSS}{page.filter_css()}</style>",
        "</head><body>",
        *body,
        f"<script>{page.SCRIPT}</script>",
        "</body></html>",
    ]) + "\n"


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _table(header: Iterable[str], rows: Iterable[Iterable[str]], table_id: str = "", row_classes: Iterable[str] = ()) -> list[str]:
    """Rows are already-escaped cells; `row_classes`, when given, a class per row ('' for none)."""
    attribute = f' id="{anchor(table_id)}"' if table_id else ""
    out = [f'<div class="scroll"><table{attribute}><thead><tr>' + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    classes = list(row_classes)
    for index, cells in enumerate(rows):
        css = classes[index] if index < len(classes) else ""
        out.append((f'<tr class="{_e(css)}">' if css else "<tr>") + "".join(cells) + "</tr>")
    return out + ["</tbody></table></div>"]


def _verdict(data: dict[str, Any]) -> list[str]:
    verdict = data["verdict"]
    out = [f'<p id="verdict"><span class="verdict verdict-{_e(verdict)}">Verdict: {_e(verdict_of(data))}</span></p>']
    if data.get("strict"):
        out.append('<p class="strict" id="strict">Strict run (certification mode): a required contract that could not run fails the run.</p>')
    if partial_run(data):
        out.append(f'<p class="strict" id="partial">Partial run: {_e(partial_run(data))}; not a verdict on the whole catalogue.</p>')
    if data["verdict_reasons"]:
        out.append('<ul id="verdict-reasons">' + "".join(f"<li>{_reason(r, data)}</li>" for r in data["verdict_reasons"]) + "</ul>")
    ep_counts, runtime_counts = tally(data["results"])
    out.append(f'<p id="ep-counts">{_e(data["ep"].get("name", "EP"))}: {_counts(ep_counts) or "no results"}.</p>')
    events = data["run"].get("machine_events") or []
    if events:
        out.append(f'<p id="machine-note">{len(events)} {"try was" if len(events) == 1 else "tries were"} lost to the machine (a worker '
                   'killed, stopped or starved of CPU from outside) and made again: <a href="#machine">not counted against the EP</a>.</p>')
    if runtime_counts:
        # onnxruntime's own contracts in the page's neutral colour, not red beside a verdict they do not decide
        out.append(f'<p class="runtime-counts" id="runtime-counts">onnxruntime\'s own contracts (subject <code>runtime</code>; '
                   f'their failures are <a href="#findings">findings against onnxruntime</a>, pytest\'s xfailed, and do not decide the verdict): '
                   f"{_counts(runtime_counts, coloured=False)}.</p>")
    return out


def _counts(counts: dict[str, int], coloured: bool = True) -> str:
    return ", ".join((f'<span class="out-{_e(name)}">{n} {_e(name)}</span>' if coloured else f"{n} {_e(name)}") for name, n in counts.items() if n)


def _split_counts(results: list[dict[str, Any]]) -> str:
    """The counts of a family or contract, onnxruntime's own apart in its neutral colour."""
    ep_counts, runtime_counts = tally(results)
    text = _counts(dict(sorted(ep_counts.items())))
    if runtime_counts:
        text += ("; " if text else "") + f'<span class="runtime-counts">onnxruntime: {_counts(dict(sorted(runtime_counts.items())), coloured=False)}</span>'
    return text


def _reason(reason: str, data: dict[str, Any]) -> str:
    """A verdict reason, linking to the failures of the contract it names (or its results)."""
    contract = reason_contract(reason, data.get("contracts") or {})
    if contract is None:
        return _e(reason)
    broken = any(r["contract"] == contract and r["outcome"] in BROKEN_VALUES for r in data["results"])
    return f'<a href="#{failure_anchor(contract) if broken else contract_anchor(contract)}">{_e(reason)}</a>'


def _contents(data: dict[str, Any]) -> list[str]:
    """The table of contents, with counts: each section, each family of results."""
    failures = failures_of_the_ep(data["results"])
    items = ['<a href="#version-chain">Version chain</a>',
             f'<a href="#capabilities">Copy capabilities</a> ({len(data["capabilities"])} device{"s" if len(data["capabilities"]) != 1 else ""})',
             '<a href="#spec-claims">What the spec claims</a>',
             f'<a href="#failures">Failures of the EP</a> ({_cases_in(failures)})',
             f'<a href="#findings">Findings against onnxruntime</a> ({_cases_in(findings_apart(data["results"]))})']
    if data.get("waivers"):
        items.append(f'<a href="#waivers">Waivers</a> ({len(data["waivers"])})')
    if data["run"]["lost"]:
        items.append(f'<a href="#lost">Checks lost to crashes or hangs</a> ({len(data["run"]["lost"])})')
    if data["run"].get("machine_events"):
        items.append(f'<a href="#machine">Tries lost to the machine, not counted against the EP</a> ({len(data["run"]["machine_events"])})')
    families = _families(data["results"], data.get("contracts", {}))
    sub = "".join(f'<li><a href="#{anchor("family-" + family)}">{_e(family)}</a>: {_split_counts(results)}</li>'
                  for family, results in families.items())
    items.append(f'<a href="#results">All results</a> ({len(data["results"])})' + (f"<ul>{sub}</ul>" if sub else ""))
    return ['<nav id="contents"><h2>Contents</h2><ul>', *(f"<li>{item}</li>" for item in items), "</ul></nav>"]


def _cases_in(results: list[dict[str, Any]]) -> str:
    contracts = len({r["contract"] for r in results})
    return f"{len(results)} case{'s' if len(results) != 1 else ''} in {contracts} contract{'s' if contracts != 1 else ''}" if results else "none"


def _version_chain(data: dict[str, Any]) -> list[str]:
    ort, run = data["onnxruntime"], data["run"]
    rows = [
        ("kit", f"ort-ep-conformance {data['kit_version']}"),
        ("spec digest (sha256)", data.get("spec_digest", "")),
        ("onnxruntime", f"{ort.get('version')} ({ort.get('package')})"),
        ("onnxruntime build", (ort.get("build") or "").strip()),
    ]
    for entry in data.get("eps", [data["ep"]]):
        declared = f"declared in {entry.get('spec')}" if entry.get("declared") else "no vendor declaration: checked against what the EP advertises"
        rows.append(("EP", f"{entry.get('name')} version {entry.get('version') or 'unknown'}; {declared}"))
        if ep_origin(entry):
            rows.append(("EP build", ep_origin(entry)))
    rows += [("where it ran", line) for line in run_conditions(data)]
    for device in data["devices"]:
        rows.append((f"device {device['label']}", device_line(device)))
    rows.append(("run", f"{run['started']}, {run['duration_s']} s, {run['collected']} checks collected, isolation {run['isolation']}"
                        + (", strict" if data.get("strict") else "") + (", interrupted" if run.get("interrupted") else "")))
    rows.append(("platform", f"Python {run['python']} on {run['platform']}"))
    rows.append(("command", run.get("command", "")))
    out = ['<h2 id="version-chain-heading">Version chain</h2>']
    return out + _table(("what", "value"), ([f"<th>{_e(k)}</th>", f"<td><code>{_e(v)}</code></td>"] for k, v in rows), "version-chain")


def _capabilities(matrices: list[dict[str, Any]], eps: list[dict[str, Any]]) -> list[str]:
    out = ['<h2 id="capabilities">Copy capabilities</h2>',
           '<p class="muted">Every (source, destination) pair of memories, tried with copy_tensors on real bytes.</p>']
    out += _table(("status", "meaning"), ([f'<td class="cap-{s}">{s}</td>', f"<td>{_e(m)}</td>"] for s, m in STATUS_LEGEND.items()), "capability-legend")
    for matrix in matrices:
        out.append(f"<h3>{_e(matrix['ep'])} — {_e(matrix['device'])}</h3>")
        if matrix.get("error"):
            out.append(f'<p class="out-error">Probe lost: {_e(matrix["error"])}</p>')
            continue
        note = unlisted_note(eps, matrix)
        if note:
            out.append(f'<p class="muted unlisted">{_e(note)}</p>')
        names = list(dict.fromkeys([p["source"] for p in matrix["pairs"]] + [p["destination"] for p in matrix["pairs"]]))
        by_pair = {(p["source"], p["destination"]): p for p in matrix["pairs"]}
        rows = []
        for source in names:
            cells = [f"<th>{_e(source)}</th>"]
            for destination in names:
                pair = by_pair.get((source, destination))
                if pair is None:
                    cells.append("<td></td>")
                    continue
                required = " (required)" if pair["required"] else ""
                cells.append(f'<td class="cap-{_e(pair["status"])}" title="{_e(pair["detail"])}">{_e(pair["status"])}{required}'
                             f'<br><small>{_e(pair["detail"])}</small></td>')
            rows.append(cells)
        out += _table(["source \\ destination", *names], rows, f"capabilities-{matrix['device']}")
        out += _throughput(matrix)
        lines = imports_lines(matrix.get("imports"))
        if lines:
            items = "".join(f"<li>{_e(line[2:])}</li>" for line in lines if line.startswith("- "))
            text = " ".join(_e(line) for line in lines if not line.startswith("- "))
            out.append(f'<div class="imports"><p>{text}</p>' + (f"<ul>{items}</ul>" if items else "") + "</div>")
    return out


def _throughput(matrix: dict[str, Any]) -> list[str]:
    """GB/s per direction, method and size class beside the ratio to host memcpy: measured,
    informational, in neutral colours (nothing here passes or fails)."""
    figures = throughput.table(matrix)
    if figures is None:
        return []
    device = matrix["device"]
    out = [f'<h4>Copy throughput of {_e(device)} <small class="muted">(measured, informational)</small></h4>',
           f'<p class="muted measured-note">{_e(throughput.NOTE)}</p>',
           f'<div class="scroll"><table class="throughput" id="{anchor("throughput-" + str(device))}">'
           '<thead><tr><th>source</th><th>destination</th><th>method</th>'
           + "".join(f"<th>{_e(size)}</th>" for size in figures.sizes) + "</tr></thead><tbody>",
           '<tr class="host"><th colspan="3">host memcpy (numpy)</th>'
           + "".join(f'<td class="figure" data-size="{_e(size)}" data-gbps="{_e(g)}">{"-" if g is None else _e(throughput.gbps_text(g)) + " GB/s"}</td>'
                     for size, g in zip(figures.sizes, figures.host_memcpy, strict=False)) + "</tr>"]
    for row in figures.rows:
        cells = [_figure_cell(size, figure) for size, figure in zip(figures.sizes, row.figures, strict=False)]
        out.append(f'<tr data-method="{_e(row.method)}"><td>{_e(row.source)}</td><td>{_e(row.destination)}</td><td><code>{_e(row.method)}</code></td>'
                   + "".join(cells) + "</tr>")
    return out + ["</tbody></table></div>"]


def _figure_cell(size: str, figure: throughput.Figure) -> str:
    attributes = f'class="figure" data-size="{_e(size)}" data-gbps="{_e(figure.gbps)}" data-ratio="{_e(figure.ratio)}"'
    if figure.gbps is None:
        return f'<td {attributes} title="not measured: the time budget was spent">-</td>'
    ratio = "" if figure.ratio is None else f'<br><span class="ratio">{figure.ratio:.2f}× memcpy</span>'
    return f"<td {attributes}>{_e(throughput.gbps_text(figure.gbps))} GB/s{ratio}</td>"


def _spec_claims(ep: dict[str, Any], first: bool = True) -> list[str]:
    """One EP's spec claims; the ids of the first EP's section are unsuffixed."""
    suffix = "" if first else f"-{ep.get('label')}"
    out = [f'<h2 id="{anchor("spec-claims" + suffix)}">What the spec claims' + ("" if first else f": {_e(ep.get('name'))}") + "</h2>"]
    if not ep.get("declared"):
        return out + ["<p>No EP spec: the run was checked against what the EP advertises.</p>"]
    claims = ep.get("claims") or []
    if not claims:
        return out + [f"<p>From <code>{_e(ep.get('spec'))}</code>; this report does not carry its claims.</p>"]
    unverified = unverified_count(claims)
    summary = f"{len(claims) - unverified} of {len(claims)} claims verified by a run on the real EP"
    if unverified:
        summary += f"; <b>{unverified} unverified</b> (highlighted): contradicted by this run, or taken from the sources and confirmed by no run"
    out.append(f"<p>From <code>{_e(ep.get('spec'))}</code>: {summary}.</p>")
    if ep.get("draft"):
        out.append(f"<p><b>A draft</b> (<code>ort-conformance init</code>): claims nobody has confirmed in the file: "
                   f"{_e(', '.join(ep['draft']['unconfirmed']) or 'none')}; a strict run with it is incomplete until they are "
                   "confirmed and its <code>draft</code> line deleted.</p>")
    rows = ([f"<td><code>{_e(c['claim'])}</code></td>", f"<td>{_e(c['value'])}</td>",
             f'<td class="verified">{"yes" if c["verified"] else "no — unverified"}</td>', f"<td>{_e(claim_evidence(c))}</td>", f"<td>{_e(c['how'])}</td>",
             f"<td>{'<br>'.join(_e(s) for s in c.get('sources', ()))}</td>"] for c in claims)
    out += _table(("claim", "value", "verified", "this run", "the spec says", "sources"), rows, f"spec-claims-table{suffix}",
                  ["" if c["verified"] else "claim-unverified" for c in claims])
    notes = ep.get("unverified") or []
    if notes:
        out += ["<p>Open questions the spec names:</p>", "<ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>"]
    return out


def _families(results: list[dict[str, Any]], contracts: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for result in results:
        family = contracts.get(result["contract"], {}).get("family") or result["contract"].split(".")[0]
        grouped[family].append(result)
    return dict(sorted(grouped.items()))


def _failures(data: dict[str, Any]) -> list[str]:
    failures = failures_of_the_ep(data["results"])
    out = [f'<h2 id="failures">Failures of the EP <small class="muted">({_cases_in(failures)})</small></h2>']
    if not failures:
        return out + ["<p>None.</p>"]
    scripts = groups.reproducers(data["results"])
    for family, results in _families(failures, data.get("contracts", {})).items():
        out.append(f"<h3>{_e(family)} ({len(results)} failing case{'s' if len(results) != 1 else ''})</h3>")
        out += _by_contract(results, data.get("contracts", {}), "failure", scripts)
    return out


def _findings(data: dict[str, Any]) -> list[str]:
    apart = findings_apart(data["results"])
    out = [f'<h2 id="findings">Findings against onnxruntime <small class="muted">({_cases_in(apart)})</small></h2>',
           "<p>Broken <code>runtime</code>-subject contracts: defects of onnxruntime itself; they do not make the EP non-conformant "
           "(pytest counts them xfailed).</p>"]
    shared = shared_with_the_ep(data["results"])
    if shared:
        out.append(f'<p id="shared">Failing cases of subject <code>both</code> (onnxruntime passed a bad request on, and the EP accepted it): '
                   f'{len(shared)}, counted and shown with the <a href="#failures">EP\'s failures</a>.</p>')
    if not apart:
        return out + ["<p>None.</p>"]
    return out + _by_contract(apart, data.get("contracts", {}), "finding", groups.reproducers(data["results"]))


def _by_contract(results: list[dict[str, Any]], contracts: dict[str, Any], kind: str, scripts: dict[int, str]) -> list[str]:
    """Per contract: its statement, spec excerpt and message pattern once, then a row per failing
    case with its parameters, what it saw and its reproducer's file (report/groups.py)."""
    out = []
    for group in groups.grouped(results, scripts):
        contract = contracts.get(group.contract, {})
        count = len(group.rows)
        out += [f'<div class="{kind}" id="{failure_anchor(group.contract)}">',
                f'<h4><code>{_e(group.contract)}</code> — {count} failing case{"s" if count != 1 else ""}</h4>']
        if contract.get("statement"):
            out.append(f"<p><b>Statement</b> ({_e(contract.get('severity'))}, subject {_e(contract.get('subject'))}): {_e(contract['statement'])}</p>")
        out.append(f"<p><b>Spec</b> <code>{_e(group.rows[0].result['spec'])}</code></p>")
        if contract.get("excerpt"):
            out.append(f"<details><summary>the spec's entry</summary><pre>{_e(contract['excerpt'])}</pre></details>")
        shown = group.patterns[:groups.PATTERNS_SHOWN]
        more = len(group.patterns) - len(shown)
        out.append("<ul class=\"patterns\">" + "".join(f"<li>message ({n} case{'s' if n != 1 else ''}): <code>{_e(text)}</code></li>" for text, n in shown)
                   + (f"<li>and {more} other messages (each case's is in report.json)</li>" if more else "")
                   + (f"<li>expected: <code>{_e(group.expected)}</code></li>" if group.expected else "")
                   + "".join(f"<li>{_e(text)}" + ("" if n == count else f" ({n} cases)") + "</li>" for text, n in group.memory[:groups.PATTERNS_SHOWN])
                   + "</ul>")
        rows = ([f'<td><a href="#{case_anchor(row.result)}">{_e(row.result["device"])}</a></td>',
                 *(f"<td>{_e(row.result['params'].get(p, ''))}</td>" for p in group.params),
                 f'<td class="out-{_e(row.result["outcome"])}">{_e(row.result["outcome"])}</td>', f"<td>{_e(row.detail)}</td>",
                 f'<td><a href="{_e(row.reproducer)}"><code>{_e(row.reproducer)}</code></a></td>' if row.reproducer else "<td>—</td>"]
                for row in group.rows)
        out += _table(("device", *group.params, "outcome", "actual", "reproducer"), rows)
        out.append("</div>")
    return out


def _waivers(waivers: list[dict[str, Any]]) -> list[str]:
    if not waivers:
        return []
    out = ['<h2 id="waivers">Waivers</h2>']
    rows = ([f"<td><code>{_e(w['contract'])}</code></td>", f"<td>{_e(w['status'])}</td>", f"<td>{_e(w.get('cases', ''))}</td>",
             f"<td>{_e(w['reason'])}</td>", f'<td><a href="{_e(w["url"])}">{_e(w["url"])}</a></td>', f"<td>{_e(w.get('until') or '')}</td>",
             f"<td><code>{_e(w.get('spec') or '')}</code></td>"] for w in waivers)
    return out + _table(("contract", "status", "cases", "reason", "upstream", "until", "declared in"), rows, "waiver-table")


def _lost(lost: list[dict[str, Any]]) -> list[str]:
    if not lost:
        return []
    out = ['<h2 id="lost">Checks lost to crashes or hangs</h2>']
    return out + _table(("check", "outcome", "message"), ([f"<td><code>{_e(one['nodeid'])}</code></td>",
                                                           f'<td class="out-{_e(one["outcome"])}">{_e(one["outcome"])}</td>',
                                                           f"<td>{_e(one['message'])}</td>"] for one in lost))


def _machine(data: dict[str, Any]) -> list[str]:
    """Each try lost to the machine and not counted: the case (linked to its row), what happened, and the evidence."""
    events = data["run"].get("machine_events") or []
    if not events:
        return []
    results = {r["nodeid"]: r for r in data["results"] if r.get("nodeid")}

    def case(nodeid: str) -> str:
        code = f"<code>{_e(case_name(nodeid))}</code>"
        return f'<a href="#{case_anchor(results[nodeid])}">{code}</a>' if nodeid in results else code

    out = ['<h2 id="machine">Tries lost to the machine, not counted against the EP</h2>', f"<p>{_e(MACHINE_NOTE)}</p>"]
    rows = ([f"<td>{case(event['nodeid'])}</td>", f'<td class="out-{_e(event["outcome"])}">{_e(event["outcome"])}</td>',
             f"<td>{_e(event['text'])}</td>", f"<td>{_e(event['evidence'])}</td>"] for event in events)
    return out + _table(("case", "outcome", "what happened", "evidence"), rows, "machine-table")


def _all_results(data: dict[str, Any]) -> list[str]:
    """Every result: per family, a collapsed entry per contract (open when a case broke), a row
    per case with its anchor; the filter above them (page.py)."""
    out = ['<h2 id="results">All results, by contract family</h2>', *_filter(data["results"])]
    for family, results in _families(data["results"], data.get("contracts", {})).items():
        tally_ = Counter(r["outcome"] for r in results)
        out.append(f'<section class="family {" ".join(f"has-{_e(k)}" for k in tally_)}" id="{anchor("family-" + family)}">'
                   f"<h3>{_e(family)}: {_split_counts(results)}</h3>")
        by_contract: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for result in results:
            by_contract[result["contract"]].append(result)
        for contract_id, cases in by_contract.items():
            out += _contract_results(contract_id, cases, data.get("contracts", {}).get(contract_id) or {})
        out.append("</section>")
    return out


def _filter(results: list[dict[str, Any]]) -> list[str]:
    present = Counter(r["outcome"] for r in results)
    radios = [f'<label><input type="radio" name="outcome" value="all" id="show-all" checked> all ({len(results)})</label>']
    radios += [f'<label><input type="radio" name="outcome" value="{_e(o)}" id="show-{_e(o)}"> '
               f'<span class="out-{_e(o)}">{_e(o)}</span> ({present[o]})</label>' for o in page.OUTCOMES if present[o]]
    return ['<form id="filter" onsubmit="return false">', "<b>Show:</b> ", *radios,
            '<input type="search" id="filter-text" placeholder="filter by text" aria-label="filter the results by text" hidden>', "</form>"]


_CONTESTED = ' <span class="contested" title="its sources disagree; the contract says which rule it holds">contested</span>'


def _provenance(contract: dict[str, Any]) -> list[str]:
    """Where the contract's rule comes from, the API it needs, and for a contested rule, the rule
    held, for whom and why."""
    if not contract.get("provenance"):
        return []
    out = [f'<p class="provenance"><b>Provenance</b>: {_e(provenance_text(contract))}'
           + (f" — {_e(contract['provenance']['note'])}" if contract["provenance"].get("note") else "")
           + (f"; needs onnxruntime {_e(contract['since'])}'s API" if contract.get("since") else "") + "</p>"]
    contested = contract.get("contested")
    if contested:
        sides = "".join(f"<li>{_e(side['says'])} ({_e(side['ref'])})</li>" for side in contested["sides"])
        out.append(f'<p class="provenance"><b>Contested</b>: holds, for {_e(contested["for"])}: {_e(contested["holds"])} '
                   f"<b>Why</b>: {_e(contested['why'])}</p><ul>{sides}</ul>")
    return out


def _contract_results(contract_id: str, cases: list[dict[str, Any]], contract: dict[str, Any]) -> list[str]:
    tally_ = Counter(c["outcome"] for c in cases)
    opened = " open" if any(c["outcome"] in BROKEN_VALUES for c in cases) else ""
    classes = " ".join(f"has-{_e(k)}" for k in tally_)
    detail = f' — <a href="#{failure_anchor(contract_id)}">failure detail</a>' if opened else ""
    out = [f'<details class="contract {classes}" id="{contract_anchor(contract_id)}"{opened}>'
           f"<summary><code>{_e(contract_id)}</code>{_CONTESTED if contract.get('contested') else ''}: {_split_counts(cases)}</summary>{detail}",
           *_provenance(contract),
           '<div class="scroll"><table><thead><tr>' + "".join(f"<th>{h}</th>" for h in ("case", "outcome", "severity", "subject", "message", "spec"))
           + "</tr></thead><tbody>"]
    out += [f'<tr class="result is-{outcome}" id="{name}"><td><a href="#{name}">{_e(r["device"])}-{_e(params_label(r["params"]))}</a></td>'
            f'<td class="out-{outcome}">{outcome}</td><td>{_e(r["severity"])}</td><td>{_e(r["subject"])}</td>'
            f"<td>{_e(r['message'][:300])}{curve.figures(r)}</td><td><code>{_e(r['spec'])}</code></td></tr>"
            for r in cases for name, outcome in [(case_anchor(r), _e(r["outcome"]))]]
    return out + ["</tbody></table></div></details>"]
