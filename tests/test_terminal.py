"""What a run says where people look: pytest's FAILED and ERROR lines, --tb, a crash as an error of
the call, --durations, the verdict's reasons in the terminal summary, the line while a slow call
is waited for, and the warning for an --ep-option the EP does not report.

Most runs fake the checks' outcomes (a conftest replaces Scheduler.run_case, as test_plugin's
faked run does): what is tested is how pytest is told, not what the checks find. The slow call
is refdev's `hang` fault mode.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatch

import pytest

from conformance.options import unknown_options
from pytest_runs import BASE, TIMEOUT, by_name, kind, properties, pytest_in

FAKE = """\
import time

from conformance.outcomes import CaseReply, Details, Outcome
from conformance.run.scheduler import Scheduler

OUTCOMES = {
    "memory-info.session-inputs": (Outcome.FAIL, "bytes differ", {"violations": [
        {"message": "input 0 is in HOST_ACCESSIBLE memory", "expected": "CPU or DEFAULT", "actual": "HOST_ACCESSIBLE",
         "memory": {}, "reproducer": "print('repro')"}]}),
    "session.nodes-on-ep": (Outcome.CRASH, "the process running it was killed by SIGSEGV during copy_tensors cpu>default\\nlast output", {}),
    "iobinding.in-place": (Outcome.TIMEOUT, "did not finish within 1 s", {}),
}


def run_case(self, planned):
    outcome, message, wire = OUTCOMES.get(planned.request["contract"], (Outcome.PASS, "", {}))
    details = Details.from_wire(wire)
    if planned.request["contract"] == "memory-info.tensor-size":
        time.sleep(2)  # waited for: behind other requests, say; the check itself took 0.123 s
        return CaseReply(outcome, message, details, 0.123)
    return CaseReply(outcome, message, details)


Scheduler.run_case = run_case
"""

SELECTED = "(session-inputs or nodes-on-ep or in-place) and identity-float32 or tensor-size and int4-3x5"
FAILED = "memory-info.session-inputs[[]cpu-identity-float32[]]"
CRASHED = "session.nodes-on-ep[[]cpu-identity-float32[]]"
TIMED_OUT = "iobinding.in-place[[]cpu-identity-float32-7x13[]]"


def faked(tmp_path_factory, *args: str, name: str = "faked"):
    folder = tmp_path_factory.mktemp(name)
    (folder / "conftest.py").write_text(FAKE)
    return pytest_in(folder, "--ep=cpu", "--conformance-isolation=none", "-k", SELECTED, *args)


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    """The faked run with the default --tb, every short-summary line (-rA), JUnit, every duration,
    and -vv: pytest then prints each summary line whole, not cut at the terminal's width."""
    return faked(tmp_path_factory, "-rA", "--junitxml=junit.xml", "--durations=0", "-vv")


def test_failed_and_error_lines_end_with_the_cases_one_line(long_run):
    out = long_run.stdout
    lines = out.splitlines()
    for pattern in (f"FAILED *{FAILED} - input 0 is in HOST_ACCESSIBLE memory",
                    f"ERROR *{CRASHED} - [[]crash[]] the process running it was killed by SIGSEGV during copy_tensors cpu>default",
                    f"ERROR *{TIMED_OUT} - [[]timeout[]] did not finish within 1 s"):
        assert any(fnmatch(line, pattern) for line in lines), (pattern, out[-3000:])


