"""report.md: the verdict first, then the copy matrix and the spec's claims, the failures and findings
grouped by contract (report/groups.py), and every result."""

from __future__ import annotations

from typing import Any

from conformance.catalogue.claims import unverified_count
import conformance.report.groups as groups
from conformance.report.evidence import claim_evidence
import conformance.report.throughput as throughput
from conformance.report.common import (MACHINE_NOTE, code_span, counts_text, device_line, ep_origin, failures_of_the_ep, findings_apart,
                                       imports_lines, machine_lines, params_label, partial_run, provenance_text, run_conditions, shared_with_the_ep,
                                       tally, unlisted_note, verdict_of)


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
        out.append(f"- device {code_span(device['label'])}: {device_line(device)}")
    out += [f"- {line}" for line in machine_lines(data)]
    ep_counts, runtime_counts = tally(data["results"])
    out += ["", f"Results of the EP: {counts_text(ep_counts)}.", ""]
    if runtime_counts:  # a paragraph of its own
        out += ["onnxruntime's own contracts (subject `runtime`; their failures are findings against onnxruntime, pytest's xfailed, "
                f"and do not decide the verdict): {counts_text(runtime_counts)}.", ""]

    # The copy matrix and the spec's claims first: what works, at a glance, before the failures.
    out += capabilities_section(data)
    for index, entry in enumerate(data["eps"]):
        out += spec_claims(entry, named=index > 0)
    results = data["results"]
    scripts = groups.reproducers(results)
    failures = failures_of_the_ep(results)
    out += [f"## Failures of the EP: {_cases_in(failures)}", ""]
    out += [line for group in groups.grouped(failures, scripts) for line in _group(group, data.get("contracts") or {})] or ["None.", ""]
    apart = findings_apart(results)
    out += [f"## Findings against onnxruntime: {_cases_in(apart)}", "",
            "Broken `runtime`-subject contracts: defects of onnxruntime itself; they do not make the EP non-conformant "
            "(pytest counts them xfailed).", ""]
    out += [line for group in groups.grouped(apart, scripts) for line in _group(group, data.get("contracts") or {})] or ["None.", ""]
    shared = shared_with_the_ep(results)
    if shared:
        out += [f"Failing cases of subject `both` (onnxruntime passed a bad request on, and the EP accepted it): {len(shared)}, "
                "counted and shown with the EP's failures above.", ""]
    if data["run"]["lost"]:
        out += ["## Checks lost to crashes or hangs", ""]
        out += [f"- {code_span(one['nodeid'])}: {one['outcome']}: {cell(one['message'])}" for one in data["run"]["lost"]] + [""]

    events = data["run"].get("machine_events") or []
    if events:
        out += ["## Tries lost to the machine, not counted against the EP", "", MACHINE_NOTE, ""]
        out += [f"- {code_span(event['nodeid'])} ({event['outcome']}): {cell(event['text'])}; evidence: {code_span(event['evidence'])}"
                for event in events] + [""]

    if data.get("waivers"):
        out += ["## Waivers", "", "| contract | status | cases | reason | upstream | until | declared in |", "| --- | --- | --- | --- | --- | --- | --- |"]
        out += [f"| {w['contract']} | {w['status']} | {w['cases']} | {cell(w['reason'])} | {w['url']} | {w['until'] or ''} | {w['spec'] or ''} |"
                for w in data["waivers"]] + [""]

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
        return out + [f"From {code_span(ep.get('spec'))}; this report does not carry its claims.", ""]
    unverified = unverified_count(claims)
    out += [f"From {code_span(ep.get('spec'))}: {len(claims) - unverified} of {len(claims)} claims verified by a run on the real EP"
            + (f"; **{unverified} unverified** (marked **no**): contradicted by this run, or taken from the sources and confirmed by no run."
               if unverified else "."), ""]
    draft = ep.get("draft")
    if draft:
        out += [f"**A draft** (`ort-conformance init`): claims nobody has confirmed in the file: {cell(', '.join(draft['unconfirmed']) or 'none')}; "
                "a strict run with it is incomplete until they are confirmed and its `draft` line deleted.", ""]
    out += ["| claim | value | verified | this run | the spec says |", "| --- | --- | --- | --- | --- |"]
    out += [f"| {c['claim']} | {cell(c['value'])} | {'yes' if c['verified'] else '**no**'} | {cell(claim_evidence(c))} | {cell(c['how'])} |" for c in claims]
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
    out = [f"{heading} Copy throughput of {code_span(matrix['device'])} (measured, informational)", "", throughput.NOTE, "",
           "| source | destination | method | " + " | ".join(figures.sizes) + " |",
           "| --- | --- | --- | " + " | ".join("---" for _ in figures.sizes) + " |",
           "| host memcpy (numpy) | | | " + " | ".join("-" if g is None else f"{throughput.gbps_text(g)} GB/s" for g in figures.host_memcpy) + " |"]
    out += [f"| {row.source} | {row.destination} | {row.method} | " + " | ".join(f.text() for f in row.figures) + " |" for row in figures.rows]
    return out + [""]


def capabilities_section(data: dict[str, Any]) -> list[str]:
    """Each EP device's copy matrix, its throughput and what its interop probe found."""
    out = ["## Copy capabilities", ""]
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
    return out


def _cases_in(results: list[dict[str, Any]]) -> str:
    contracts = len({r["contract"] for r in results})
    return f"{len(results)} case{'s' if len(results) != 1 else ''} in {contracts} contract{'s' if contracts != 1 else ''}" if results else "none"


def _group(group: groups.Group, contracts: dict[str, Any]) -> list[str]:
    """A contract's failing cases: the contract once, then a row per case (see report/groups.py)."""
    contract = contracts.get(group.contract, {})
    first = group.rows[0].result
    out = [f"### {code_span(group.contract)}: {len(group.rows)} failing case{'s' if len(group.rows) != 1 else ''}", ""]
    if contract.get("statement"):
        out += [f"{contract['statement']} ({contract.get('severity')}, subject {contract.get('subject')})", ""]
    out += [f"Spec: {code_span(first['spec'])}", ""]
    out += [f"- message ({count} case{'s' if count != 1 else ''}): {code_span(text)}" for text, count in group.patterns[:groups.PATTERNS_SHOWN]]
    if len(group.patterns) > groups.PATTERNS_SHOWN:
        out.append(f"- and {len(group.patterns) - groups.PATTERNS_SHOWN} other messages (each case's is in report.json)")
    out += [f"- expected: {cell(group.expected)}"] if group.expected else []
    out += [f"- {cell(text)}" + ("" if n == len(group.rows) else f" ({n} cases)") for text, n in group.memory[:groups.PATTERNS_SHOWN]]
    out += ["", "| device | " + " | ".join(cell(p) for p in group.params) + " | outcome | actual | reproducer |",
            "| --- |" + " --- |" * (len(group.params) + 3)]
    for row in group.rows:
        r = row.result
        link = f"[{row.reproducer}]({row.reproducer})" if row.reproducer else "—"
        out.append(f"| {cell(r['device'])} | " + " | ".join(cell(r['params'].get(p, '')) for p in group.params)
                   + f" | {r['outcome']} | {cell(row.detail)} | {link} |")
    return out + [""]
