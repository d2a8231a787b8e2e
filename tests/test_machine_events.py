"""A worker killed or stopped from outside mid-check (the OOM killer, a CI runner) is the machine's
event, not the EP's failure: the case is tried again in a fresh worker, and where that try does
not repeat the event, its outcome is the case's, with the event and its evidence in the reports
(conformance/run/reruns.py). One that the next try repeats stays the EP's crash.

refdev's hold (ORT_REFDEV_HOLD_FILE, refdev/README.md) holds the first copy of the first N
processes until the test acts, and writes each one's pid: which try is held, and which process
the test signals, are decided by that file, not by when the test looks. None of these runs asks
for --conformance-rerun: a crash or a hang is tried once more without it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conformance.report.schema import report_problems
from processes import alive

CASES = "copy.roundtrip-exact and float32"  # five cases; the first that copies is held
KILLED = "the worker was killed from outside (SIGKILL) on try 1; try 2 passed: not counted against the EP"


def held_run(library: Path, folder: Path, holds: int, *extra: str) -> subprocess.Popen:
    """pytest on refdev in a process of its own, its first `holds` workers to copy held there."""
    env = dict(os.environ, ORT_REFDEV_HOLD_FILE=str(folder / "hold"), ORT_REFDEV_HOLD_COUNT=str(holds))
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ep-library", str(library), "--ep", "refdev",
                             "-k", CASES, "--conformance-report", str(folder / "reports"), *extra],
                            cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def held(run: subprocess.Popen, folder: Path, number: int) -> int:
    """The pid of the `number`th worker held in its copy, once it is there."""
    hold, deadline = folder / "hold", time.monotonic() + 180
    while True:
        lines = [line for line in (hold.read_text().splitlines(keepends=True) if hold.exists() else []) if line.endswith("\n")]
        if len(lines) >= number:
            return int(lines[number - 1])
        assert run.poll() is None, f"the run ended before worker {number} was held: {run.communicate()[0][-3000:]}"
        assert time.monotonic() < deadline, f"no worker {number} held in three minutes"
        time.sleep(0.01)


def finished(run: subprocess.Popen, folder: Path) -> tuple[dict, str]:
    output = run.communicate(timeout=300)[0]
    report = folder / "reports" / "report.json"
    assert report.exists(), output[-3000:]
    return json.loads(report.read_text(encoding="utf-8")), output


def test_a_worker_killed_from_outside_once_mid_check_is_the_machines_event_and_the_case_passes(refdev_library, tmp_path):
    run = held_run(refdev_library, tmp_path, 1)
    pid = held(run, tmp_path, 1)
    os.kill(pid, signal.SIGKILL)  # as the OOM killer would, while the check is in its copy
    report, output = finished(run, tmp_path)
    assert report_problems(report) == []
    (case,) = [r for r in report["results"] if r["details"].get("machine_events")]
    assert case["outcome"] == "pass" and case["message"] == "" and case["details"]["evidence"]  # what try 2 proved
    first, second = case["details"]["tries"]
    assert first["outcome"] == "crash" and first["counted"] is False and "killed by SIGKILL during copy_tensors cpu>default" in first["message"]
    assert second == {"outcome": "pass", "message": ""}
    (event,) = case["details"]["machine_events"]
    evidence = f"process {pid}'s wait status: killed by SIGKILL, a signal the kit had not sent it"
    assert event == {"try": 1, "kind": "killed", "text": KILLED, "evidence": evidence}
    # Not counted against the EP: every case passes, nothing is quarantined, nothing is lost, the run is conformant.
    assert {r["outcome"] for r in report["results"]} == {"pass"} and len(report["results"]) == 5
    assert report["run"]["lost"] == [] and report["verdict"] == "conformant" and run.returncode == 0
    assert report["run"]["machine_events"] == [dict(event, nodeid=case["nodeid"], outcome="pass")]
    said = f"`{case['nodeid'].rpartition('::')[2]}`: {KILLED}"
    assert said in output  # the terminal's summary
    reports = tmp_path / "reports"
    assert said in (reports / "report.md").read_text() and said in (reports / "summary.md").read_text()
    assert KILLED in (reports / "report.html").read_text() and '<h2 id="machine">' in (reports / "report.html").read_text()


def test_a_kill_that_the_next_try_repeats_is_the_eps_crash(refdev_library, tmp_path):
    run = held_run(refdev_library, tmp_path, 2)  # the lost case's next try, in a fresh worker, is held too
    first = held(run, tmp_path, 1)
    os.kill(first, signal.SIGKILL)
    second = held(run, tmp_path, 2)
    assert second != first
    os.kill(second, signal.SIGKILL)
    report, _ = finished(run, tmp_path)
    assert report_problems(report) == []
    (case,) = [r for r in report["results"] if r["outcome"] == "crash"]
    assert [(t["outcome"], t.get("counted", True)) for t in case["details"]["tries"]] == [("crash", True), ("crash", True)]
    assert "machine_events" not in case["details"] and report["run"]["machine_events"] == []
    # As any crash that comes back: its call is quarantined, and the checks that reach it later stop there.
    assert case["details"]["call"] == {"kind": "copy_tensors", "direction": "cpu>default", "note": case["details"]["call"]["note"]}
    assert any(r["outcome"] == "not_run" and "copy_tensors" in r["message"] for r in report["results"])
    assert report["verdict"] == "non_conformant" and [lost["nodeid"] for lost in report["run"]["lost"]] == [case["nodeid"]]


def test_a_worker_stopped_past_its_timeout_is_the_machines_event_and_the_case_passes(refdev_library, tmp_path):
    """A worker stopped from outside (SIGSTOP) makes no progress whatever its EP would do: when its
    time runs out the kit finds it stopped, kills it (a stop may never be continued) and tries the
    case again. The stop lands milliseconds after the hold; the timeout only bounds how long the
    kit waits for a stopped worker before it looks."""
    run = held_run(refdev_library, tmp_path, 1, "--conformance-timeout", "20")
    pid = held(run, tmp_path, 1)
    os.kill(pid, signal.SIGSTOP)
    report, output = finished(run, tmp_path)
    assert not alive(pid)  # killed by the kit: nothing is left to continue
    assert report_problems(report) == []
    (case,) = [r for r in report["results"] if r["details"].get("machine_events")]
    assert case["outcome"] == "pass" and [t["outcome"] for t in case["details"]["tries"]] == ["timeout", "pass"]
    assert "the worker was stopped (/proc/" in case["details"]["tries"][0]["message"]
    (event,) = case["details"]["machine_events"]
    assert event["kind"] == "stopped" and event["evidence"] == f"/proc/{pid}/stat: state T (stopped by a signal) when its 20 s ran out"
    text = "the worker was stopped from outside until its time ran out on try 1; try 2 passed: not counted against the EP"
    assert event["text"] == text and text in output
    assert {r["outcome"] for r in report["results"]} == {"pass"} and report["verdict"] == "conformant" and run.returncode == 0
