"""Waivers and strict runs end to end through the plugin: checks return chosen outcomes and the
CPU EP's declaration gets waivers (or a not_applicable entry) from a conftest, as a vendor's
spec would give them."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys

import pytest

from pytest_runs import BASE, by_name, kind, properties, pytest_in

CONFTEST = """\
import dataclasses
from conformance.run.scheduler import Scheduler
from conformance.catalogue.contracts import Catalogue, Waiver
from conformance.outcomes import CaseReply, Outcome

OUTCOMES = {outcomes}


def run_case(self, planned):
    outcome, message = OUTCOMES.get(planned.request["contract"], ("pass", ""))
    return CaseReply(Outcome(outcome), message)


original = Catalogue.ep_spec


def ep_spec(self, name):
    return dataclasses.replace(original(self, name), waivers=({waivers}), not_applicable={not_applicable})


Scheduler.run_case = run_case
Catalogue.ep_spec = ep_spec
"""

SELECTED = "session-inputs or nodes-on-ep or in-place"


def run(tmp_path, *args, outcomes, waivers="", not_applicable="{}"):
    (tmp_path / "conftest.py").write_text(CONFTEST.format(outcomes=outcomes, waivers=waivers, not_applicable=not_applicable))
    return pytest_in(tmp_path, "--ep=cpu", "--conformance-isolation=none", "-k", SELECTED, "--junitxml=junit.xml", *args)


WAIVED = ('Waiver("memory-info.session-inputs", "driver bug", "https://example.org/issues/7", until="9.0", onnxruntime=">=1.20"), '
          'Waiver("session.nodes-on-ep", "was broken in 1.0", "https://example.org/issues/8", until_ep="9.0"),')


def test_a_run_whose_only_failures_are_waived_is_conformant_and_lists_its_waivers(tmp_path):
    result = run(tmp_path, outcomes='{"memory-info.session-inputs": ("fail", "bytes differ")}', waivers=WAIVED)
    report = result.report
    assert result.returncode == 0, result.stdout[-2000:]
    assert report["verdict"] == "conformant"
    assert report["verdict_reasons"] == ["conformant under a waiver: memory-info.session-inputs"]
    statuses = {(w["contract"], w["status"]) for w in report["waivers"]}
    assert statuses == {("memory-info.session-inputs", "applied"), ("session.nodes-on-ep", "waiver no longer needed")}
    passed = [r for r in report["results"] if r["contract"] == "session.nodes-on-ep" and r["outcome"] == "pass"]
    assert passed and all(r["message"] == "passed; waiver no longer needed" for r in passed)
    for name in ("report.md", "report.html"):
        text = (tmp_path / "reports" / name).read_text(encoding="utf-8")
        assert "waiver no longer needed" in text and "https://example.org/issues/7" in text


def test_a_waiver_for_other_onnxruntime_versions_or_past_its_ep_version_does_not_apply(tmp_path):
    waivers = ('Waiver("memory-info.session-inputs", "driver bug", "https://example.org/issues/7", onnxruntime="<1.20"), '
               'Waiver("session.nodes-on-ep", "driver bug", "https://example.org/issues/8", until_ep="1.0"),')
    outcomes = '{"memory-info.session-inputs": ("fail", "bytes differ"), "session.nodes-on-ep": ("fail", "ran on CPU")}'
    report = run(tmp_path, outcomes=outcomes, waivers=waivers).report
    assert report["verdict"] == "non_conformant"
    outcomes_seen = {r["contract"]: r["outcome"] for r in report["results"] if r["contract"] in ("memory-info.session-inputs", "session.nodes-on-ep")}
    assert outcomes_seen == {"memory-info.session-inputs": "fail", "session.nodes-on-ep": "fail"}
    assert {(w["contract"], w["status"]) for w in report["waivers"]} == {("session.nodes-on-ep", "expired")}


def test_without_strict_a_required_case_that_cannot_run_is_a_skip(tmp_path):
    result = run(tmp_path, outcomes='{"session.nodes-on-ep": ("not_run", "no hardware")}')
    assert result.returncode == 0
    assert result.report["strict"] is False
    case = by_name(result.junit())["session.nodes-on-ep[cpu-identity-float32]"]
    assert kind(case) == "skipped"


def test_strict_run_fails_on_a_required_contract_that_could_not_run_and_on_a_declared_exemption(tmp_path):
    result = run(tmp_path, "--conformance-strict", outcomes='{"session.nodes-on-ep": ("not_run", "no hardware")}',
                 not_applicable='{"iobinding.in-place": "we bind nothing"}')
    assert result.returncode == pytest.ExitCode.TESTS_FAILED
    # -k SELECTED makes it a subset: labelled so, and non_conformant all the same (a failure
    # or a self-exemption in a subset would be one in the whole catalogue too)
    assert re.search(r"verdict: non_conformant at onnxruntime [0-9.]+'s API \(strict run; partial run: ", result.stdout)
    report = result.report
    assert report["strict"] is True and report["run"]["strict"] is True
    assert report["verdict"] == "non_conformant"
    assert "strict run: required contract could not run: session.nodes-on-ep" in report["verdict_reasons"]
    assert any(r.startswith("strict run: iobinding.in-place: a required contract was declared not applicable by the EP spec")
               for r in report["verdict_reasons"])
    cases = by_name(result.junit())
    exempted = cases["iobinding.in-place[cpu-identity-float32-7x13]"]
    assert kind(exempted) == "failure" and properties(exempted)["outcome"] == "not_applicable"
    assert "strict run" in exempted.find("failure").get("message")
    assert "Strict run (certification mode)" in (tmp_path / "reports" / "report.md").read_text(encoding="utf-8")
    assert 'id="strict"' in (tmp_path / "reports" / "report.html").read_text(encoding="utf-8")


def test_the_same_run_without_strict_is_incomplete_and_exits_zero(tmp_path):
    result = run(tmp_path, outcomes='{"session.nodes-on-ep": ("not_run", "no hardware")}',
                 not_applicable='{"iobinding.in-place": "we bind nothing"}')
    assert result.returncode == 0
    assert result.report["verdict"] == "incomplete"


def strict_case(outcome, device, contract="copy.x"):
    from conformance.outcomes import Outcome, Result

    return Result(contract=contract, ep="E", device=device, params={}, outcome=Outcome(outcome), message="m", spec="x:1",
                  severity="required", subject="ep")


def test_strict_verdict_accepts_unrun_cases_of_a_contract_shown_on_each_device():
    from conformance.outcomes import Verdict, verdict

    results = [strict_case("pass", "d0"), strict_case("not_run", "d0"), strict_case("pass", "d1"), strict_case("not_run", "d1")]
    assert verdict(results, strict=True) == (Verdict.CONFORMANT, [])


def test_strict_verdict_fails_a_contract_not_shown_on_one_device():
    from conformance.outcomes import Verdict, verdict

    results = [strict_case("pass", "d0"), strict_case("not_run", "d1")]
    assert verdict(results) == (Verdict.CONFORMANT, [])
    assert verdict(results, strict=True) == (Verdict.NON_CONFORMANT, ["strict run: required contract could not run on E d1: copy.x"])
    assert verdict(results, strict=True, interrupted=True)[1][0] == "strict run: the run was interrupted before every check finished"


# --- the waiver fields in a spec, and the pure rules -----------------------------------------

EP_WITH_WAIVERS = """\
ep:
  name: myep
  provider: MyExecutionProvider
  summary: a vendor's EP
  packages: []
  memory:
    default: {device_type: npu, vendor_id: 4660, name: MyNpu}
    host_accessible: null
  waivers:
    - contract: copy.device-to-device
      reason: not implemented before driver 2.0
      url: https://example.com/issue/1
      device: npu0
      onnxruntime: ">=1.30, <1.40"
      ep_version: "<2.0"
      until: {ep: "2.0"}
  sources: []
