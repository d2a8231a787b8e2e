"""report.html: one self-contained page for a reviewer.

No network, no external assets, no script: inline CSS only, so the page reads the same from a
bundle on a machine without access to anything. The verdict and the version chain come first,
then the copy-capability matrix, the EP's failures (grouped by contract family), the findings
against onnxruntime, waivers, and every result. Every value from the run is escaped.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from html import escape
from typing import Any, Iterable

from conformance.claims import unverified_count
from conformance.eps import memory_label
import conformance.report.throughput as throughput
from conformance.report.common import device_line, imports_lines, params_label, unlisted_note
from conformance.outcomes import BROKEN

STATUS_LEGEND = {
    "supported": "the bytes arrived intact",
    "unverified": "the copy returned, but its bytes could not be read back to check them",
    "broken": "the copy claimed success but the bytes differ",
    "required_but_missing": "refused, though the contract requires it",
    "not_required": "refused; both ends are CPU-visible, no copy is needed",
    "unsupported": "refused, and no contract requires it",
}

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 2em 3em; color: #1b1f23; background: #fff; }
h1 { margin: .6em 0 .2em; } h2 { border-bottom: 2px solid #d0d7de; padding-bottom: .2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .5em 0 1em; } th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f4f6; } code, pre { font: 12px/1.4 ui-monospace, monospace; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; padding: 8px; overflow-x: auto; white-space: pre-wrap; }
.verdict { font-size: 1.5em; font-weight: bold; padding: .4em .8em; border-radius: 6px; display: inline-block; color: #fff; }
.verdict-conformant { background: #1a7f37; } .verdict-non_conformant { background: #cf222e; } .verdict-incomplete { background: #9a6700; }
.strict { font-weight: bold; color: #8250df; }
.cap-supported { background: #aceebb; } .cap-broken { background: #ff8182; } .cap-required_but_missing { background: #ffb3b8; }
.cap-not_required { background: #eaeef2; } .cap-unverified { background: #ddf4ff; } .cap-unsupported { background: #fff1b8; }
.out-pass { color: #1a7f37; } .out-fail, .out-crash, .out-timeout { color: #cf222e; font-weight: bold; }
.out-error { color: #9a6700; font-weight: bold; } .out-not_run, .out-waived { color: #9a6700; }
.out-not_applicable { color: #57606a; }
h5 { margin: 1em 0 .3em; font-size: 1em; }
.failure { border-left: 5px solid #cf222e; padding: .2em 1em; margin: 1em 0; background: #fff8f8; }
.finding { border-left: 5px solid #8250df; padding: .2em 1em; margin: 1em 0; background: #fbf8ff; }
.muted { color: #57606a; }
.claim-unverified td { background: #fff8c5; } .claim-unverified .verified { font-weight: bold; color: #9a6700; }
.throughput td.figure { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.throughput .ratio { color: #57606a; } .throughput tr.host td, .throughput tr.host th { background: #f6f8fa; }
"""


