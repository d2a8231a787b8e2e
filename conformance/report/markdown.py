"""report.md: the verdict first, then failures and findings, then the copy matrix and every result."""

from __future__ import annotations

from typing import Any

from conformance.report import params_label

BROKEN = ("fail", "crash", "timeout")


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(data: dict[str, Any]) -> str:
    ep, ort = data["ep"], data["onnxruntime"]
    out = [f"# Conformance report: {ep.get('name', '?')}", ""]
    out.append(f"**Verdict: {data['verdict']}**" + ("" if not data["verdict_reasons"] else " — " + "; ".join(data["verdict_reasons"])))
    if data.get("strict"):
        out += ["", "Strict run (certification mode): a required contract that could not run fails the run."]
    out.append("")
    out.append(f"- kit {data['kit_version']}, spec digest `{data['spec_digest'][:16]}`")
    out.append(f"- onnxruntime {ort.get('version')} ({ort.get('package')}), {ort.get('build', '').strip()}")
    for entry in data["eps"]:
        declared = f"declared in {entry['spec']}" if entry["declared"] else "no vendor declaration was given: checked against what the EP advertises"
        library = f", library `{entry['library']}` sha256 `{entry['library_sha256']}`" if entry["library"] else ""
        out.append(f"- EP {entry['name']} (version {entry['version'] or 'unknown'}; {declared}{library})")
    for device in data["devices"]:
        hardware = device["hardware"] or {}
        memory = device["memory"]
        out.append(f"- device `{device['label']}`: {hardware.get('type', 'not listed by get_ep_devices()')} {hardware.get('vendor', '')}; "
                   f"DEFAULT {_mem(memory['default'])}; HOST_ACCESSIBLE {_mem(memory['host_accessible'])}")
    summary = ", ".join(f"{count} {name}" for name, count in data["summary"].items() if count)
    out += ["", f"Results: {summary or 'none'}.", ""]

    results = data["results"]
    failures = [r for r in results if r["outcome"] in BROKEN and r["subject"] == "ep"]
    out += ["## Failures of the EP", ""]
    out += [_detail(r) for r in failures] or ["None.", ""]
    out += ["## Findings against onnxruntime", "", "Broken `runtime`-subject contracts: defects of onnxruntime itself; they do not make the EP non-conformant.", ""]
    out += [_detail(r) for r in data["findings"]] or ["None.", ""]
    if data["run"]["lost"]:
        out += ["## Checks lost to crashes or hangs", ""]
        out += [f"- `{_cell(l['nodeid'])}`: {l['outcome']}: {_cell(l['message'])}" for l in data["run"]["lost"]] + [""]

    if data.get("waivers"):
        out += ["## Waivers", "", "| contract | status | cases | reason | upstream | until | declared in |", "| --- | --- | --- | --- | --- | --- | --- |"]
        out += [f"| {w['contract']} | {w['status']} | {w['cases']} | {_cell(w['reason'])} | {w['url']} | {w['until'] or ''} | {w['spec'] or ''} |"
                for w in data["waivers"]] + [""]
    out += ["## Copy capabilities", ""]
    for matrix in data["capabilities"]:
        out.append(f"### {matrix['ep']} — {matrix['device']}")
        out.append("")
        if matrix.get("error"):
            out += [f"Probe lost: {matrix['error']}", ""]
            continue
        out += ["| source | destination | status | required | detail |", "| --- | --- | --- | --- | --- |"]
        out += [f"| {p['source']} | {p['destination']} | {p['status']} | {'yes' if p['required'] else 'no'} | {_cell(p['detail'])} |" for p in matrix["pairs"]]
        out.append("")

    out += ["## All results", "", "| contract | device | params | outcome | severity | subject | message | spec |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        out.append(f"| {r['contract']} | {r['device']} | {_cell(params_label(r['params']))} | {r['outcome']} | {r['severity']} | {r['subject']} | {_cell(r['message'][:200])} | {r['spec']} |")
    out.append("")
    run = data["run"]
    out.append(f"Run: {run['started']}, {run['duration_s']} s, {run['collected']} checks collected, isolation {run['isolation']}, Python {run['python']} on {run['platform']}.")
    return "\n".join(out) + "\n"


def _mem(memory: dict[str, Any] | None) -> str:
    if memory is None:
        return "none (plain CPU memory)"
    return f"`{memory['name']}` ({memory['device_type']}, vendor 0x{memory['vendor_id']:04x})"


def _detail(result: dict[str, Any]) -> str:
    lines = [f"### `{result['contract']}` [{result['device']}-{params_label(result['params'])}] — {result['outcome']}", "",
             f"{result['message']}", "", f"Spec: `{result['spec']}`", ""]
    for violation in result["details"].get("violations", [])[:3]:
        if violation.get("expected") or violation.get("actual"):
            lines += [f"- expected: {_cell(violation.get('expected'))}", f"- actual: {_cell(violation.get('actual'))}"]
        if violation.get("reproducer"):
            lines += ["", "```python", violation["reproducer"], "```"]
    lines.append("")
    return "\n".join(lines)
