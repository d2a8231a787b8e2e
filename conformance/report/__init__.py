"""The conformance report: one summary (`build`) feeds report.json, report.md and the terminal.

report.json's top-level keys are an interface (DESIGN.md): schema, kit_version, onnxruntime,
ep, devices, verdict, summary, results, capabilities. Files are written atomically (a temporary
file, then a rename), so an interrupted run never leaves half a report.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from conformance import __version__
from conformance.claims import spec_claims
from conformance.eps import memory_label
from conformance import waivers as waiver_rules
from conformance.outcomes import Outcome, Result, counts, verdict

SCHEMA = "ort-ep-conformance/report/1"


def build(run, *, interrupted: bool) -> dict[str, Any]:
    results: list[Result] = list(run.results)
    strict = bool(getattr(run, "strict", False))
    decided, reasons = verdict(results, interrupted=interrupted or len(results) < run.collected, strict=strict)
    lost = [r for r in results if r.outcome in (Outcome.CRASH, Outcome.TIMEOUT)]
    first = run.eps[0].facts if run.eps else {}
    eps = [_ep(ep.facts, ep.spec) for ep in run.eps]
    return {
        "schema": SCHEMA,
        "kit_version": __version__,
        "spec_digest": run.catalogue.digest,
        "onnxruntime": first.get("onnxruntime", {}),
        "ep": eps[0] if eps else {},
        "eps": eps,
        "devices": [dict(device, ep=ep.facts["provider"]) for ep in run.eps for device in ep.facts["devices"]],
        "verdict": decided.value,
        "verdict_reasons": reasons,
        "summary": counts(results),
        "findings": [r.to_dict() for r in results if r.is_finding],
        "results": [r.to_dict() for r in results],
        "capabilities": [matrix for ep in run.eps for matrix in ep.capabilities],
        "contracts": {c.id: _contract(c) for c in run.catalogue.contracts},
        "waivers": waiver_rules.summary(results),
        "strict": strict,
        "run": {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(run.started)),
            "duration_s": round(time.time() - run.started, 3),
            "collected": run.collected,
            "interrupted": interrupted,
            "strict": strict,
            "lost": [{"nodeid": r.nodeid, "outcome": r.outcome.value, "message": r.message} for r in lost],
            "isolation": "worker" if run.isolated else "none",
            "python": sys.version.split()[0],
            "platform": machine(),
            "command": " ".join(sys.argv),
        },
    }


def machine() -> str:
    """platform.platform(), which platform caches: its first call takes about 6 ms (it runs
    `uname -p`), so the plugin makes it while it waits for its workers' facts rather than
    after the last check."""
    return platform.platform()


def _ep(facts: dict[str, Any], spec) -> dict[str, Any]:
    return {
        "name": facts["provider"],
        "label": facts["label"],
        "requested": facts["requested"],
        "declared": facts["declared"],
        "spec": facts["spec"],
        "library": facts["library"],
        "library_sha256": facts["library_sha256"],
        "plugin_module": facts["plugin_module"],
        "ep_device": facts["ep_device"],
        "options": facts["options"],
        "version": next((d["ep_metadata"].get("version") for d in facts["devices"] if d.get("ep_metadata")), None),
        "claims": spec_claims(spec),
        "unverified": list(spec.unverified) if spec else [],
    }


# What a report says of a memory type for an EP that get_ep_devices() does not list: its
# memory infos were never asked, so "None" there does not mean plain CPU memory.
NO_EP_DEVICE = "no EP device (get_ep_devices() does not list this EP)"


def unlisted_note(eps: list[dict[str, Any]], matrix: dict[str, Any]) -> str | None:
    """What a reader of `matrix` must know when its EP has no EP device: only CPU memory was
    there to probe, so its pairs and figures are the host's, not the EP's."""
    entry = next((e for e in eps if e.get("name") == matrix.get("ep")), None)
    if entry is None or entry.get("ep_device", True):
        return None
    return (f"{NO_EP_DEVICE}: only plain CPU memory could be probed, so these copies and figures are of the host's "
            "memory, not of memory the EP owns.")


def device_line(device: dict[str, Any]) -> str:
    """A device record in one line: its hardware and the memory infos its EP device advertises."""
    hardware = device.get("hardware")
    if hardware is None:
        return f"{NO_EP_DEVICE}: no memory info was advertised"
    return (f"{hardware['type']} {hardware.get('vendor') or ''}".rstrip()
            + f"; DEFAULT: {advertised_memory(device, 'default')}; HOST_ACCESSIBLE: {advertised_memory(device, 'host_accessible')}")


def advertised_memory(device: dict[str, Any], kind: str) -> str:
    """What a device record says of its `default` or `host_accessible` memory, in words. A
    record without hardware stands for an EP without an EP device (eps.describe)."""
    if device.get("hardware") is None:
        return f"not advertised: {NO_EP_DEVICE}"
    memory = device["memory"][kind]
    if memory is None and kind == "host_accessible":
        return "none"
    return memory_label(memory)


def _contract(contract) -> dict[str, Any]:
    return {
        "family": contract.family,
        "statement": contract.statement,
        "severity": contract.severity,
        "subject": contract.subject,
        "spec": str(contract.location),
        "sources": [s.to_dict() for s in contract.sources],
        "excerpt": spec_excerpt(contract.file, contract.location.line),
    }


def spec_excerpt(path: str, line: int, limit: int = 30) -> str:
    """The YAML entry that starts at `line`: up to the next entry at the same indentation."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    start = line - 1
    if not 0 <= start < len(lines):
        return ""
    indent = len(lines[start]) - len(lines[start].lstrip(" -"))
    entry = [lines[start]]
    for text in lines[start + 1:start + limit]:
        stripped = text.lstrip(" ")
        if stripped and (len(text) - len(stripped) < indent or (stripped.startswith("- ") and len(text) - len(stripped) <= indent - 2)):
            break
        entry.append(text)
    return "\n".join(entry).rstrip()


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        # mkstemp creates the file readable by its owner only; a report is for everyone the umask allows.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def write_all(data: dict[str, Any], directory: Path) -> list[Path]:
    from conformance.report import html, markdown

    json_path, md_path, html_path = directory / "report.json", directory / "report.md", directory / "report.html"
    atomic_write(json_path, json_text(data))
    atomic_write(md_path, markdown.render(data))
    atomic_write(html_path, html.render(data))
    return [json_path, md_path, html_path]


