"""The report folder's JUnit file, written as pytest's own writer writes it, at a fraction of the
cost: the test cases are kept as the few strings they end as, and the file is joined from them.

pytest's writer (`_pytest.junitxml.LogXML`) makes an ElementTree element of each test case and
report part, looks each report's node up by parsing its id again (three times a case), and
serialises the tree at the end: on a 10 000-contract run that was a sixth of the run's wall time
(2.4 s of 18.6 s on the 2-core development machine; `benchmarks/README.md`, issue 38, round 3).
`JunitCases` follows LogXML's rules report by report, for every `junit_family`,
`junit_logging`, `junit_duration_report` and `junit_log_passing_tests`: which report opens a
case, what a failure, an error, a skip or an expected failure holds, the counts, and how a
teardown error after a failed call opens a second case. Where pytest words something (the
escaping of characters XML cannot hold, a shortened message, a test's address as class and name)
its own function is called. tests/test_junit_cases.py feeds both writers the same reports and
compares the files. A call that crashed or timed out, or an error of the kit, is written as an
`<error>` from the start (pytest's writer has `<failure>` renamed: terminal.as_junit_error).
"""

from __future__ import annotations

import platform
import re
import time
from datetime import datetime, timezone
from typing import Any, Callable

from _pytest import junitxml

from conformance.plugin import ids, terminal

_FAMILY_ATTRIBUTES = {"xunit1": ("classname", "name", "file", "line", "url"), "xunit2": ("classname", "name")}
_ILLEGAL = re.compile("[^\u0009\u000a\u000d\u0020-\u007e\u0080-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ATTRIBUTE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;", "\n": "&#10;", "\t": "&#09;"})
_TEXT = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_ESCAPED = re.compile('[&<>"\r\n\t]')  # what an attribute's value escapes (ElementTree's rules; text escapes the first three)
# pytest 9 shortens a message attribute to its first lines; pytest 8 keeps it whole.
_shorten: Callable[[str], str] = getattr(junitxml, "shorten_message", lambda message: message)


def visible(value: object) -> str:
    """pytest's bin_xml_escape: characters XML cannot hold shown as #xNN (the common case, a
    string without any, returned as it is)."""
    text = str(value)
    return junitxml.bin_xml_escape(text) if _ILLEGAL.search(text) else text


def _quoted(value: str) -> str:
    return value.translate(_ATTRIBUTE) if _ESCAPED.search(value) else value


def _element(tag: str, attributes: dict[str, str], text: str | None = None) -> str:
    opened = "".join(f' {name}="{_quoted(value)}"' for name, value in attributes.items())
    if text is None:
        return f"<{tag}{opened} />"
    return f"<{tag}{opened}>{text.translate(_TEXT)}</{tag}>"


class _Case:
    """One <testcase>: its attributes, time, properties and what it holds, as LogXML's
    _NodeReporter keeps them."""

    __slots__ = ("attributes", "duration", "properties", "parts", "opened", "xml")

    def __init__(self) -> None:
        self.attributes: dict[str, str] = {}
        self.duration = 0.0
        self.properties: list[tuple[str, str]] = []
        self.parts: list[str] = []
        self.opened = False
        self.xml = ""


