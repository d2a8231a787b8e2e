"""report.md: the verdict first, then failures and findings, then the copy matrix and every result."""

from __future__ import annotations

from typing import Any

from conformance.catalogue.claims import unverified_count
from conformance.outcomes import AGAINST_EP, BROKEN
import conformance.report.throughput as throughput
from conformance.report.common import (device_line, ep_origin, imports_lines, params_label, partial_run, provenance_text, run_conditions, tally,
                                       unlisted_note, verdict_of)


def cell(text: Any) -> str:
    """`text` as one cell of a Markdown table."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(data: dict[str, Any]) -> str:
    ep, ort = data["ep"], data["onnxruntime"]
    out = [f"# Conformance report: {ep.get('name', '?')}", ""]
    out.append(f"**Verdict: {verdict_of(data)}**" + ("" if not data["verdict_reasons"] else " — " + "; ".join(data["verdict_reasons"])))
    if data.get("strict"):
        out += ["", "Strict run (certification mode): a required contract that could not run fails the run."]
    if partial_run(data):
        out += ["", f"**Partial run**: {partial_run(data)}; not a verdict on the whole catalogue."]
    out.append("")
    out.append(f"- kit {data['kit_version']}, spec digest `{data['spec_digest'][:16]}`")
    out.append(f"- onnxruntime {ort.get('version')} ({ort.get('package')}), {ort.get('build', '').strip()}")
    for entry in data["eps"]:
        declared = f"declared in {entry['spec']}" if entry["declared"] else "no vendor declaration was given: checked against what the EP advertises"
        origin = f", {ep_origin(entry)}" if ep_origin(entry) else ""
        out.append(f"- EP {entry['name']} (version {entry['version'] or 'unknown'}; {declared}{origin})")
    out += [f"- **{line}**" for line in run_conditions(data)]
    for device in data["devices"]:
        out.append(f"- device `{device['label']}`: {device_line(device)}")
    ep_counts, runtime_counts = tally(data["results"])
    summary = ", ".join(f"{count} {name}" for name, count in ep_counts.items() if count)
    out += ["", f"Results of the EP: {summary or 'none'}."]
    if runtime_counts:
        out.append("onnxruntime's own contracts (subject `runtime`; their failures are findings against onnxruntime and do not decide the verdict): "
                   + ", ".join(f"{count} {name}" for name, count in runtime_counts.items() if count) + ".")
    out.append("")

    results = data["results"]
    failures = [r for r in results if r["outcome"] in BROKEN and r["subject"] in AGAINST_EP]
    out += ["## Failures of the EP", ""]
    out += [_detail(r) for r in failures] or ["None.", ""]
    out += ["## Findings against onnxruntime", "",
            "Broken `runtime`-subject contracts: defects of onnxruntime itself; they do not make the EP non-conformant.", ""]
    out += [_detail(r) for r in data["findings"]] or ["None.", ""]
    if data["run"]["lost"]:
        out += ["## Checks lost to crashes or hangs", ""]
        out += [f"- `{cell(one['nodeid'])}`: {one['outcome']}: {cell(one['message'])}" for one in data["run"]["lost"]] + [""]

    if data.get("waivers"):
        out += ["## Waivers", "", "| contract | status | cases | reason | upstream | until | declared in |", "| --- | --- | --- | --- | --- | --- | --- |"]
        out += [f"| {w['contract']} | {w['status']} | {w['cases']} | {cell(w['reason'])} | {w['url']} | {w['until'] or ''} | {w['spec'] or ''} |"
                for w in data["waivers"]] + [""]
    for index, entry in enumerate(data["eps"]):
        out += spec_claims(entry, named=index > 0)
    out += ["## Copy capabilities", ""]
    for matrix in data["capabilities"]:
        out.append(f"### {matrix['ep']} — {matrix['device']}")
        out.append("")
        if matrix.get("error"):
            out += [f"Probe lost: {matrix['error']}", ""]
            continue
        note = unlisted_note(data["eps"], matrix)
        out += [note, ""] if note else []
        out += pairs_table(matrix) + [""]
        out += throughput_table(matrix, "####")
        out += imports_lines(matrix.get("imports")) + ([""] if matrix.get("imports") else [])

    out += contracts_table(data)
    out += ["## All results", "", "| contract | device | params | outcome | severity | subject | message | spec |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        contested = " (**contested**)" if r.get("contested") else ""
        out.append(f"| {r['contract']}{contested} | {r['device']} | {cell(params_label(r['params']))} | {r['outcome']} | {r['severity']} | {r['subject']} "
                   f"| {cell(r['message'][:200])} | {r['spec']} |")
    out.append("")
    run = data["run"]
    out.append(f"Run: {run['started']}, {run['duration_s']} s, {run['collected']} checks collected, isolation {run['isolation']}, "
               f"Python {run['python']} on {run['platform']}.")
    return "\n".join(out) + "\n"


def contracts_table(data: dict[str, Any]) -> list[str]:
    """The contracts that ran: where each rule comes from, the API it needs, and, for a rule its
    sources disagree on, the rule the kit holds and for whom."""
    ran = dict.fromkeys(r["contract"] for r in data["results"])
    contracts = data.get("contracts") or {}
    out = ["## Contracts", "", f"Where each rule comes from, and the onnxruntime API it needs; this run certifies "
           f"onnxruntime {data.get('api_level') or '?'}'s API.", "", "| contract | provenance | needs API | contested |", "| --- | --- | --- | --- |"]
    for contract_id in ran:
        entry = contracts.get(contract_id) or {}
        contested = entry.get("contested")
        held = f"**contested**: holds, for {cell(contested['for'])}: {cell(contested['holds'])}" if contested else ""
        out.append(f"| {contract_id} | {cell(provenance_text(entry))} | {entry.get('since') or ''} | {held} |")
    return out + [""]


def spec_claims(ep: dict[str, Any], heading: str = "##", named: bool = False) -> list[str]:
    """The EP spec's claims, each marked verified or not by a run on the real EP; `named` puts
    the EP's name in the heading (the second EP of a run onwards)."""
    out = [f"{heading} What the spec claims" + (f": {ep.get('name')}" if named else ""), ""]
    if not ep.get("declared"):
        return out + ["No EP spec: the run was checked against what the EP advertises.", ""]
    claims = ep.get("claims") or []
    if not claims:
        return out + [f"From `{ep.get('spec')}`; this report does not carry its claims.", ""]
    unverified = unverified_count(claims)
    out += [f"From `{ep.get('spec')}`: {len(claims) - unverified} of {len(claims)} claims verified by a run on the real EP"
            + (f"; **{unverified} unverified** (marked **no**): taken from the sources, not confirmed by a run." if unverified else "."), ""]
    out += ["| claim | value | verified | how |", "| --- | --- | --- | --- |"]
    out += [f"| {c['claim']} | {cell(c['value'])} | {'yes' if c['verified'] else '**no**'} | {cell(c['how'])} |" for c in claims]
    notes = ep.get("unverified") or []
    if notes:
        out += ["", "Open questions the spec names:", "", *(f"- {cell(note)}" for note in notes)]
    return out + [""]


