"""Every case carries markers for its contract's severity, family, subject and isolation
(conformance/plugin/ids.py), registered so that `pytest --markers` lists them and `--strict-markers`
accepts them: `-m required` runs exactly the required contracts' cases."""

from __future__ import annotations

import json
import re
from typing import Callable

import pytest

from conformance.plugin import ids
from conformance.catalogue.contracts import Contract
from conformance.data import contracts_dir
from conformance.catalogue.spec import load_catalogue

BASE = ("-p", "no:cacheprovider")


def catalogue_ids(keep: Callable[[Contract], bool]) -> set[str]:
    """The ids of the CPU EP's cases of the contracts `keep` keeps (the CPU EP has one device, cpu)."""
    catalogue = load_catalogue([str(contracts_dir())], known_checks=())
    return {ids.case_id(ids.file_id(c.family), c.id, "-".join(["cpu", *map(str, params.values())]))
            for c in catalogue.contracts if keep(c) for params in c.cases()}


def test_pytest_lists_the_markers_without_ep(pytester):
    result = pytester.runpytest_subprocess(*BASE, "--markers")
    listed = {line.split(":")[0] for line in result.stdout.lines if line.startswith("@pytest.mark.")}
    expected = {"required", "recommended", "informational", "subject_ep", "subject_runtime", "subject_package", "isolated", "own_process", "stress",
                "family_copy", "family_memory_info", "family_update_inplace", "conformance"}
    assert {f"@pytest.mark.{name}" for name in expected} <= listed


@pytest.mark.parametrize("expression, keep", [
    ("required", lambda c: c.severity == "required"),
    ("recommended or informational", lambda c: c.severity != "required"),
    ("family_memory_info", lambda c: c.family == "memory-info"),
    ("subject_runtime and not family_copy", lambda c: c.subject == "runtime" and c.family != "copy"),
    ("isolated", lambda c: c.isolated),
    ("own_process", lambda c: c.own_process),
])
def test_a_marker_expression_selects_exactly_the_contracts_it_names(pytester, expression, keep):
    result = pytester.runpytest_subprocess(*BASE, "--ep=cpu", "--strict-markers", "--co", "-q", "-m", expression)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:] + result.stderr.str()
    selected = {line for line in result.stdout.lines if line.startswith(ids.PREFIX + "/")}
    assert selected and selected == catalogue_ids(keep)


def test_a_vendors_family_has_its_marker_too(pytester):
    pytester.makefile(".yaml", vendor=VENDOR)
    result = pytester.runpytest_subprocess(*BASE, "vendor.yaml", "--ep=cpu", "--strict-markers", "--co", "-q", "-m", "family_vendor_things")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:] + result.stderr.str()
    assert [line for line in result.stdout.lines if "::" in line] == ["vendor.yaml::vendor-things.update[cpu-float32-3]"]


def test_the_stress_tier_is_selected_by_its_marker_and_a_strict_run_without_it_names_what_it_left_out(pytester):
    """A contract with `tier: stress` carries the marker stress; a strict run with -m 'not stress'
    is a subset that cannot certify, and its verdict reasons name the stress contracts it left out."""
    pytester.makefile(".yaml", vendor=VENDOR + "    tier: stress\n")
    result = pytester.runpytest_subprocess(*BASE, "vendor.yaml", "--ep=cpu", "--strict-markers", "--co", "-q", "-m", "stress")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:] + result.stderr.str()
    assert [line for line in result.stdout.lines if "::" in line and "vendor" in line] == ["vendor.yaml::vendor-things.update[cpu-float32-3]"]
    result = pytester.runpytest_subprocess(*BASE, "vendor.yaml", "--ep=cpu", "--conformance-strict", "-m", "not stress and family_update_inplace",
                                           "--conformance-report", "reports")
    report = json.loads((pytester.path / "reports" / "report.json").read_text())
    assert report["verdict"] == "incomplete", report["verdict_reasons"]
    left_out = re.search(r"the stress tier left out \((\d+) contracts: ", report["verdict_reasons"][0])
    shipped = load_catalogue([str(contracts_dir())], known_checks=()).contracts
    assert left_out and int(left_out.group(1)) == 1 + sum(c.tier == "stress" for c in shipped), report["verdict_reasons"]


VENDOR = """\
family: vendor-things
title: Vendor contracts
contracts:
  - id: vendor-things.update
    statement: The vendor's update MUST copy the bytes exactly.
    subject: ep
    severity: required
    provenance:
      basis: inferred
      ref: "the kit's tests"
    since: "1.22"
    sources:
      - {kind: seed, ref: "a reference"}
    check: update-inplace.from-numpy
    params:
      dtype: [float32]
      shape: ["3"]
"""