class JunitCases:
    """A plugin object: registered beside the run where pytest's writer for the report folder
    would be, it hears the same reports and gives the file's text at the end."""

    def __init__(self, prefix: str | None, suite_name: str, logging: str = "no", report_duration: str = "total",
                 family: str = "xunit1", log_passing_tests: bool = True):
        self.prefix = prefix
        self.suite_name = suite_name
        self.report_duration = report_duration
        self.family = "xunit1" if family == "legacy" else family
        self.parts = _Parts(logging, log_passing_tests)
        self.stats = self.parts.stats
        self.cases: dict[tuple[str, Any], _Case] = {}
        self.ordered: list[_Case] = []
        self.open_reports: list[Any] = []
        self.double_fails = 0
        self.started = time.time()

    # --- pytest's hooks, as LogXML implements them ------------------------------------------

    def pytest_sessionstart(self) -> None:
        self.started = time.time()

    def pytest_runtest_logreport(self, report) -> None:
        if report.passed:
            if report.when == "call":
                self._open(report)
                self.stats["passed"] += 1
        elif report.failed:
            if report.when == "teardown":
                closing = self._open_report(report)
                if closing is not None:
                    self._finish(closing)  # a failed call and a teardown error: a case each
                else:
                    self.double_fails += int(self._key(report) in self.cases)
            case = self._open(report)
            if report.when == "call":
                self.parts.failure(case, report)
                self.open_reports.append(report)
                if not self.parts.log_passing_tests:
                    self.parts.captured(case, report)
            else:
                self.parts.error(case, report)
        elif report.skipped:
            self.parts.skipped(self._open(report), report)
        if self.report_duration in ("total", report.when):
            self._case(report).duration += getattr(report, "duration", 0.0)
        if report.when == "teardown":
            self.parts.captured(self._open(report), report)
            self._finish(report)
            closing = self._open_report(report)
            if closing is not None:
                self.open_reports.remove(closing)

    def pytest_collectreport(self, report) -> None:
        if not report.passed:
            case = self._open(report)
            if report.failed:
                self.parts.add(case, "error", "collection failure", str(report.longrepr))
            else:
                self.parts.add(case, "skipped", "collection skipped", str(report.longrepr))

    def pytest_internalerror(self, excrepr) -> None:
        case = self._case("internal")
        case.attributes.update(classname="pytest", name="internal")
        self.parts.add(case, "error", "internal error", str(excrepr))

    # --- the file ---------------------------------------------------------------------------

    def text(self) -> str:
        tests = sum(self.stats.values()) - self.double_fails
        started = datetime.fromtimestamp(self.started, timezone.utc).astimezone().isoformat()
        suite = {"name": self.suite_name, "errors": str(self.stats["error"]), "failures": str(self.stats["failure"]),
                 "skipped": str(self.stats["skipped"]), "tests": str(tests), "time": f"{time.time() - self.started:.3f}",
                 "timestamp": started, "hostname": platform.node()}
        cases = "".join(case.xml or _xml(case) for case in self.ordered)
        opened = _element("testsuite", suite)[:-3] + ">"
        return f'<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">{opened}{cases}</testsuite></testsuites>'

    # --- the cases --------------------------------------------------------------------------

    @staticmethod
    def _key(report) -> tuple[str, Any]:
        return report.nodeid, getattr(report, "node", None)

    def _case(self, report) -> _Case:
        key = (report, None) if isinstance(report, str) else self._key(report)
        case = self.cases.get(key)
        if case is None:
            case = self.cases[key] = _Case()
            self.ordered.append(case)
        return case

    def _open(self, report) -> _Case:
        """The report's case, its attributes (re)derived from the report as LogXML's
        record_testreport does; the family's own kept, a class set before kept over its own."""
        case = self._case(report)
        if case.opened:
            return case  # its attributes are derived from the node id and location, the same for each of its reports
        classes, name = self._address(report.nodeid)
        file, line = report.location[0], report.location[1]
        attributes = {"classname": classes, "name": name, "file": file}
        if line is not None:
            attributes["line"] = str(line)
        if hasattr(report, "url"):
            attributes["url"] = report.url
        attributes.update(case.attributes)
        family = ids.class_name(report.nodeid)  # the kit's class for its own cases, as set on pytest's writer before it sees a report
        if family is not None:
            attributes["classname"] = f"{self.prefix}.{family}" if self.prefix else family
        case.opened = True
        allowed = _FAMILY_ATTRIBUTES.get(self.family)
        case.attributes = attributes if self.family == "xunit1" or allowed is None else {k: v for k, v in attributes.items() if k in allowed}
        return case

    def _address(self, nodeid: str) -> tuple[str, str]:
        """The case's class and name as pytest's writer derives them from its node id."""
        names = junitxml.mangle_test_address(nodeid)
        return ".".join(([self.prefix] if self.prefix else []) + names[:-1]), visible(names[-1])

    def _open_report(self, report):
        """The failed call of `report`'s test whose teardown is still to come (under xdist, of
        the same worker and item)."""
        return next((failed for failed in self.open_reports
                     if failed.nodeid == report.nodeid and getattr(failed, "item_index", None) == getattr(report, "item_index", None)
                     and getattr(failed, "worker_id", None) == getattr(report, "worker_id", None)), None)

    def _finish(self, report) -> None:
        case = self.cases.pop(self._key(report))
        case.properties.extend((str(name), visible(str(value))) for name, value in report.user_properties)
        case.xml = _xml(case)
        case.parts = []