def pairs_table(matrix: dict[str, Any], detail_limit: int | None = None) -> list[str]:
    """The copy matrix of one EP device: a row per pair of memories, with its status."""
    return ["| source | destination | status | required | detail |", "| --- | --- | --- | --- | --- |"] + [
        f"| {p['source']} | {p['destination']} | {p['status']} | {'yes' if p['required'] else 'no'} | {cell(p['detail'][:detail_limit])} |"
        for p in matrix["pairs"]]


def throughput_table(matrix: dict[str, Any], heading: str) -> list[str]:
    """GB/s per direction, method and size class, with the ratio to host memcpy; informational."""
    figures = throughput.table(matrix)
    if figures is None:
        return []
    out = [f"{heading} Copy throughput of `{matrix['device']}` (measured, informational)", "", throughput.NOTE, "",
           "| source | destination | method | " + " | ".join(figures.sizes) + " |",
           "| --- | --- | --- | " + " | ".join("---" for _ in figures.sizes) + " |",
           "| host memcpy (numpy) | | | " + " | ".join("-" if g is None else f"{throughput.gbps_text(g)} GB/s" for g in figures.host_memcpy) + " |"]
    out += [f"| {row.source} | {row.destination} | {row.method} | " + " | ".join(f.text() for f in row.figures) + " |" for row in figures.rows]
    return out + [""]


def _detail(result: dict[str, Any]) -> str:
    lines = [f"### `{result['contract']}` [{result['device']}-{params_label(result['params'])}] — {result['outcome']}", "",
             f"{result['message']}", "", f"Spec: `{result['spec']}`", ""]
    for violation in result["details"].get("violations", [])[:3]:
        if violation.get("expected") or violation.get("actual"):
            lines += [f"- expected: {cell(violation.get('expected'))}", f"- actual: {cell(violation.get('actual'))}"]
        if violation.get("reproducer"):
            lines += ["", "```python", violation["reproducer"], "```"]
    lines.append("")
    return "\n".join(lines)