def test_a_crash_or_timeout_is_an_error_of_the_call_not_of_setup(long_run):
    out = long_run.stdout
    assert "ERROR at setup of" not in out
    assert re.search(r"ERROR at call of session\.nodes-on-ep", out), out[-3000:]
    assert re.search(r"ERROR at call of iobinding\.in-place", out)
    assert re.search(r"1 failed, 1 passed, 1 skipped, \d+ deselected, 2 errors", out), out[-500:]
    assert long_run.returncode == pytest.ExitCode.TESTS_FAILED
    cases = by_name(long_run.junit())
    crashed = next(case for name, case in cases.items() if name.startswith("session.nodes-on-ep[cpu-identity-float32]"))
    assert kind(crashed) == "error" and properties(crashed)["outcome"] == "crash"
    assert crashed.find("error").get("message").startswith("[crash] the process running it was killed by SIGSEGV")
    failed = next(case for name, case in cases.items() if name.startswith("memory-info.session-inputs[cpu-identity-float32]"))
    assert kind(failed) == "failure" and failed.find("failure").get("message") == "input 0 is in HOST_ACCESSIBLE memory"
    outcomes = {r["nodeid"].rpartition("::")[2]: r["outcome"] for r in long_run.report["results"]}  # report.json's outcomes, as before
    assert outcomes["session.nodes-on-ep[cpu-identity-float32]"] == "crash"
    assert outcomes["iobinding.in-place[cpu-identity-float32-7x13]"] == "timeout"


def test_a_crashs_description_names_what_happened_and_the_processs_last_output(long_run):
    out = long_run.stdout
    assert "session.nodes-on-ep [required, subject: ep] crashed on CPUExecutionProvider (cpu)" in out
    assert "crash: the process running it was killed by SIGSEGV during copy_tensors cpu>default\n  output:\n    last output" in out


def test_durations_show_the_checks_own_time_not_the_wait_for_it(long_run):
    out = long_run.stdout
    call = re.search(r"^([0-9.]+)s call +\S*memory-info\.tensor-size\[cpu-int4-3x5\]", out, re.M)
    assert call, out[-3000:]
    assert float(call.group(1)) == pytest.approx(0.12, abs=0.01)  # the worker's 0.123 s, as it reported it, not the 2 s waited
    # Nor is the wait in a setup: one that held it would take at least the 2 s slept (a bound that
    # load cannot break; a setup without it takes milliseconds).
    setups = [float(m.group(1)) for m in re.finditer(r"^([0-9.]+)s setup ", out, re.M)]
    assert setups and all(seconds < 2 for seconds in setups), setups


def test_the_terminal_summary_lists_the_verdicts_reasons_with_case_counts(long_run):
    out = long_run.stdout
    section = out[out.index("== conformance =="):]
    assert "verdict: non_conformant" in section
    # The timeout quarantines the call: the other in-place case is not run, one of two broke.
    for contract, cases in (("iobinding.in-place", "1 of 2 cases"), ("memory-info.session-inputs", "1 of 1 case"), ("session.nodes-on-ep", "1 of 1 case")):
        assert f"\n  required contract broken: {contract} ({cases})\n" in section, section
    # The EP's own counts, then onnxruntime's apart (tensor-size is a runtime-subject contract).
    assert "\nCPUExecutionProvider: 1 timeout, 1 not_run, 1 fail, 1 crash\n" in section
    assert "\nonnxruntime's own contracts (subject runtime; they do not decide the verdict; pytest counts their failures xfailed): 1 pass\n" in section
    report = json.loads((long_run.path / "reports" / "report.json").read_text())
    assert len(report["verdict_reasons"]) == 3


def test_a_normal_run_prints_no_waiting_line(long_run):
    assert "waiting on" not in long_run.stdout


@pytest.mark.parametrize("style", ["auto", "short", "line", "no", "long"])
def test_tb_picks_how_much_of_a_failure_is_shown(tmp_path_factory, style):
    run = faked(tmp_path_factory, f"--tb={style}", name=f"tb_{style}")
    out = run.stdout
    full, brief = "reproduce with:", "  violation: input 0 is in HOST_ACCESSIBLE memory"
    line = re.compile(r"^\S*memory-info\.yaml:\d+: input 0 is in HOST_ACCESSIBLE memory$", re.M)
    if style == "long":
        assert full in out and "statement:" in out
    elif style == "auto":  # pytest's default: a few lines, the case's parameters in its headline
        assert brief in out and "    expected: CPU or DEFAULT\n    actual:   HOST_ACCESSIBLE\n" in out and full not in out and "statement:" not in out
        assert re.search(r"^_+ memory-info\.session-inputs\[cpu-identity-float32\] \[required\] _+$", out, re.M), out[-3000:]
        assert "  reproduce: --tb=long shows how (it is no standalone script)" in out
    elif style == "short":
        assert brief in out and full not in out and "statement:" not in out
        assert "session.nodes-on-ep [required, subject: ep] crashed on" in out
    elif style == "line":
        assert len(line.findall(out)) == 1 and full not in out and brief not in out, out[-3000:]  # once, not twice
        assert re.search(r"^\S*session\.yaml:\d+: \[crash\] the process running it", out, re.M)
    else:
        assert "== FAILURES ==" not in out and "== ERRORS ==" not in out and full not in out and not line.search(out)


