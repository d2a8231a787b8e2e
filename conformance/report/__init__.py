"""The conformance report: one summary (`build`) feeds report.json, report.md and the terminal.

report.json's top-level keys are an interface (schemas/report.schema.json): schema, kit_version, onnxruntime,
ep, devices, verdict, summary, results, capabilities. The three files are written as one set
(safe_io.write_set: each aside, then renamed), so an interrupted run or a full disk never
leaves half a report, nor a new report.json beside the last run's report.md.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from conformance import safe_io
from conformance.version import __version__
from conformance.facts import EpFacts
from conformance.catalogue.claims import draft_of, spec_claims
from conformance.testbed.eps import memory_label
from conformance.rules import waivers as waiver_rules
from conformance.rules.strict import draft_reason
from conformance.outcomes import Outcome, Result, counts, verdict
from conformance.record import RunRecord
from conformance.report import evidence
from conformance.catalogue.versions import api_level
from conformance.report.common import verdict_text
from conformance.report.common import NO_EP_DEVICE, advertised_memory, device_line, imports_lines, params_label, unlisted_note  # noqa: F401  (the report's helpers, named here too)

SCHEMA = "ort-ep-conformance/report/1"


def build(record: RunRecord) -> dict[str, Any]:
    """report.json's data, from what the run recorded."""
    results = list(record.results)
    strict = record.strict
    interrupted = record.interrupted
    selection = record.selection
    subset = selection["text"] if selection and not selection["complete"] else ""
    drafts = [draft for draft in (draft_of(ep.spec) for ep in record.eps) if draft]
    decided, reasons = verdict(results, interrupted=interrupted or len(results) < record.collected, strict=strict, subset=subset,
                               shard=record.shard["text"] if record.shard else "", draft=draft_reason(drafts))
    lost = [r for r in results if r.outcome in (Outcome.CRASH, Outcome.TIMEOUT)]
    first = record.eps[0].facts.onnxruntime if record.eps else None
    version = first.version if first else None
    as_dicts = [r.to_dict() for r in results]
    matrices = [matrix for ep in record.eps for matrix in ep.capabilities]
    eps = [_ep(ep.facts, ep.spec, as_dicts, matrices) for ep in record.eps]
    return {
        "schema": SCHEMA,
        "kit_version": __version__,
        "spec_digest": record.spec_digest,
        "onnxruntime": first.to_wire() if first else {},
        "ep": eps[0] if eps else {},
        "eps": eps,
        "devices": [dict(device.to_wire(), ep=ep.facts.provider) for ep in record.eps for device in ep.facts.devices],
        "verdict": decided.value,
        "verdict_reasons": reasons,
        "api_level": api_level(version),
        "verdict_text": verdict_text(decided.value, api_level(version)),
        "summary": counts(results),
        "findings": [r.to_dict() for r in results if r.is_finding],
        "results": as_dicts,
        "capabilities": matrices,
        "contracts": _contracts(record.contracts),
        "waivers": waiver_rules.summary(results),
        "strict": strict,
        "selection": selection,
        "shard": record.shard,
        "run": {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.started)),
            "duration_s": round(record.finished - record.started, 3),
            "collected": record.collected,
            "interrupted": interrupted,
            "strict": strict,
            "lost": [{"nodeid": r.nodeid, "outcome": r.outcome.value, "message": r.message} for r in lost],
            "machine_events": machine_events(results),
            "isolation": record.isolation,
            "python": record.python,
            "platform": record.platform,
            "command": record.command,
            "wrapper": record.wrapper or None,
            "emulated": emulation_note(record.emulated, record.cpu) if record.emulated else None,
            "cpu": record.cpu or None,
        },
    }


def machine_events(results: list[Result]) -> list[dict[str, Any]]:
    """Each try lost to the machine and not counted (conformance.run.reruns), with the case it
    was a try of and the outcome that case came to."""
    return [{"nodeid": r.nodeid, "outcome": r.outcome.value, **event.to_wire()} for r in results for event in r.details.machine_events]


def build_or_essentials(record: RunRecord) -> dict[str, Any]:
    """report.json's data (`build`), or, where building it raised, its essentials: the results,
    their counts and the verdict, with `not_computed` naming what failed and why. The report set
    is written either way: a defect of the report never costs a run its results."""
    try:
        return build(record)
    except Exception as exc:
        failure = f"the report's data (contracts, claims, EP facts): {type(exc).__name__}: {exc}"
    results = list(record.results)
    try:
        decided, reasons = verdict(results, interrupted=record.interrupted or len(results) < record.collected, strict=record.strict)
        judged, summary = decided.value, counts(results)
    except Exception as exc:
        judged, reasons, summary = "incomplete", [f"the verdict could not be computed: {type(exc).__name__}: {exc}"], {}
    return {"schema": SCHEMA, "kit_version": __version__, "spec_digest": record.spec_digest, "onnxruntime": {}, "ep": {}, "eps": [],
            "devices": [], "verdict": judged, "verdict_reasons": reasons, "summary": summary, "findings": [],
            "results": [r.to_dict() for r in results], "capabilities": [], "contracts": {}, "not_computed": [failure],
            "run": {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.started)), "duration_s": round(record.finished - record.started, 3),
                    "collected": record.collected, "interrupted": record.interrupted, "strict": record.strict, "lost": [], "machine_events": [],
                    "isolation": record.isolation, "python": record.python, "platform": record.platform, "command": record.command}}


