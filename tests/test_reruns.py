"""Tries again (`--conformance-rerun`, conformance/run/reruns.py): a failure told from a flake, a
crash quarantined only when it comes back, and a flaky case never certified. refdev's
`intermittent` modes fail some tries and not others."""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET

import pytest

from conftest import conformance_run
from conformance.outcomes import CaseReply, Details, Outcome, Result, Tried, Verdict, verdict
from conformance.report.schema import report_problems
from conformance.run.reruns import reruns_option, settle, tries_wanted

PASS, FAIL = CaseReply(Outcome.PASS, ""), CaseReply(Outcome.FAIL, "bytes differ", Details.from_wire({"violations": [{"message": "bytes differ"}]}))
CRASH = CaseReply(Outcome.CRASH, "the process was killed by SIGKILL\nits last output", Details.from_wire({"call": {"kind": "copy_tensors"}}))


def tries(*replies: CaseReply):
    """`again` for settle: the replies in turn, and how many were asked for."""
    queue = list(replies)
    asked = []

    def again() -> CaseReply:
        asked.append(1)
        return queue.pop(0)

    return again, asked


def test_a_pass_is_not_tried_again():
    again, asked = tries()
    assert settle(PASS, again, 3) is PASS and asked == []


def test_a_failure_is_tried_again_only_when_asked_and_one_that_comes_back_stays_a_failure():
    again, asked = tries()
    assert settle(FAIL, again, 0) is FAIL and asked == []
    again, asked = tries(FAIL, FAIL)
    settled = settle(FAIL, again, 2)
    assert (settled.outcome, settled.message, len(asked)) == (Outcome.FAIL, "bytes differ", 2)
    assert [t["outcome"] for t in settled.details.to_wire()["tries"]] == ["fail", "fail", "fail"]


def test_a_failure_that_passes_when_tried_again_is_flaky_with_every_try():
    again, asked = tries(PASS, FAIL)
    settled = settle(FAIL, again, 3)
    assert settled.outcome is Outcome.FLAKY and len(asked) == 1  # the tries stop at the first that differs
    assert settled.details.to_wire()["tries"] == [{"outcome": "fail", "message": "bytes differ"}, {"outcome": "pass", "message": ""}]
    assert settled.details.to_wire()["violations"] == FAIL.details.to_wire()["violations"]
    assert settled.message == "its 2 tries gave different outcomes: try 1 fail: bytes differ; try 2 pass"


def test_a_crash_is_tried_once_more_without_being_asked_and_quarantined_only_when_it_comes_back():
    assert tries_wanted(CRASH, 0) == 1 and tries_wanted(CaseReply(Outcome.TIMEOUT, ""), 0) == 1 and tries_wanted(FAIL, 0) == 0
    again, _ = tries(CRASH)
    twice = settle(CRASH, again, 0)
    assert twice.outcome is Outcome.CRASH and twice.details.to_wire()["call"] == CRASH.details.to_wire()["call"] and len(twice.details.to_wire()["tries"]) == 2
    again, _ = tries(PASS)
    once = settle(CRASH, again, 0)
    assert once.outcome is Outcome.FLAKY and once.details.to_wire()["call"] == CRASH.details.to_wire()["call"]
    assert once.message.startswith("its 2 tries gave different outcomes: try 1 crash: the process was killed by SIGKILL; try 2 pass")


# --- a worker lost to the machine ----------------------------------------------------------------

KILLED = CaseReply(Outcome.CRASH, "the process running it was killed by SIGKILL during copy_tensors cpu>default",
                   Details.from_wire({"call": {"kind": "copy_tensors"}, "violations": [{"message": "killed"}], "machine": {
                       "kind": "killed", "evidence": "process 7's wait status: killed by SIGKILL, a signal the kit had not sent it"}}))
STOPPED = CaseReply(Outcome.TIMEOUT, "it did not finish within 5 s: the worker was stopped (/proc/7/stat: state T (stopped by a signal))",
                    Details.from_wire({"machine": {"kind": "stopped", "evidence": "/proc/7/stat: state T (stopped by a signal) when its 5 s ran out"}}))
STARVED = CaseReply(Outcome.TIMEOUT, "it did not finish within 60 s (stuck in CopyTensors cpu>default): the worker was kept waiting for a CPU (...)",
                    Details.from_wire({"machine": {"kind": "starved", "evidence": "/proc/7/task/*/schedstat over 0.5 s: waited 0.38 s for a CPU, "
                                                                                  "ran 0.12 s when its 60 s ran out"}}))
