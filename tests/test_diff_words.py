"""`ort-conformance diff` in pytest's words: cases by their pytest ids, a case that stopped
being checked apart from the fixes, a worse verdict a regression, and new findings against
onnxruntime apart (gating only with --fail-on-findings)."""

from __future__ import annotations

import copy
import json

import pytest

from conformance.cli import main as cli


@pytest.fixture
def runs(cpu_reports, tmp_path):
    """(old, new, write): two copies of the CPU run's report.json, and a function that writes
    both and returns their paths."""
    old = json.loads((cpu_reports / "report.json").read_text())

    def write(before, after):
        (tmp_path / "old.json").write_text(json.dumps(before))
        (tmp_path / "new.json").write_text(json.dumps(after))
        return str(tmp_path / "old.json"), str(tmp_path / "new.json")

    return old, copy.deepcopy(old), write


def _case(report, outcome, subject):
    return next(r for r in report["results"] if r["outcome"] == outcome and r["subject"] == subject)


def test_a_case_that_stopped_being_checked_is_its_own_section_not_a_fix(runs, capsys):
    old, new, write = runs
    finding = _case(new, "fail", "runtime")
    finding["outcome"], finding["message"] = "not_run", "not run: the worker was lost"
    assert cli(["diff", *write(old, new)]) == 0
    out = capsys.readouterr().out
    assert "NO LONGER CHECKED (1):" in out and f"  {finding['nodeid']}: fail -> not_run: not run" in out, out
    assert "fixes" not in out


def test_a_worse_verdict_exits_non_zero_and_says_so(runs, capsys):
    old, new, write = runs
    passed = _case(new, "pass", "ep")
    passed["outcome"], passed["message"] = "not_run", "not run: the worker was lost"
    new["verdict"] = "incomplete"
    assert cli(["diff", *write(old, new)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("verdict: conformant -> incomplete (WORSE)"), out
    assert f"  {passed['nodeid']}: pass -> not_run" in out
    assert cli(["diff", *write(new, old)]) == 0  # the way back is better


def test_new_findings_against_onnxruntime_are_apart_and_gate_only_when_asked(runs, capsys):
    old, new, write = runs
    finding = _case(new, "pass", "runtime")
    finding["outcome"], finding["message"] = "fail", "onnxruntime accepted a bad request"
    paths = write(old, new)
    assert cli(["diff", *paths]) == 0
    out = capsys.readouterr().out
    assert "new findings against onnxruntime" in out and f"  {finding['nodeid']}: pass -> fail" in out, out
    assert "REGRESSIONS" not in out
    assert cli(["diff", *paths, "--fail-on-findings"]) == 1