def machine() -> str:
    """platform.platform(), which platform caches: its first call takes about 6 ms (it runs
    `uname -p`), so the plugin makes it while it waits for its workers' facts rather than
    after the last check."""
    return platform.platform()


def cpu_vendor(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The machine's CPU vendor as the kernel names it (GenuineIntel, AuthenticAMD); '' where
    not known. Read in pytest's process, which no wrapper emulates."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id":
                    return value.strip()
    except OSError:
        pass
    return ""


def emulation_note(emulator: str, cpu: str) -> str:
    """What report.json's run.emulated says: the EP ran on an emulated CPU, and what follows."""
    machine_cpu = f" (this machine's CPU is {cpu})" if cpu else ""
    return (f"the EP's processes ran under {emulator}, so onnxruntime and the EP saw the CPU the emulator "
            f"models, not the machine's{machine_cpu}; no throughput was measured, as it would be the emulator's")


def _ep(facts: EpFacts, spec, results: list[dict[str, Any]], matrices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": facts.provider,
        "label": facts.label,
        "requested": facts.requested,
        "declared": facts.declared,
        "spec": facts.spec,
        "library": facts.library,
        "library_sha256": facts.library_sha256,
        "plugin_module": facts.plugin_module,
        "plugin_package": facts.plugin_package.to_wire() if facts.plugin_package else None,
        "ep_device": facts.ep_device,
        "options": dict(facts.options),
        "version": next((d.ep_version for d in facts.devices if d.ep_metadata), None),
        "claims": evidence.in_this_run(spec_claims(spec), facts.provider, results, matrices, facts.ep_device),
        "unverified": list(spec.unverified) if spec else [],
        "draft": draft_of(spec),
    }


def _contracts(contracts) -> dict[str, Any]:
    """Each contract's entry, its spec file read once for all of its contracts (not once per
    contract: a vendor's file of 10 000 contracts would be read 10 000 times)."""
    files: dict[str, list[str] | None] = {}
    return {c.id: _contract(c, files) for c in contracts}


def _contract(contract, files: dict[str, list[str] | None]) -> dict[str, Any]:
    if contract.file not in files:
        files[contract.file] = _spec_lines(contract.file)
    return {
        "family": contract.family,
        "statement": contract.statement,
        "severity": contract.severity,
        "subject": contract.subject,
        "spec": str(contract.location),
        "sources": [s.to_dict() for s in contract.sources],
        "provenance": contract.provenance.to_dict() if contract.provenance else None,
        "since": contract.since,
        "tier": contract.tier,
        "contested": contract.contested.to_dict() if contract.contested else None,
        "excerpt": _excerpt(files[contract.file], contract.location.line),
    }


def _spec_lines(path: str) -> list[str] | None:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None


def spec_excerpt(path: str, line: int, limit: int = 30) -> str:
    """The YAML entry that starts at `line`: up to the next entry at the same indentation."""
    return _excerpt(_spec_lines(path), line, limit)


def _excerpt(lines: list[str] | None, line: int, limit: int = 30) -> str:
    if lines is None:
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


def write_all(data: dict[str, Any], directory: Path, others: Mapping[str, bytes] | None = None) -> list[Path]:
    """report.json, report.md, report.html and summary.md (a CI job's summary, linking into
    report.html), rendered, then written as one set with `others` (the run's junit.xml): all
    replaced, or (a full disk, a symlink planted at one of the names) none of them, with one
    safe_io.UnsafeFile naming the folder and why. The summary also goes on GitHub Actions' job
    page when $GITHUB_STEP_SUMMARY is set; one that cannot be appended to is one line on
    stderr (it costs the job page's summary, not the report). A renderer that raises leaves its
    file saying so, and report.json's `not_computed` names it."""
    from conformance.report import html, markdown, summary

    rendered: dict[str, str] = {}
    for name, render in (("report.md", markdown.render), ("report.html", html.render), ("summary.md", summary.render)):
        try:
            rendered[name] = render(data)
        except Exception as exc:
            failure = f"{name}: {type(exc).__name__}: {exc}"
            data["not_computed"] = [*data.get("not_computed", []), failure]
            rendered[name] = f"{name} could not be rendered ({failure}); report.json holds the run's results.\n"
    files: dict[str, bytes | str] = {"report.json": json_text(data), **rendered, **(others or {})}
    written = safe_io.write_set(directory, files)
    problem = summary.append_step_summary(rendered["summary.md"])
    if problem:
        sys.stderr.write(f"WARNING: {problem}\n")
    return written


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


# How a broken or errored case's headline words what happened to it.
_HAPPENED = {Outcome.FAIL: "failed", Outcome.CRASH: "crashed", Outcome.TIMEOUT: "timed out", Outcome.ERROR: "could not be checked",
             Outcome.FLAKY: "was flaky (its tries gave different outcomes)"}


def reason_line(result: Result) -> str:
    """The one line that says why a case failed or errored: its first violation's message for a
    failure, the outcome and what happened for a crash, a timeout or an error. pytest ends its
    `FAILED id - ...` and `ERROR id - ...` lines with it, and `--tb=line` shows it."""
    violations = result.details.violations
    text = violations[0].message if result.outcome is Outcome.FAIL and violations else result.message
    line = " ".join((text.strip().splitlines() or [""])[0].split())
    return line if result.outcome is Outcome.FAIL else f"[{result.outcome.value}] {line}"


def _headline(result: Result, contract) -> str:
    happened = _HAPPENED.get(result.outcome, result.outcome.value)
    return f"{contract.id} [{contract.severity}, subject: {contract.subject}] {happened} on {result.ep} ({result.device}), params {result.params}"


def describe_at_a_glance(result: Result, contract, script: str | None = None) -> str:
    """The default (`--tb=auto`): the headline with the case's parameters, its first violation
    with expected and actual (and how many more there are), the spec line and the reproducer's
    path; a crash, a timeout or an error says what happened and the process's last lines. A few
    lines per case, whatever the number of failing cases: the whole story is `--tb=long`'s."""
    lines = [_headline(result, contract), *_tries(result)]
    violations = result.details.violations
    if result.outcome is not Outcome.FAIL and not violations:
        head, *tail = result.message.splitlines() or [""]
        lines.append(f"  {result.outcome.value}: {head}")
        if tail:
            lines.append("  output:" if len(tail) <= GLANCE_OUTPUT else f"  output (its last {GLANCE_OUTPUT} lines):")
            lines += [f"    {line}" for line in tail[-GLANCE_OUTPUT:]]
    for violation in violations[:1]:
        lines.append(f"  violation: {violation.message}")
        lines += [f"    {key}:{' ' * (9 - len(key))}{said}" for key, said in (("expected", violation.expected), ("actual", violation.actual)) if said]
    if len(violations) > 1:
        lines.append(f"  ... and {len(violations) - 1} more violation{'s' if len(violations) > 2 else ''} (--tb=long shows them)")
    lines.append(f"  spec:      {result.spec}")
    if script:
        lines.append(f"  reproduce: python {script}")
    elif any(v.reproducer for v in violations):
        lines.append("  reproduce: --tb=long shows how (it is no standalone script)")
    return "\n".join(lines)


GLANCE_OUTPUT = 8  # the last lines of a lost process's output that the default shows


def describe_briefly(result: Result, contract, script: str | None = None) -> str:
    """`--tb=short`: the headline, each violation's message (or what happened), the spec line
    and the reproducer's path."""
    messages = [v.message for v in result.details.violations] if result.outcome is Outcome.FAIL else []
    lines = [_headline(result, contract)] + [f"  violation: {m}" for m in messages or [reason_line(result)]] + _tries(result)
    return "\n".join(lines + [f"  spec:      {result.spec}"] + ([f"  reproduce: python {script}"] if script else []))


def _tries(result: Result) -> list[str]:
    """A line per try of a case tried again (conformance.run.reruns): its outcome and message,
    and for a try lost to the machine, that it was not counted."""
    lines = []
    for number, attempt in enumerate(result.details.tries, start=1):
        said = (attempt.message.strip().splitlines() or [""])[0][:300]
        uncounted = "" if attempt.counted else " (lost to the machine: not counted)"
        lines.append(f"  try {number}: {attempt.outcome.value}{uncounted}" + (f": {said}" if said else ""))
    return lines


def describe_failure(result: Result, contract) -> str:
    """What a failing check shows: the statement and where it is written, expected vs actual,
    the memory infos involved, and a snippet that reproduces it; for a crash, a timeout or an
    error, what happened and the process's last output."""
    lines = [
        _headline(result, contract),
        f"  statement: {contract.statement}",
        f"  spec:      {result.spec}",
        "  sources:   " + "; ".join(f"{s.kind} {s.ref}" for s in contract.sources),
    ]
    if result.outcome is not Outcome.FAIL:
        # What happened: the violation says it where the loss was attributed to a step (see
        # attribution.details_of); the process's last output follows the message's first line.
        head, *tail = result.message.splitlines() or [""]
        lines += [] if result.details.violations else [f"  {result.outcome.value}: {head}"]
        lines += ["  output:"] + [f"    {line}" for line in tail] if tail else []
    lines += _tries(result)
    for violation in result.details.violations:
        lines.append(f"  violation: {violation.message}")
        if violation.expected:
            lines.append(f"    expected: {violation.expected}")
        if violation.actual:
            lines.append(f"    actual:   {violation.actual}")
        for role, memory in violation.memory.items():
            lines.append(f"    memory {role}: {memory_label(memory)}")
        if violation.reproducer:
            lines.append("    reproduce with:")
            lines.extend("      " + line for line in violation.reproducer.splitlines())
    return "\n".join(lines)


