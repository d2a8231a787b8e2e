"""pytest run in a folder of its own, and the test cases of its JUnit file, for the tests of the
plugin end to end (test_plugin, test_waivers_strict). A helper module, not a fixture: the JUnit
readers are plain functions of an XML element, and pytest_in also serves module-scoped fixtures
and helpers that build a folder first; there is nothing to set up or tear down."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from conformance.report.junit_schema import RESULT_TAGS

BASE = ("-p", "no:cacheprovider")  # the options every child pytest run gets
TIMEOUT = 180


@dataclass
class Run:
    path: Path
    returncode: int
    stdout: str
    stderr: str

    @property
    def report(self) -> dict:
        return json.loads((self.path / "reports" / "report.json").read_text(encoding="utf-8"))

    def junit(self, name: str = "junit.xml") -> list[ET.Element]:
        return list(ET.parse(self.path / name).getroot().iter("testcase"))


def pytest_in(folder: Path, *args: str) -> Run:
    completed = subprocess.run([sys.executable, "-m", "pytest", *BASE, *args], cwd=folder, capture_output=True,
                               text=True, timeout=TIMEOUT)
    return Run(folder, completed.returncode, completed.stdout, completed.stderr)


def properties(case: ET.Element) -> dict[str, str]:
    return {p.get("name"): p.get("value") for p in case.iter("property")}


def kind(case: ET.Element) -> str:
    """passed | failure | error | skipped, as JUnit says."""
    tags = [child.tag for child in case if child.tag in RESULT_TAGS]
    return tags[0] if tags else "passed"


def by_name(cases: list[ET.Element]) -> dict[str, ET.Element]:
    return {case.get("name"): case for case in cases}