def render(data: dict[str, Any]) -> str:
    ep = data["ep"]
    title = f"Conformance report: {ep.get('name', '?')}"
    body = [
        f"<h1>{_e(title)}</h1>",
        *_verdict(data),
        *_version_chain(data),
        *_capabilities(data["capabilities"], data.get("eps", [data["ep"]])),
        *(line for index, entry in enumerate(data.get("eps", [data["ep"]])) for line in _spec_claims(entry, first=index == 0)),
        *_failures(data),
        *_findings(data),
        *_waivers(data.get("waivers", [])),
        *_lost(data["run"]["lost"]),
        *_all_results(data),
    ]
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{CSS}</style>",
        "</head><body>",
        *body,
        "</body></html>",
    ]) + "\n"


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _table(header: Iterable[str], rows: Iterable[Iterable[str]], table_id: str = "", row_classes: Iterable[str] = ()) -> list[str]:
    """Rows are already-escaped cells; `row_classes`, when given, a class per row ('' for none)."""
    attribute = f' id="{_e(table_id)}"' if table_id else ""
    out = [f"<table{attribute}><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    classes = list(row_classes)
    for index, cells in enumerate(rows):
        css = classes[index] if index < len(classes) else ""
        out.append((f'<tr class="{_e(css)}">' if css else "<tr>") + "".join(cells) + "</tr>")
    return out + ["</tbody></table>"]


def _verdict(data: dict[str, Any]) -> list[str]:
    verdict = data["verdict"]
    out = [f'<p id="verdict"><span class="verdict verdict-{_e(verdict)}">Verdict: {_e(verdict)}</span></p>']
    if data.get("strict"):
        out.append('<p class="strict" id="strict">Strict run (certification mode): a required contract that could not run fails the run.</p>')
    if data["verdict_reasons"]:
        out.append("<ul>" + "".join(f"<li>{_e(r)}</li>" for r in data["verdict_reasons"]) + "</ul>")
    summary = ", ".join(f'<span class="out-{_e(name)}">{count} {_e(name)}</span>' for name, count in data["summary"].items() if count)
    findings = len(data["findings"])
    aside = f" ({findings} of the failures {'is a finding' if findings == 1 else 'are findings'} against onnxruntime, not the EP)" if findings else ""
    out.append(f"<p>Results: {summary or 'none'}{aside}.</p>")
    return out


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
        if entry.get("library"):
            rows.append(("EP library", f"{entry['library']} sha256 {entry['library_sha256']}"))
    for device in data["devices"]:
        rows.append((f"device {device['label']}", device_line(device)))
    rows.append(("run", f"{run['started']}, {run['duration_s']} s, {run['collected']} checks collected, isolation {run['isolation']}"
                        + (", strict" if data.get("strict") else "") + (", interrupted" if run.get("interrupted") else "")))
    rows.append(("platform", f"Python {run['python']} on {run['platform']}"))
    rows.append(("command", run.get("command", "")))
    out = ["<h2>Version chain</h2>"]
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
           f'<table class="throughput" id="throughput-{_e(device)}"><thead><tr><th>source</th><th>destination</th><th>method</th>'
           + "".join(f"<th>{_e(size)}</th>" for size in figures.sizes) + "</tr></thead><tbody>",
           '<tr class="host"><th colspan="3">host memcpy (numpy)</th>'
           + "".join(f'<td class="figure" data-size="{_e(size)}" data-gbps="{_e(g)}">{"-" if g is None else _e(throughput.gbps_text(g)) + " GB/s"}</td>'
                     for size, g in zip(figures.sizes, figures.host_memcpy, strict=False)) + "</tr>"]
    for row in figures.rows:
        cells = [_figure_cell(size, figure) for size, figure in zip(figures.sizes, row.figures, strict=False)]
        out.append(f'<tr data-method="{_e(row.method)}"><td>{_e(row.source)}</td><td>{_e(row.destination)}</td><td><code>{_e(row.method)}</code></td>'
                   + "".join(cells) + "</tr>")
    return out + ["</tbody></table>"]


def _figure_cell(size: str, figure: throughput.Figure) -> str:
    attributes = f'class="figure" data-size="{_e(size)}" data-gbps="{_e(figure.gbps)}" data-ratio="{_e(figure.ratio)}"'
    if figure.gbps is None:
        return f'<td {attributes} title="not measured: the time budget was spent">-</td>'
    ratio = "" if figure.ratio is None else f'<br><span class="ratio">{figure.ratio:.2f}× memcpy</span>'
    return f"<td {attributes}>{_e(throughput.gbps_text(figure.gbps))} GB/s{ratio}</td>"