ABORTED = CaseReply(Outcome.CRASH, "the process running it was killed by SIGABRT", Details.from_wire({"call": {"kind": "copy_tensors"}}))
PASSED = CaseReply(Outcome.PASS, "", Details.from_wire({"evidence": {"bytes_compared": 364}}), 0.25)


@pytest.mark.parametrize("lost, said", [(KILLED, "killed from outside (SIGKILL)"), (STOPPED, "stopped from outside until its time ran out"),
                                        (STARVED, "kept waiting for a CPU by other processes when its time ran out")])
def test_a_try_lost_to_the_machine_that_the_next_does_not_repeat_is_not_counted(lost, said):
    again, asked = tries(PASSED)
    settled = settle(lost, again, 0)
    assert len(asked) == 1 and settled.outcome is Outcome.PASS and settled.message == "" and settled.duration == 0.25
    assert settled.details.to_wire()["evidence"] == PASSED.details.to_wire()["evidence"]  # the pass's own, what it proved
    assert settled.details.tries == (Tried(lost.outcome, lost.message, counted=False), Tried(Outcome.PASS, ""))
    assert settled.details.to_wire()["machine_events"] == [{"try": 1, **lost.details.to_wire()["machine"],
                                                  "text": f"the worker was {said} on try 1; try 2 passed: not counted against the EP"}]
    assert "machine" not in settled.details.to_wire() and "violations" not in settled.details.to_wire() and "call" not in settled.details.to_wire()


@pytest.mark.parametrize("lost, again_lost", [(KILLED, KILLED), (STOPPED, STOPPED), (STARVED, STARVED)])
def test_a_try_lost_to_the_machine_that_the_next_repeats_is_the_eps_with_both_tries_counted(lost, again_lost):
    again, asked = tries(again_lost)
    settled = settle(lost, again, 0)
    assert len(asked) == 1 and settled.outcome is lost.outcome and settled.message == lost.message
    assert [t.get("counted", True) for t in settled.details.to_wire()["tries"]] == [True, True]
    assert "machine_events" not in settled.details.to_wire() and "machine" not in settled.details.to_wire()
    assert settled.details.to_wire().get("call") == lost.details.to_wire().get("call")  # the call is quarantined, as a crash twice always was


def test_a_kill_then_a_stop_count_as_a_repeat_and_differ():
    """Either event repeated is the EP's: two losses in a row, whatever ended them, are not excused."""
    again, _ = tries(STOPPED)
    settled = settle(KILLED, again, 0)
    assert settled.outcome is Outcome.FLAKY and "machine_events" not in settled.details.to_wire()


def test_after_an_excused_try_the_case_is_settled_on_the_tries_that_follow():
    again, asked = tries(FAIL)  # a real failure behind the kill: the case fails, with no further try unless asked
    settled = settle(KILLED, again, 0)
    assert (settled.outcome, len(asked), settled.details.to_wire()["violations"]) == (Outcome.FAIL, 1, FAIL.details.to_wire()["violations"])
    assert settled.details.machine_events[0].text == "the worker was killed from outside (SIGKILL) on try 1; try 2 failed: not counted against the EP"
    again, asked = tries(ABORTED, PASS)  # the EP's own crash behind the kill, which does not come back: flaky, named by the tries that count
    settled = settle(KILLED, again, 0)
    assert settled.outcome is Outcome.FLAKY and len(asked) == 2
    assert settled.message.startswith("its 2 tries gave different outcomes: try 2 crash: the process running it was killed by SIGABRT; try 3 pass")
    assert [t.get("counted", True) for t in settled.details.to_wire()["tries"]] == [False, True, True]


def test_a_rerun_lost_to_the_machine_is_made_again_and_not_counted():
    again, asked = tries(KILLED, FAIL)
    settled = settle(FAIL, again, 1)
    assert settled.outcome is Outcome.FAIL and len(asked) == 2  # not flaky: the failure came back on the try that counted
    assert [t.get("counted", True) for t in settled.details.to_wire()["tries"]] == [True, False, True]
    assert settled.details.to_wire()["machine_events"][0]["try"] == 2


def test_an_event_named_on_an_outcome_that_is_no_loss_is_not_weighed():
    odd = CaseReply(Outcome.FAIL, "bytes differ", Details(machine=KILLED.details.machine))
    again, asked = tries()
    assert settle(odd, again, 0) is odd and asked == []


@pytest.mark.parametrize("text", ["-1", "11", "two", ""])
def test_a_rerun_count_that_is_not_one_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="expects a number of tries from 0 to 10"):
        reruns_option(text)


