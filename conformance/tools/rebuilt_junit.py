"""junit.xml of a report rebuilt from its journal (`ort-conformance rebuild`), so that the
rebuilt folder is a whole report set and can be bundled.

A run's own junit.xml is pytest's (plugin/junit_writer.py); a run killed before its end wrote
none, and pytest is not there to write one. This writes each result as the run would have told
pytest (report.junit_schema.expected_kind): the same case names (pytest's ids, plugin/ids.py),
JUnit classes, properties and kinds, so that `verify` finds it agrees with report.json.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from typing import Any

from conformance.outcomes import Outcome, Result
from conformance.plugin import ids
from conformance.report import junit_schema, reason_line

# How each kind is written, as pytest writes it (the `type` of the element).
_TYPES = {"failure": "ContractFailure", "error": "ContractFailure", "skipped": "pytest.skip"}


def render(report: dict[str, Any]) -> bytes:
    """The JUnit XML of `report` (report.json's data)."""
    results = [Result.from_dict(r) for r in report.get("results", ())]
    labels = list(dict.fromkeys(str(d.get("label", "")) for d in report.get("devices", ()) if d.get("label")))
    suite = ET.Element("testsuite", name="-".join([ids.PREFIX, *(labels or ["ep"])]))
    kinds: Counter[str] = Counter()
    for result in results:
        kind = junit_schema.expected_kind(result)
        kinds[kind] += 1
        suite.append(_case(result, kind))
    suite.set("tests", str(len(results)))
    suite.set("failures", str(kinds["failure"]))
    suite.set("errors", str(kinds["error"]))
    suite.set("skipped", str(kinds["skipped"]))
    suite.set("time", f"{sum(r.duration for r in results):.3f}")
    root = ET.Element("testsuites", name="ort-conformance rebuild")
    root.append(suite)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _case(result: Result, kind: str) -> ET.Element:
    head, _, name = result.nodeid.partition("::")
    case = ET.Element("testcase", classname=ids.class_name(result.nodeid) or head.replace("/", "."), name=name or result.contract,
                      time=f"{result.duration:.3f}")
    properties = ET.SubElement(case, "properties")
    for key, value in result.case_properties():
        ET.SubElement(properties, "property", name=key, value=str(value))
    if kind != "passed":
        finding = result.is_finding and not result.against_ep
        message = f"finding against onnxruntime, not the EP: {result.message}" if finding else reason_line(result)
        if kind == "skipped" and result.outcome is not Outcome.PASS and not finding:
            message = f"[{result.outcome.value}] {result.message}"
        ET.SubElement(case, kind, type="pytest.xfail" if finding else _TYPES[kind], message=message)
    return case