class _Parts:
    """What a report adds to its case (a failure, an error, a skip, captured output) as LogXML's
    _NodeReporter words it, and the suite's counts of them."""

    def __init__(self, logging: str, log_passing_tests: bool):
        self.logging = logging
        self.log_passing_tests = log_passing_tests
        self.stats = dict.fromkeys(["error", "passed", "failure", "skipped"], 0)

    def add(self, case: _Case, tag: str, message: str | None, text: object = None, kind: str | None = None) -> None:
        if tag in self.stats:
            self.stats[tag] += 1
        attributes = {} if kind is None else {"type": kind}
        if message is not None:
            attributes["message"] = message
        case.parts.append(_element(tag, attributes, None if text is None else visible(text)))

    def failure(self, case: _Case, report) -> None:
        if hasattr(report, "wasxfail"):
            self.add(case, "skipped", "xfail-marked test passes unexpectedly", "None")
            return
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash is not None else str(report.longrepr)
        # A crash, a timeout or the kit's error is an <error>: no assertion failed.
        self.add(case, "error" if terminal.is_error(report) else "failure", visible(_shorten(message)), str(report.longrepr))

    def error(self, case: _Case, report) -> None:
        crash = getattr(report.longrepr, "reprcrash", None)
        reason = crash.message if crash is not None else str(report.longrepr)
        when = "teardown" if report.when == "teardown" else "setup"
        self.add(case, "error", visible(_shorten(f'failed on {when} with "{reason}"')), str(report.longrepr))

    def skipped(self, case: _Case, report) -> None:
        if hasattr(report, "wasxfail"):
            self.add(case, "skipped", visible(report.wasxfail.removeprefix("reason: ")), kind="pytest.xfail")
            return
        filename, lineno, reason = report.longrepr
        reason = reason.removeprefix("Skipped: ")
        self.add(case, "skipped", visible(reason), f"{filename}:{lineno}: {reason}", kind="pytest.skip")
        self.captured(case, report)

    def captured(self, case: _Case, report) -> None:
        if (not self.log_passing_tests and report.passed) or self.logging == "no":
            return
        content = ""
        if self.logging in ("log", "all"):
            content = _section(report.caplog, " Captured Log ")
        if self.logging in ("system-out", "out-err", "all"):
            content += _section(report.capstdout, " Captured Out ")
            self.add(case, "system-out", None, content)
            content = ""
        if self.logging in ("system-err", "out-err", "all"):
            content += _section(report.capstderr, " Captured Err ")
            self.add(case, "system-err", None, content)
            content = ""
        if content:
            self.add(case, "system-out", None, content)


def _xml(case: _Case) -> str:
    inner = "".join(f'<property name="{_quoted(name)}" value="{_quoted(value)}" />' for name, value in case.properties)
    inner = (f"<properties>{inner}</properties>" if inner else "") + "".join(case.parts)
    attributes = dict(case.attributes, time=f"{case.duration:.3f}")
    if not inner:
        return _element("testcase", attributes)
    return _element("testcase", attributes)[:-3] + f">{inner}</testcase>"


def _section(content: str, header: str) -> str:
    return "\n".join([header.center(80, "-"), content, ""])