def result(outcome: Outcome, contract: str = "copy.roundtrip-exact", severity: str = "required") -> Result:
    return Result(contract, "RefDevExecutionProvider", "refdev", {}, outcome, "", "copy.yaml:1", severity, "ep")


def test_a_flaky_required_case_makes_the_run_non_conformant_named_as_flaky():
    decided, reasons = verdict([result(Outcome.PASS, "copy.required-directions"), result(Outcome.FLAKY)])
    assert decided is Verdict.NON_CONFORMANT
    assert reasons == ["required contract flaky (its tries gave different outcomes): copy.roundtrip-exact"]
    assert verdict([result(Outcome.PASS), result(Outcome.FLAKY, "other", "recommended")])[0] is Verdict.CONFORMANT


def test_a_waiver_never_covers_a_flaky_case(tmp_path):
    from conformance.catalogue.contracts import Waiver
    from conformance.rules import waivers

    waiver = Waiver(contract="copy.roundtrip-exact", reason="a known defect", url="https://example.invalid/1")
    spec = type("Spec", (), {"waivers": (waiver,)})()
    from conformance.facts import EpFacts, OnnxruntimeFacts

    facts = EpFacts("acme", "AcmeExecutionProvider", "acme", onnxruntime=OnnxruntimeFacts("1.32.0"))
    flaky = result(Outcome.FLAKY)
    assert waivers.matching(flaky, spec, facts) is waiver
    kept = waivers.apply(flaky, spec, facts)
    assert kept.outcome is Outcome.FLAKY and kept.details.to_wire()["waiver"].startswith("not applied: a flaky case is never waived")
    assert waivers.apply(result(Outcome.FAIL), spec, facts).outcome is Outcome.WAIVED


# --- refdev's intermittent modes -------------------------------------------------------------------


def test_refdevs_intermittent_mode_gives_flaky_cases_and_no_certification(refdev_library, tmp_path):
    run = conformance_run(tmp_path, "--ep-library", str(refdev_library), "--ep", "refdev", "-k", "copy.roundtrip-exact",
                          "--conformance-rerun=2", "--conformance-strict", env={"ORT_REFDEV_FAULT": "intermittent"})
    report = run.report
    assert report_problems(report) == []
    flaky = [r for r in report["results"] if r["outcome"] == "flaky"]
    assert flaky and report["summary"]["flaky"] == len(flaky)
    assert report["verdict"] == "non_conformant" and run.exit_code == 1
    assert "required contract flaky (its tries gave different outcomes): copy.roundtrip-exact" in report["verdict_reasons"]
    for case in flaky:
        outcomes = [t["outcome"] for t in case["details"]["tries"]]
        assert outcomes[0] == "fail" and outcomes[-1] == "pass" and all(t["message"] for t in case["details"]["tries"][:-1])
        assert case["message"].startswith(f"its {len(outcomes)} tries gave different outcomes: try 1 fail: ")
    # JUnit: each flaky case a failure, its outcome property flaky, every try in its text
    cases = {case.get("name"): case for case in ET.parse(run.reports / "junit.xml").getroot().iter("testcase")}
    first = cases[flaky[0]["nodeid"].split("::")[-1]]
    assert {p.get("name"): p.get("value") for p in first.iter("property")}["outcome"] == "flaky"
    failure = first.find("failure")
    assert failure is not None and failure.get("message").startswith("[flaky] its ")
    assert "try 1: fail: " in failure.text and "try 2: pass" in failure.text
    assert "flaky" in (run.reports / "summary.md").read_text() and "flaky" in (run.reports / "report.md").read_text()


def test_a_crash_that_does_not_come_back_is_flaky_and_quarantines_nothing(refdev_library, tmp_path):
    run = conformance_run(tmp_path, "--ep-library", str(refdev_library), "--ep", "refdev", "-k", "copy.roundtrip-exact",
                          env={"ORT_REFDEV_FAULT": "intermittent-abort", "ORT_REFDEV_INTERMITTENT_EVERY": "25"})
    results = run.report["results"]
    flaky = [r for r in results if r["outcome"] == "flaky"]
    assert flaky and all(r["details"]["tries"][0]["outcome"] == "crash" and r["details"]["tries"][1]["outcome"] == "pass" for r in flaky)
    assert not [r for r in results if r["outcome"] in ("crash", "not_run")]  # nothing quarantined
    assert run.report["verdict"] == "non_conformant"
