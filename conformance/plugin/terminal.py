"""What a run says where people look: pytest's failure reports, its FAILED and ERROR lines, the
JUnit error of a crash, and the line that tells a slow call is being waited for. Glue beside
the plugin (which calls it); it knows results and pytest's reports, never how a check runs.

Two pytest details are relied on, each private and each said where it is used: the failure
representation classes of `_pytest._code.code` (what pytest itself builds from a traceback,
and what pytest-xdist serializes from a worker to the controller: a representation of the
kit's own class would arrive there as a plain string), and `_pytest.junitxml`'s writer, whose
choice between `<failure>` and `<error>` goes by the phase alone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import pytest
from _pytest._code.code import ReprEntryNative, ReprExceptionInfo, ReprFileLocation, ReprTraceback

from conformance.outcomes import PYTEST_ERRORS, Outcome, Result

if TYPE_CHECKING:
    from conformance.catalogue.contracts import Contract
    from conformance.isolation.controller import Waiting
    from conformance.run.pool import EpUnderTest

ERROR_VALUES = frozenset(outcome.value for outcome in PYTEST_ERRORS)


def failure_repr(result: Result, contract: Contract, style: str, report_dir: Path | str) -> ReprExceptionInfo:
    """A failing or errored case as pytest shows it. Its `reprcrash` is the spec's line and the
    case's one line (report.reason_line): pytest ends the short summary's `FAILED id - ...` with
    that message, `--tb=line` shows `path:line: message`, and JUnit's `message` attribute is it.
    `style` is --tb's: `auto` (the default) a few lines (report.describe_at_a_glance), `short`
    the brief description, `long` (and `native`) the full one with the reproducer's script,
    `line` that one line (pytest prints no description with `no`). The reproducer is named by
    its path under `report_dir`'s repro/, which the run writes at its end."""
    from conformance import report
    from conformance.report import repro_files

    crash = ReprFileLocation(contract.location.path, contract.location.line, report.reason_line(result))
    script = repro_files.path_of(result.to_dict(), report_dir)
    if style == "line":
        # pytest's FAILURES section prints the crash line itself, and pytest 9 prints this
        # representation before it: a failure's is empty, or each line would show twice. Its
        # ERRORS section (a crash, a timeout, an error) prints only this.
        text = "" if result.outcome not in PYTEST_ERRORS else f"{crash.path}:{crash.lineno}: {crash.message}\n"
    elif style == "short":
        text = report.describe_briefly(result, contract, script) + "\n"
    elif style == "auto":
        text = report.describe_at_a_glance(result, contract, script) + "\n"
    else:
        text = report.describe_failure(result, contract) + "\n"
    return ReprExceptionInfo(reprtraceback=ReprTraceback([ReprEntryNative([text])], None, style="native"), reprcrash=crash)


def mark_outcome(report: pytest.TestReport, result: Result) -> None:
    """The call report carries the case's outcome (an attribute: it crosses to xdist's controller
    with the report), so that a crash, a timeout or an error reads as an error of the call."""
    report.conformance_outcome = result.outcome.value  # type: ignore[attr-defined]


def is_error(report: pytest.TestReport) -> bool:
    """A call that failed with a crash, a timeout or an error of the kit (not a finding against
    onnxruntime, which is an xfail and not failed)."""
    return report.when == "call" and report.failed and getattr(report, "conformance_outcome", None) in ERROR_VALUES


def teststatus(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """pytest's category of an errored call: `error` (E, ERROR), counted and listed with the
    errors as "ERROR at call of"; the exit status stays that of a failed run."""
    return ("error", "E", "ERROR") if is_error(report) else None


def as_junit_error(config: pytest.Config, report: pytest.TestReport) -> None:
    """The JUnit case of an errored call holds `<error>`, as a crash or timeout is no assertion
    that failed. pytest's writer (LogXML) has written `<failure>` for it, as for any failed call:
    it is renamed, and the writer's counts moved with it. Private: `_pytest.junitxml.xml_key`,
    `LogXML.node_reporter`, `_NodeReporter.nodes` and `LogXML.stats` (pytest 8 and 9). The
    report folder's writer (junit_cases.JunitCases) writes `<error>` itself."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)  # the user's writer (--junitxml)
    if xml is not None:
        failures = [node for node in xml.node_reporter(report).nodes if node.tag == "failure"]
        if failures:
            failures[-1].tag = "error"
            xml.stats["failure"] -= 1
            xml.stats["error"] += 1


def wait_notices(config: pytest.Config) -> Callable[[Waiting], None]:
    """What hears a slow reply (isolation.Waiting): a line on pytest's terminal, yellow, out of
    the test's captured output (as live logging writes), unless -qq. Under pytest-xdist the
    checks run in xdist's workers, whose terminal nobody sees: nothing is shown there."""

    def notice(waiting: Waiting) -> None:
        reporter: Any = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or config.get_verbosity() < -1 or hasattr(config, "workerinput"):
            return
        capture: Any = config.pluginmanager.get_plugin("capturemanager")
        if capture is None:
            reporter.write_line(str(waiting), yellow=True)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(str(waiting), yellow=True)

    return notice


def duration(result: Result, measured: float) -> float:
    """A call's duration for --durations and JUnit: the check's own time in its worker, not the
    time pytest waited behind other requests; a crash or timeout has none of its own, and keeps
    the time waited for it (`measured`)."""
    return measured if result.outcome in (Outcome.CRASH, Outcome.TIMEOUT) or not result.duration else result.duration


def written_lines(written: list[Path], folder: Path) -> list[str]:
    """A `report:` line per file of the report set, and one line for the reproducers' folder
    (a failing run writes hundreds of scripts there; the failures name each one)."""
    from conformance.report.repro_files import FOLDER

    repro = folder / FOLDER
    scripts = [path for path in written if path.parent == repro]
    lines = [f"report: {path}" for path in written if path.parent != repro]
    if scripts:
        lines.append(f"reproducers: {repro}{os.sep} ({len(scripts)} standalone script{'s' if len(scripts) != 1 else ''}, one per failing case)")
    return lines


def ep_lines(eps: list[EpUnderTest]) -> Iterator[tuple[str, dict[str, bool]]]:
    """The terminal summary's line for each EP that ran nothing, or whose spec is the user's own,
    and the plugin package each plugin EP came from."""
    for ep in eps:
        package = ep.facts.plugin_package
        if package:
            yield (f"{ep.label}: {ep.facts.provider} from {package.name} {package.version}, library sha256 "
                   f"{(ep.facts.library_sha256 or '?')[:16]}"), {}
        if ep.facts.unusable:
            yield f"{ep.label}: nothing ran: {ep.facts.unusable}", {"yellow": True}
        if ep.facts.spec and "overrides the shipped" in ep.facts.spec:
            yield f"{ep.label}: EP spec {ep.facts.spec}", {}


def verdict_label(strict: bool, selection: dict[str, Any] | None) -> str:
    """' (strict run)', and what a subset ran: a strict subset is never a certification, and a
    non-strict one is partial."""
    label = " (strict run" if strict else ""
    if selection is not None and not selection["complete"]:
        label += ("; " if strict else " (") + "partial run: " + selection["text"]
    return label + (")" if label else "")