def _spec_claims(ep: dict[str, Any], first: bool = True) -> list[str]:
    """One EP's spec claims; the ids of the first EP's section are unsuffixed."""
    suffix = "" if first else f"-{ep.get('label')}"
    out = [f'<h2 id="spec-claims{_e(suffix)}">What the spec claims' + ("" if first else f": {_e(ep.get('name'))}") + "</h2>"]
    if not ep.get("declared"):
        return out + ["<p>No EP spec: the run was checked against what the EP advertises.</p>"]
    claims = ep.get("claims") or []
    if not claims:
        return out + [f"<p>From <code>{_e(ep.get('spec'))}</code>; this report does not carry its claims.</p>"]
    unverified = unverified_count(claims)
    summary = f"{len(claims) - unverified} of {len(claims)} claims verified by a run on the real EP"
    if unverified:
        summary += f"; <b>{unverified} unverified</b> (highlighted): taken from the sources, not confirmed by a run"
    out.append(f"<p>From <code>{_e(ep.get('spec'))}</code>: {summary}.</p>")
    rows = ([f"<td><code>{_e(c['claim'])}</code></td>", f"<td>{_e(c['value'])}</td>",
             f'<td class="verified">{"yes" if c["verified"] else "no — unverified"}</td>', f"<td>{_e(c['how'])}</td>",
             f"<td>{'<br>'.join(_e(s) for s in c.get('sources', ()))}</td>"] for c in claims)
    out += _table(("claim", "value", "verified", "how", "sources"), rows, f"spec-claims-table{suffix}",
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


# Failing cases shown in full per contract; the rest of its failing cases are listed in a table.
CASES_IN_FULL = 3


def _failures(data: dict[str, Any]) -> list[str]:
    failures = [r for r in data["results"] if r["outcome"] in BROKEN and r["subject"] == "ep"]
    out = ['<h2 id="failures">Failures of the EP</h2>']
    if not failures:
        return out + ["<p>None.</p>"]
    for family, results in _families(failures, data.get("contracts", {})).items():
        out.append(f"<h3>{_e(family)} ({len(results)} failing cases)</h3>")
        out += _by_contract(results, data.get("contracts", {}), "failure")
    return out


def _findings(data: dict[str, Any]) -> list[str]:
    out = ['<h2 id="findings">Findings against onnxruntime</h2>',
           "<p>Broken <code>runtime</code>-subject contracts: defects of onnxruntime itself; they do not make the EP non-conformant.</p>"]
    if not data["findings"]:
        return out + ["<p>None.</p>"]
    return out + _by_contract(data["findings"], data.get("contracts", {}), "finding")


def _by_contract(results: list[dict[str, Any]], contracts: dict[str, Any], kind: str) -> list[str]:
    """Per contract: its statement and spec excerpt once, its first cases in full, the rest listed."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for result in results:
        grouped[result["contract"]].append(result)
    out = []
    for contract_id, cases in grouped.items():
        contract = contracts.get(contract_id, {})
        out += [f'<div class="{kind}">', f'<h4><code>{_e(contract_id)}</code> — {len(cases)} case{"s" if len(cases) != 1 else ""}</h4>']
        if contract.get("statement"):
            out.append(f"<p><b>Statement</b> ({_e(contract.get('severity'))}, subject {_e(contract.get('subject'))}): {_e(contract['statement'])}</p>")
        out.append(f"<p><b>Spec</b> <code>{_e(cases[0]['spec'])}</code></p>")
        if contract.get("excerpt"):
            out.append(f"<pre>{_e(contract['excerpt'])}</pre>")
        out += [line for case in cases[:CASES_IN_FULL] for line in _case(case)]
        if cases[CASES_IN_FULL:]:
            out.append(f"<p>{len(cases) - CASES_IN_FULL} more failing cases:</p>")
            out += _table(("device-params", "outcome", "message"),
                          ([f"<td>{_e(c['device'])}-{_e(params_label(c['params']))}</td>", f'<td class="out-{_e(c["outcome"])}">{_e(c["outcome"])}</td>',
                            f"<td>{_e(c['message'][:300])}</td>"] for c in cases[CASES_IN_FULL:]))
        out.append("</div>")
    return out


def _case(result: dict[str, Any]) -> list[str]:
    out = [f'<h5>[{_e(result["device"])}-{_e(params_label(result["params"]))}] — '
           f'<span class="out-{_e(result["outcome"])}">{_e(result["outcome"])}</span></h5>',
           f"<p>{_e(result['message'])}</p>"]
    for violation in result.get("details", {}).get("violations", []):
        out.append(f"<p><b>Violation:</b> {_e(violation.get('message'))}</p>")
        rows = [(k, violation.get(k)) for k in ("expected", "actual") if violation.get(k) is not None]
        rows += [(f"memory of the {role}", memory_label(memory)) for role, memory in (violation.get("memory") or {}).items()]
        if rows:
            out += _table(("", "value"), ([f"<th>{_e(k)}</th>", f"<td><code>{_e(v)}</code></td>"] for k, v in rows))
        if violation.get("reproducer"):
            out += ["<p>Reproduce with:</p>", f"<pre>{_e(violation['reproducer'])}</pre>"]
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


def _all_results(data: dict[str, Any]) -> list[str]:
    out = ['<h2 id="results">All results, by contract family</h2>']
    for family, results in _families(data["results"], data.get("contracts", {})).items():
        tally = Counter(r["outcome"] for r in results)
        summary = ", ".join(f'<span class="out-{_e(k)}">{n} {_e(k)}</span>' for k, n in sorted(tally.items()))
        opened = " open" if any(r["outcome"] in BROKEN for r in results) else ""
        out.append(f"<details{opened}><summary><b>{_e(family)}</b>: {summary}</summary>")
        rows = ([f"<td><code>{_e(r['contract'])}</code></td>", f"<td>{_e(r['device'])}</td>", f"<td>{_e(params_label(r['params']))}</td>",
                 f'<td class="out-{_e(r["outcome"])}">{_e(r["outcome"])}</td>', f"<td>{_e(r['severity'])}</td>", f"<td>{_e(r['subject'])}</td>",
                 f"<td>{_e(r['message'][:300])}</td>", f"<td><code>{_e(r['spec'])}</code></td>"] for r in results)
        out += _table(("contract", "device", "params", "outcome", "severity", "subject", "message", "spec"), rows, f"results-{family}")
        out.append("</details>")
    return out
