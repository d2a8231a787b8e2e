"""The JUnit checker (conformance/report/junit_schema.py) finds each way a file departs from the schema CI
tools read; that it accepts real runs, serial and under xdist, is tested in test_plugin.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from conformance.report import junit_schema as junit

PROPERTIES = "".join(f'<property name="{n}" value="v" />' for n in junit.CASE_PROPERTIES if n != "outcome")
VALID = f"""<testsuites name="pytest tests"><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="4" time="1.5">
<testcase classname="c" name="a" time="0.1"><properties>{PROPERTIES}<property name="outcome" value="pass" /></properties></testcase>
<testcase classname="c" name="b" time="0.1"><properties>{PROPERTIES}<property name="outcome" value="fail" /></properties><failure message="m">text</failure></testcase>
<testcase classname="c" name="c" time="0.1"><properties>{PROPERTIES}<property name="outcome" value="crash" /></properties><error message="m" /></testcase>
<testcase classname="c" name="d" time="0.1"><properties>{PROPERTIES}<property name="outcome" value="not_run" /></properties><skipped message="m" /></testcase>
</testsuite></testsuites>"""  # noqa: E501  (a JUnit document, one case a line)


def problems(text: str) -> list[str]:
    return [str(p) for p in junit.check(ET.fromstring(text))]


def test_a_valid_file_has_no_problems():
    assert problems(VALID) == []


@pytest.mark.parametrize("change, expected", [
    (('name="pytest" ', ""), "testsuites/testsuite[1]: missing attribute 'name'"),
    (('tests="4"', 'tests="5"'), "testsuites/testsuite[1]: tests=5 but the suite holds 4"),
    (('failures="1"', 'failures="x"'), "attribute 'failures' must be a non-negative integer"),
    (('time="1.5"', 'time="1.5s"'), "attribute 'time' must be a decimal number"),
    (('<failure message="m">text</failure>', '<failures message="m" />'), "element 'failures' is not allowed in 'testcase'"),
    (('<testcase classname="c" name="a"', '<testcase classname="c" nam="a"'), "missing attribute 'name'"),
    (('<property name="outcome" value="pass" />', ""), "(a): missing properties: outcome"),
    (('<property name="outcome" value="crash" /></properties><error', '<property name="outcome" value="crash" /></properties><failure'),
     "outcome crash must be a JUnit error"),
    (("<testsuites ", "<results "), "the root element must be testsuites or testsuite"),  # closing tag changed below
])
def test_each_departure_is_named_with_its_place(change, expected):
    old, new = change
    assert old in VALID
    text = VALID.replace(old, new, 1)
    if old == "<testsuites ":
        text = text.replace("</testsuites>", "</results>")
    found = problems(text)
    assert any(expected in p for p in found), found


def test_a_finding_against_onnxruntime_is_an_expected_failure_not_an_error():
    crash = '<property name="outcome" value="crash" /></properties><error message="m" />'
    as_error = VALID.replace(PROPERTIES + crash, PROPERTIES.replace('name="subject" value="v"', 'name="subject" value="runtime"') + crash)
    assert any("a finding against onnxruntime (crash) must be an expected failure (skipped), not error" in p for p in problems(as_error))
    as_skip = as_error.replace('value="crash" /></properties><error message="m" />', 'value="crash" /></properties><skipped message="m" />')
    as_skip = as_skip.replace('errors="1" failures="1" skipped="1"', 'errors="0" failures="1" skipped="2"')
    assert problems(as_skip) == []