def json_text(data: dict[str, Any]) -> str:
    """report.json: a line per top-level key, and a line per entry of a list of objects (each
    result, finding, contract, capability matrix), which also diffs one result per line.
    Written line by line with json's C encoder: `indent` makes json use its Python encoder,
    three times slower (4.5 ms for a CPU run's report, a third of writing all three files)."""
    entries = []
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            text = "[\n" + ",\n".join(f"    {json.dumps(item, default=str)}" for item in value) + "\n  ]"
        else:
            text = json.dumps(value, default=str)
        entries.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(entries) + "\n}\n"


def params_label(params: dict[str, Any]) -> str:
    return "-".join(map(str, params.values())) or "-"


def describe_failure(result: Result, contract) -> str:
    """What a failing check shows: the statement and where it is written, expected vs actual,
    the memory infos involved, and a snippet that reproduces it."""
    lines = [
        f"{contract.id} [{contract.severity}, subject: {contract.subject}] failed on {result.ep} ({result.device}), params {result.params}",
        f"  statement: {contract.statement}",
        f"  spec:      {result.spec}",
        "  sources:   " + "; ".join(f"{s.kind} {s.ref}" for s in contract.sources),
    ]
    for violation in result.details.get("violations", []):
        lines.append(f"  violation: {violation['message']}")
        if violation.get("expected"):
            lines.append(f"    expected: {violation['expected']}")
        if violation.get("actual"):
            lines.append(f"    actual:   {violation['actual']}")
        for role, memory in (violation.get("memory") or {}).items():
            lines.append(f"    memory {role}: {memory_label(memory)}")
        if violation.get("reproducer"):
            lines.append("    reproduce with:")
            lines.extend("      " + line for line in violation["reproducer"].splitlines())
    return "\n".join(lines)


def imports_lines(imports: dict[str, Any] | None) -> list[str]:
    """What the interop probe found for one EP device (conformance/interop/probe.py), in words:
    the answer to "which copies work on an imported tensor"."""
    if not imports:
        return []
    if imports["status"] == "none":
        return ["Imports: no importer (the EP device imports no external memory)."]
    if imports["status"] == "not_run":
        return [f"Imports: not probed here: {imports['reason']}"]
    types = ", ".join(imports["handle_types"]) or "none"
    out = [f"Imports: an importer; handle types: {types}."]
    memory = imports.get("tensor_memory")
    if memory:
        out.append(f"Imported tensors report {memory['memory_type']} memory ({memory['name']}, {memory['device_type']}).")
    if imports.get("reason"):
        out.append(imports["reason"])
    out += [f"- {c['source']} -> {c['destination']}: {c['status']} ({c['detail']})" for c in imports.get("copies", [])]
    return out
