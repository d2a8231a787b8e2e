"""A subset never certifies: which part of the catalogue a run ran is found by comparing the
catalogue's checks with the results (conformance/plugin/selection.py), recorded in report.json's
`selection`, and a strict subset ends incomplete with a non-zero exit. --collect-only starts no
worker, loads no EP library and writes no report."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, conformance_run
from conformance.outcomes import Details, Outcome, Result, Verdict, verdict
from conformance.report.schema import report_problems
from conformance.plugin.selection import Selection, case_key, compare, stress_left_out
from conformance.catalogue.spec import load_catalogue
from conformance.data import contracts_dir

ITEM = "specs/contracts/update-inplace.yaml::update-inplace.from-numpy[cpu-float32-7x13]"


def keys(*names: str) -> list[tuple]:
    return [case_key("CPUExecutionProvider", name, "cpu", {"dtype": "float32"}) for name in names]


def test_a_run_with_a_result_for_every_check_of_the_catalogue_is_complete_whatever_its_options():
    selection = compare(keys("a", "b"), keys("b", "a"), ["-x"])
    assert selection == Selection(2, 2) and selection.complete


def test_a_subset_is_found_by_the_missing_results_even_when_nothing_names_it():
    selection = compare(keys("a", "b", "c"), keys("a"))
    assert not selection.complete
    assert selection.describe() == "1 of 3 checks ran (2 checks of the catalogue have no result)"
    assert compare(keys("a", "b"), keys("a"), ["-k a"]).to_dict() == {
        "complete": False, "catalogue": 2, "ran": 1, "how": ["-k a"], "text": "1 of 2 checks ran (-k a)"}


def test_a_result_of_a_case_outside_the_catalogue_does_not_make_up_for_a_missing_one():
    assert not compare(keys("a", "b"), keys("a", "z")).complete


def test_the_case_key_of_a_result_that_went_through_json_is_the_same():
    params = {"dtype": "float32", "shape": "7x13", "count": 3}
    assert case_key("E", "c", "d", json.loads(json.dumps(params))) == case_key("E", "c", "d", dict(reversed(params.items())))


def result(outcome: Outcome, contract: str = "copy.x", **details) -> Result:
    return Result(contract=contract, ep="E", device="d", params={}, outcome=outcome, message="", spec="x:1", severity="required",
                  subject="ep", details=Details(**details))


def test_a_strict_subset_is_incomplete_never_conformant():
    decided, reasons = verdict([result(Outcome.PASS)], strict=True, subset="1 of 9 checks ran (-k x)")
    assert decided is Verdict.INCOMPLETE
    assert reasons == ["strict run: a subset of the catalogue cannot certify: 1 of 9 checks ran (-k x)"]
    assert verdict([result(Outcome.PASS)], strict=True) == (Verdict.CONFORMANT, [])


def test_a_strict_subset_that_shows_a_failure_or_a_self_exemption_is_non_conformant():
    assert verdict([result(Outcome.FAIL)], strict=True, subset="s")[0] is Verdict.NON_CONFORMANT
    exempt = result(Outcome.NOT_APPLICABLE, strict="declared not applicable")
    assert verdict([result(Outcome.PASS), exempt], strict=True, subset="s")[0] is Verdict.NON_CONFORMANT


def test_a_non_strict_subset_is_decided_as_usual():
    assert verdict([result(Outcome.PASS)], subset="1 of 9 checks ran")[0] is Verdict.CONFORMANT


@pytest.mark.parametrize("args, named", [
    (["-k", "from-numpy"], "-k from-numpy"),
    (["-m", "not conformance"], "-m not conformance"),
    (["-m", "required"], "-m required"),
    (["--deselect", "ort-conformance/update-inplace::update-inplace.from-numpy[cpu-float32-scalar]"], "--deselect ort-conformance/update-inplace"),
    (["ort-conformance/update-inplace::update-inplace.from-numpy[cpu-float32-7x13]"], "named on the command line: ort-conformance/update-inplace::"),
    ([ITEM], "named on the command line: " + ITEM),
    (["specs/contracts/copy.yaml"], "named on the command line: specs/contracts/copy.yaml"),
    (["-n", "2", "-k", "from-numpy"], "-k from-numpy"),
])
def test_a_strict_run_of_a_subset_ends_incomplete_naming_it_with_a_non_zero_exit(tmp_path, args, named):
    (tmp_path / "specs").symlink_to(ROOT / "specs")  # node ids and files relative to a checkout
    run = conformance_run(tmp_path, "--ep=cpu", "--conformance-strict", *args)
    report = run.report
    assert (report["verdict"], run.exit_code != 0) == ("incomplete", True), report["verdict_reasons"]
    selection = report["selection"]
    assert not selection["complete"] and selection["ran"] < selection["catalogue"]
    assert any(how.startswith(named) for how in selection["how"]), selection
    assert report["verdict_reasons"][0].startswith("strict run: a subset of the catalogue cannot certify: ")
    assert "partial run: " in run.output and re.search(r"verdict: incomplete at onnxruntime [0-9.]+'s API \(strict run; partial run: ", run.output)
    assert report_problems(report) == []


def test_a_strict_run_stopped_by_maxfail_is_a_subset_too(tmp_path):
    """-x after a failure: the checks it did not reach have no result; the failure itself makes
    the strict run non_conformant, and the report still says only part of it ran."""
    (tmp_path / "conftest.py").write_text(
        "from conformance.run.scheduler import Scheduler\nfrom conformance.outcomes import CaseReply, Outcome\n"
        "Scheduler.run_case = lambda self, planned: CaseReply(Outcome.FAIL, 'bytes differ')\n")
    run = conformance_run(tmp_path, "--ep=cpu", "--conformance-isolation=none", "--conformance-strict", "-x")
    selection = run.report["selection"]
    assert run.report["verdict"] == "non_conformant" and run.exit_code != 0
    assert not selection["complete"] and "-x" in selection["how"], selection
    assert any(how.startswith("stopped early") for how in selection["how"]), selection


def test_a_whole_strict_run_is_complete(cpu_reports):
    """The whole catalogue (cpu_reports is a plain --ep=cpu run): every check has a result."""
    report = json.loads((cpu_reports / "report.json").read_text())
    assert report["selection"]["complete"] and report["selection"]["ran"] == report["selection"]["catalogue"] == len(report["results"])


def test_a_non_strict_subset_is_labelled_partial_in_every_report(tmp_path):
    # (Sessions: the EP's own promise on the CPU EP, where update_inplace of plain CPU memory is the runtime's.)
    run = conformance_run(tmp_path, "--ep=cpu", "-k", "nodes-on-ep")
    assert run.exit_code == 0 and run.report["verdict"] == "conformant"
    text = run.report["selection"]["text"]
    catalogue = run.report["selection"]["catalogue"]
    stress = sorted(c.id for c in load_catalogue([str(contracts_dir())], known_checks=()).contracts if c.tier == "stress")
    assert text == f"16 of {catalogue} checks ran (-k nodes-on-ep; {catalogue - 16} deselected; {stress_left_out(stress)})"
    assert re.search(r"verdict: conformant at onnxruntime [0-9.]+'s API \(partial run: " + re.escape(text) + r"\)", run.output)
    assert f"**Partial run**: {text}" in (run.reports / "report.md").read_text()
    assert 'id="partial"' in (run.reports / "report.html").read_text()


def test_collect_only_starts_no_worker_loads_no_library_and_keeps_the_last_report(tmp_path):
    """An EP library that does not exist would stop any run that loads it; --collect-only lists
    its items without loading it, and the report folder is left as the last run left it."""
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "report.json").write_text('{"last": "run"}')
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "--ep=cpu",
                                "--ep-library", str(tmp_path / "missing.so"), "--ep", "MyEp", "--conformance-report", str(reports)],
                               cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert "update-inplace.from-numpy[cpu-float32-7x13]" in completed.stdout
    assert "[myep-float32-7x13]" in completed.stdout
    assert sorted(p.name for p in reports.iterdir()) == ["report.json"]
    assert (reports / "report.json").read_text() == '{"last": "run"}'


def test_collect_only_names_the_items_a_run_has(tmp_path):
    listed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "--ep=cpu",
                             "--conformance-report", str(tmp_path / "r")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    ids = {line for line in listed.stdout.splitlines() if "::" in line}
    report = json.loads((Path(conformance_run(tmp_path, "--ep=cpu").reports) / "report.json").read_text())
    assert len(ids) == len(report["results"]) == report["selection"]["catalogue"]


FAKED = """\
from conformance.run.scheduler import Scheduler
from conformance.outcomes import CaseReply, Outcome


def run_case(self, planned):
    if planned.request["contract"] == "session.nodes-on-ep":
        {action}
    return CaseReply(Outcome.PASS, "")


Scheduler.run_case = run_case
"""


def test_an_interrupted_strict_run_is_a_subset(tmp_path):
    (tmp_path / "conftest.py").write_text(FAKED.format(action="raise KeyboardInterrupt"))
    run = conformance_run(tmp_path, "--ep=cpu", "--conformance-isolation=none", "--conformance-strict")
    selection = run.report["selection"]
    assert run.report["verdict"] == "incomplete" and run.exit_code != 0
    assert not selection["complete"] and "stopped early: interrupted" in selection["how"], selection


def test_the_stress_contracts_left_out_are_named_a_few_and_counted():
    assert stress_left_out(["a.b", "c.d"]) == "the stress tier left out (2 contracts: a.b, c.d)"
    many = [f"s.c{i}" for i in range(9)]
    assert stress_left_out(many) == "the stress tier left out (9 contracts: s.c0, s.c1, s.c2, s.c3, s.c4, s.c5 and 3 more)"
