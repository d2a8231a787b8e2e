"""JUnit XML as CI tools read it, checked without a schema file.

The structure is the Jenkins/Ant-style JUnit schema that Jenkins, GitLab and most CI tools
parse (Surefire's junit-10.xsd, which pytest's own tests use): `testsuites` > `testsuite` >
`testcase` > `failure` | `error` | `skipped` | `system-out` | `system-err`, with the required
attributes and their types. It is written here as a table rather than vendored as an .xsd:
the table is small, needs no XML-schema dependency at run time (`ort-conformance verify` checks
the junit.xml of a bundle with it), and it checks what no XSD can express: that the counts on
each suite match its cases, and that every case carries the kit's properties.

Two deliberate differences from junit-10.xsd: a `testcase` may hold one `properties` element
(pytest writes a case's user_properties there; junit-10.xsd has no place for them, and it names
the error element `errors`, a slip in that file: every reader and writer uses `error`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from conformance.outcomes import BROKEN, CASE_PROPERTIES, NOT_AGAINST_EP, PYTEST_ERRORS, Outcome, Result

RESULT_TAGS = ("failure", "error", "skipped")

_TEXT = {"type", "message"}
# element -> (required attributes, optional attributes, allowed children)
ELEMENTS: dict[str, tuple[set[str], set[str], set[str]]] = {
    "testsuites": (set(), {"name", "time", "tests", "failures", "errors", "skipped", "disabled"}, {"testsuite"}),
    "testsuite": ({"name", "tests", "failures", "errors"},
                  {"group", "time", "skipped", "disabled", "timestamp", "hostname", "id", "package", "file", "log", "url", "version"},
                  {"testsuite", "properties", "testcase", "system-out", "system-err"}),
    "testcase": ({"name"}, {"time", "classname", "group", "file", "line"},
                 {"properties", *RESULT_TAGS, "system-out", "system-err", "rerunFailure", "rerunError", "flakyFailure", "flakyError"}),
    "properties": (set(), set(), {"property"}),
    "property": ({"name", "value"}, set(), set()),
    "failure": (set(), _TEXT, set()),
    "error": (set(), _TEXT, set()),
    "skipped": (set(), _TEXT, set()),
    "system-out": (set(), set(), set()),
    "system-err": (set(), set(), set()),
    "rerunFailure": ({"type"}, {"message"}, {"stackTrace", "system-out", "system-err"}),
    "rerunError": ({"type"}, {"message"}, {"stackTrace", "system-out", "system-err"}),
    "flakyFailure": ({"type"}, {"message"}, {"stackTrace", "system-out", "system-err"}),
    "flakyError": ({"type"}, {"message"}, {"stackTrace", "system-out", "system-err"}),
    "stackTrace": (set(), set(), set()),
}
COUNTS = {"tests", "failures", "errors", "skipped", "disabled"}
_DIGITS = frozenset("0123456789")  # ASCII alone: str.isdigit() also takes '²', which int() refuses


def is_count(value: str) -> bool:
    """Whether `value` is a non-negative integer in ASCII digits."""
    return bool(value) and set(value) <= _DIGITS


def is_time(value: str) -> bool:
    """Whether `value` is what junit-10.xsd's SUREFIRE_TIME takes: digits with optional
    thousands separators (after the last comma, at least three digits) and up to three decimals.
    Said as string tests, not as the schema's pattern `(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*`,
    whose nested repeats take seconds on 22 characters and years on 40 (a junit.xml from
    elsewhere chooses its attributes)."""
    whole, dot, fraction = value.partition(".")
    if dot and not (len(fraction) <= 3 and set(fraction) <= _DIGITS):
        return False
    if not set(whole) <= _DIGITS | {","}:
        return False
    last = whole.rpartition(",")
    return not last[1] or len(last[2]) >= 3


def seconds_of(value: str) -> float:
    """The seconds a `time` attribute that is_time() takes says (0 for one it does not)."""
    digits = value.replace(",", "")
    return float(digits) if is_time(value) and digits.strip(".") else 0.0


@dataclass(frozen=True)
class Problem:
    path: str  # e.g. testsuites/testsuite[1]/testcase[7]
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def check_file(path: Path, *, conformance: bool = True) -> list[Problem]:
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as exc:
        return [Problem(str(path), f"not readable XML: {exc}")]
    return check(root, conformance=conformance)


def check(root: ET.Element, *, conformance: bool = True) -> list[Problem]:
    """Every way `root` departs from the schema (and, with `conformance`, from the kit's rules)."""
    if root.tag not in ("testsuites", "testsuite"):
        return [Problem(root.tag, "the root element must be testsuites or testsuite")]
    problems = list(_structure(root, root.tag))
    for path, suite in _suites(root, root.tag):
        problems += _counts(suite, path)
    if conformance:
        for path, case in _cases(root, root.tag):
            problems += _properties(case, path)
    return problems


def _structure(element: ET.Element, path: str):
    required, optional, children = ELEMENTS[element.tag]
    for name in sorted(required - set(element.attrib)):
        yield Problem(path, f"missing attribute '{name}'")
    for name in sorted(set(element.attrib) - required - optional):
        yield Problem(path, f"attribute '{name}' is not in the schema")
    for name, value in element.attrib.items():
        if name in COUNTS and not is_count(value):
            yield Problem(path, f"attribute '{name}' must be a non-negative integer, not {value[:40]!r}")
        if name == "time" and not is_time(value):
            yield Problem(path, f"attribute 'time' must be a decimal number of seconds, not {value[:40]!r}")
    seen: dict[str, int] = {}
    for child in element:
        seen[child.tag] = seen.get(child.tag, 0) + 1
        child_path = f"{path}/{child.tag}[{seen[child.tag]}]"
        if child.tag not in children:
            yield Problem(child_path, f"element '{child.tag}' is not allowed in '{element.tag}'")
            continue
        yield from _structure(child, child_path)
    if element.tag == "testcase" and seen.get("properties", 0) > 1:
        yield Problem(path, "more than one properties element")


def _children(element: ET.Element, tag: str, path: str):
    for index, child in enumerate(element.findall(tag), start=1):
        yield f"{path}/{tag}[{index}]", child


def _suites(element: ET.Element, path: str):
    if element.tag == "testsuite":
        yield path, element
    for child_path, suite in _children(element, "testsuite", path):
        yield from _suites(suite, child_path)


def _cases(root: ET.Element, path: str):
    for suite_path, suite in _suites(root, path):
        yield from _children(suite, "testcase", suite_path)


def _counts(suite: ET.Element, path: str) -> list[Problem]:
    cases = suite.findall("testcase")
    actual = {"tests": len(cases), **{f"{tag}s" if tag != "skipped" else tag: sum(1 for c in cases if c.find(tag) is not None) for tag in RESULT_TAGS}}
    problems = []
    for attribute, count in actual.items():
        declared = suite.get(attribute)
        if declared is not None and is_count(declared) and int(declared) != count and not suite.findall("testsuite"):
            problems.append(Problem(path, f"{attribute}={declared} but the suite holds {count}"))
    return problems


def _properties(case: ET.Element, path: str) -> list[Problem]:
    values = {p.get("name"): p.get("value") for p in case.iter("property")}
    missing = [name for name in CASE_PROPERTIES if not values.get(name)]
    if missing:
        return [Problem(f"{path} ({case.get('name')})", f"missing properties: {', '.join(missing)}")]
    kind = next((tag for tag in RESULT_TAGS if case.find(tag) is not None), "passed")
    outcome = values["outcome"]
    if outcome == "pass" and kind != "passed":
        return [Problem(f"{path} ({case.get('name')})", f"outcome pass, but JUnit says {kind}")]
    finding = values["subject"] in NOT_AGAINST_EP and outcome in BROKEN  # "both" counts against the EP: a failure or an error
    if finding and kind != "skipped":
        return [Problem(f"{path} ({case.get('name')})", f"a finding against onnxruntime ({outcome}) must be an expected failure (skipped), not {kind}")]
    if outcome in PYTEST_ERRORS and not finding and kind != "error":
        return [Problem(f"{path} ({case.get('name')})", f"outcome {outcome} must be a JUnit error, not {kind}")]
    return []


def case_kind(case: ET.Element) -> str:
    """What JUnit says of a test case: failure, error, skipped, or passed."""
    return next((tag for tag in RESULT_TAGS if case.find(tag) is not None), "passed")


def expected_kind(result: Result) -> str:
    """What JUnit must say of `result`'s case, as the plugin tells pytest: a strict run's
    refusal fails; a finding against onnxruntime alone is an expected failure (skipped); a
    failure fails; a crash, a timeout or an error is an error; a pass passes; the rest skip."""
    if result.details.strict:
        return "failure"
    if result.is_finding and not result.against_ep:
        return "skipped"
    if result.outcome is Outcome.FAIL:
        return "failure"
    if result.outcome in PYTEST_ERRORS:
        return "error"
    return "passed" if result.outcome is Outcome.PASS else "skipped"
