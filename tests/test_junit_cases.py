"""The report folder's JUnit writer (conformance/plugin/junit_cases.py) writes what pytest's own
writer writes: both are fed the same reports of a run that holds every kind of outcome, under
every JUnit setting, and their files compared element by element. What a CI tool reads of a
kit's case (class, properties, <error> for a crash) is checked on real runs in test_ids.py and
test_plugin.py."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

import pytest
from _pytest.junitxml import LogXML

from conformance.plugin.junit_cases import JunitCases

OUTCOMES = '''
import sys
import pytest

@pytest.fixture
def broken_setup():
    raise RuntimeError("setup <broke> & \\x07 bell")

@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown broke")

def test_passes(record_property):
    print("out of a passing test")
    sys.stderr.write("err of a passing test")
    record_property("odd", 'a "quoted" <value> & \\x1b escape\\nsecond line\\ttab')
    record_property("number", 7)

def test_fails():
    print("out before the failure")
    assert 1 == 2, "the message\\nover two lines"

def test_long_message():
    assert False, "\\n".join(f"line {i} " + "x" * 60 for i in range(40))

def test_setup_error(broken_setup):
    pass

def test_teardown_error(broken_teardown):
    pass

def test_fails_then_teardown_error(broken_teardown):
    assert False

def test_skips():
    pytest.skip("not here: <reason>")

@pytest.mark.skipif(True, reason="never")
def test_skipif():
    pass

@pytest.mark.xfail(reason="known & filed")
def test_xfails():
    assert False

@pytest.mark.xfail(reason="strictly known", strict=True)
def test_xpass_strict():
    pass

@pytest.mark.xfail(reason="loosely known", strict=False)
def test_xpass():
    pass

@pytest.mark.parametrize("case", ["a[1]", "b::c", "d e"])
def test_params(case):
    assert case != "b::c"

class TestClass:
    def test_method(self):
        pass
'''


@pytest.fixture
def recorded(pytester: pytest.Pytester):
    # Names no module of the kit's tests has: pytest would refuse a second `test_outcomes`.
    pytester.makepyfile(test_junit_kinds=OUTCOMES, test_junit_unparsable="this is not python(")
    recorder = pytester.inline_run("-p", "no:cacheprovider", "--continue-on-collection-errors")
    reports = recorder.getreports("pytest_collectreport pytest_runtest_logreport")
    kinds = {(getattr(r, "when", "collect"), r.outcome) for r in reports}
    assert {("collect", "failed"), ("setup", "failed"), ("setup", "skipped"), ("call", "passed"), ("call", "failed"),
            ("call", "skipped"), ("teardown", "failed")} <= kinds, kinds  # what the writers are compared on
    return reports


def _fed(writer, reports) -> ET.Element:
    writer.pytest_sessionstart()
    for report in reports:
        if isinstance(report, pytest.CollectReport):
            writer.pytest_collectreport(report)
        else:
            writer.pytest_runtest_logreport(report)
    return ET.fromstring(_text(writer).split("?>", 1)[1])


def _text(writer) -> str:
    if isinstance(writer, JunitCases):
        return writer.text()
    writer.pytest_sessionfinish()
    with open(writer.logfile, encoding="utf-8") as file:
        return file.read()


def _shape(element: ET.Element) -> tuple:
    """An element as data, without what differs from run to run (times, the clock, the host)."""
    attributes = {k: v for k, v in element.attrib.items() if k not in ("time", "timestamp", "hostname")}
    return element.tag, attributes, (element.text or "").strip(), tuple(_shape(child) for child in element)


SETTINGS = list(itertools.product(["xunit1", "xunit2"], ["no", "log", "system-out", "system-err", "out-err", "all"], ["total", "call"], [True, False]))


@pytest.mark.parametrize("family, logging, duration, passing", SETTINGS, ids=["-".join(map(str, s)) for s in SETTINGS])
def test_the_same_file_as_pytests_writer(recorded, tmp_path, family, logging, duration, passing):
    theirs = _fed(LogXML(str(tmp_path / "theirs.xml"), "pre", "suite", logging, duration, family, passing), recorded)
    mine = _fed(JunitCases("pre", "suite", logging, duration, family, passing), recorded)
    assert _shape(mine) == _shape(theirs)
    assert mine.find("testsuite").get("tests") == theirs.find("testsuite").get("tests")


def test_the_run_holds_every_outcome(recorded, tmp_path):
    """The file compared above is not a file of passes: each kind of element is in it."""
    suite = _fed(JunitCases(None, "suite", "all", "total", "xunit2", True), recorded).find("testsuite")
    tags = {child.tag for case in suite for child in case}
    assert {"properties", "failure", "error", "skipped", "system-out", "system-err"} <= tags
    assert {k: suite.get(k) for k in ("errors", "failures", "skipped")} == {"errors": "4", "failures": "5", "skipped": "3"}


def test_durations_are_summed_as_pytests_are(recorded, tmp_path):
    theirs = _fed(LogXML(str(tmp_path / "theirs.xml"), None, "suite", "no", "total", "xunit2", True), recorded)
    mine = _fed(JunitCases(None, "suite", "no", "total", "xunit2", True), recorded)
    assert [c.get("time") for c in mine.iter("testcase")] == [c.get("time") for c in theirs.iter("testcase")]