def test_xdist_runs_read_the_same_lines_and_reasons(tmp_path_factory):
    run = faked(tmp_path_factory, "-n", "2", "-rA", "-vv", "--junitxml=junit.xml", name="faked_xdist")
    out = run.stdout
    assert re.search(rf"ERROR \S*{re.escape(CRASHED.replace('[[]', '[').replace('[]]', ']'))} - \[crash\] the process", out), out[-3000:]
    assert re.search(r"FAILED \S*memory-info\.session-inputs\[cpu-identity-float32\] - input 0", out)
    assert "ERROR at call of session.nodes-on-ep" in out and "ERROR at setup of" not in out
    assert "  required contract broken: memory-info.session-inputs (1 of 1 case)" in out
    crashed = next(case for name, case in by_name(run.junit()).items() if name.startswith("session.nodes-on-ep[cpu-identity-float32]"))
    assert kind(crashed) == "error"


def test_a_hanging_call_is_shown_waited_for_before_its_timeout(refdev_library, pytester, monkeypatch):
    monkeypatch.setenv("ORT_REFDEV_FAULT", "hang")
    result = pytester.runpytest_subprocess(*BASE, "--ep-library", str(refdev_library), "--ep", "refdev", "-k", "copy.roundtrip-exact and float32-scalar",
                                           "--conformance-timeout", "9", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # 3 s into the wait, and 8 s: the seconds as they are when the line is written. Bounds that
    # load cannot break: no line before its second, none past the 9 s timeout, the second line
    # after the first (a loaded machine wakes late, so the first may say 4 or 5).
    waits = re.findall(r"^waiting on (.*): (\d) s of 9$", result.stdout.str(), re.M)
    # Twice: the hang, then its one try again in a fresh worker (conformance.run.reruns), which hangs too.
    seconds = [int(seconds) for _, seconds in waits]
    assert len(seconds) == 4, result.stdout.str()[-3000:]
    for first, second in (seconds[:2], seconds[2:]):
        assert 3 <= first < second and 8 <= second <= 9, result.stdout.str()[-3000:]
    assert waits[-1][0] == "copy_tensors cpu>default in copy.roundtrip-exact on refdev"
    result.stdout.fnmatch_lines(["*ERROR at call of copy.roundtrip-exact*"])


def test_an_unknown_ep_option_is_warned_of_saying_the_ep_reports_no_options(pytester):
    result = pytester.runpytest_subprocess(*BASE, "--ep=cpu", "-k", "tensor-size and int4-3x5", "--ep-option", "no_such_key=1",
                                           "--ep-option", "session.intra_op_num_threads=1", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*PytestConfigWarning: --ep-option no_such_key: CPUExecutionProvider reports no options at all*cannot be checked*"])
    assert "session.intra_op_num_threads" not in result.stdout.str()  # a session config entry, not the EP's


def test_an_unknown_ep_option_warning_names_the_keys_the_ep_reports():
    devices = [{"device_id": "0", "arena": "1"}, {"device_id": "1"}]
    assert unknown_options({"device_id": "1", "session.x": "1"}, "MyEp", devices) == []
    assert unknown_options({"devcie_id": "1"}, "MyEp", devices) == [
        "--ep-option devcie_id: MyEp reports no option 'devcie_id'; the options it reports are: arena, device_id"]