"""


def test_waiver_selectors_and_ep_version_expiry_load_from_a_spec(tmp_path):
    from conformance.checks import known_checks
    from conformance.catalogue.spec import load_catalogue
    from conformance.data import shipped_spec_dirs

    (tmp_path / "ep.yaml").write_text(EP_WITH_WAIVERS)
    catalogue = load_catalogue([*map(str, shipped_spec_dirs()), str(tmp_path / "ep.yaml")], known_checks=known_checks())
    (waiver,) = catalogue.ep_spec("myep").waivers
    assert (waiver.until, waiver.until_ep, waiver.device, waiver.onnxruntime, waiver.ep_version) == (None, "2.0", "npu0", ">=1.30, <1.40", "<2.0")


@pytest.mark.parametrize("bad", ['onnxruntime: "1.30"', 'until: {driver: "2.0"}', 'until: "soon"'])
def test_a_malformed_waiver_field_is_a_spec_error(tmp_path, bad):
    from conformance.checks import known_checks
    from conformance.catalogue.spec import load_catalogue
    from conformance.data import shipped_spec_dirs
    from conformance.errors import SpecErrors

    key = bad.split(":")[0]
    text = "\n".join(line for line in EP_WITH_WAIVERS.splitlines() if not line.strip().startswith(f"{key}:"))
    (tmp_path / "ep.yaml").write_text(text.replace("      reason:", f"      {bad}\n      reason:"))
    with pytest.raises(SpecErrors) as info:
        load_catalogue([*map(str, shipped_spec_dirs()), str(tmp_path / "ep.yaml")], known_checks=known_checks())
    assert any("waivers" in str(e) or key in str(e) for e in info.value.errors), [str(e) for e in info.value.errors]


@pytest.mark.parametrize("selector, version, expected", [
    (">=1.30, <1.33", "1.32.0", True), (">=1.30, <1.33", "1.33.0", False), ("==1.32.0", "1.32.0", True),
    ("<2.0", None, False), (None, None, True), ("!=1.32", "1.32.0", False),
])
def test_version_selectors(selector, version, expected):
    from conformance.catalogue.versions import selects

    assert selects(selector, version) is expected


def test_a_waived_not_run_alone_shows_nothing_and_leaves_the_run_incomplete():
    from conformance.outcomes import Details, Outcome, Result, Verdict, verdict

    waived = Result(contract="copy.x", ep="E", device="d", params={}, outcome=Outcome.WAIVED, message="waived", spec="x:1",
                    severity="required", subject="ep", details=Details(waived_outcome="not_run"))
    assert verdict([waived])[0] is Verdict.INCOMPLETE
    shown = Result(**{**waived.__dict__, "details": Details(waived_outcome="fail")})
    assert verdict([shown]) == (Verdict.CONFORMANT, ["conformant under a waiver: copy.x"])


@pytest.mark.parametrize("fault, verdict, exit_code", [("", "conformant", 0), ("claim-nothing", "non_conformant", 1)])
def test_strict_run_of_the_reference_ep(refdev_library, tmp_path, fault, verdict, exit_code):
    """The correct reference EP, which does not take every model, is conformant in a strict run;
    one that takes no node at all (incomplete in a normal run) fails it."""
    completed = subprocess.run([sys.executable, "-m", "pytest", *BASE, "-q", "--ep-library", str(refdev_library), "--ep", "refdev",
                                "--conformance-strict", "--conformance-report", str(tmp_path / "r")],
                               cwd=tmp_path, env=dict(os.environ, ORT_REFDEV_FAULT=fault), capture_output=True, text=True, timeout=600)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert (report["verdict"], completed.returncode) == (verdict, exit_code), report["verdict_reasons"]
    assert report["strict"] is True
