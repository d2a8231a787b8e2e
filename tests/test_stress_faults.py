"""Each stress fault mode of the reference EP (refdev/README.md) makes its own stress contract
fail, and nothing of the functional tier: a whole run of the catalogue in that mode is
non_conformant for the stress contracts named here alone. The failing case's reproducer, run
standalone from another folder, fails on the faulty build and passes on the good one.

What may fail beside the contract that names the fault: the stress contracts whose calls go
through the broken path too (a session run copies its inputs with CopyTensors, so a racing or
leaking copy shows in the session contracts as well).

`nth`'s pool stays dry for the rest of the process: in a whole run, the stress contract whose
calls cross call 8,000 fails (which one depends on how many copies the checks before it made),
and every later one finds its first call refused (not_run, naming the exhaustion). Its own
contract, endurance.copies, is shown failing in a run of its own, where its 10,000 copies are
the first calls of the worker.

size32 bites past 4 GiB only: its case holds 8.5 GiB and runs alone (the kit's large-tensor lock).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import conformance_run

from conformance.checks import size_room

# Contracts outside the stress tier whose check runs threads of its own (two sessions run at once
# on their streams): a fault that bites threads at once may fail them too.
THREADED = {"ordering.concurrent-sessions"}
# A contract outside the tier that judges copies by their time: update_inplace(OrtValue) device to
# device against a round trip through the host. `race` sleeps 200 us twice in each 1 MiB window of
# every copy, so on a busy machine each copy's time is mostly how soon a sleeping thread gets a CPU
# again (a CI run under load read 16.2 ms for the one copy against 8.34 ms for the two).
TIMED = {"update-inplace.no-host-staging"}
# fault -> (the stress contracts it must fail, those contracts that may fail with them)
STRESS_FAULTS = {
    "leak": ({"endurance.copies"}, {"endurance.session-runs", "endurance.session-lifecycle"}),
    "race": ({"concurrency.copies"}, {"concurrency.sessions", "concurrency.shared-session", *THREADED, *TIMED}),
    "race-kernel": ({"concurrency.sessions", "concurrency.shared-session"}, {*THREADED}),
    "affinity": ({"concurrency.any-thread"}, {*THREADED}),
}


def run_script(script: str, **env: str) -> subprocess.CompletedProcess:
    """A reproducer run as a user runs it: its own interpreter, isolated, from another folder."""
    return subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=300, cwd="/",
                          env={**os.environ, "ORT_REFDEV_FAULT": "", **env})


def failed_stress(report: dict) -> dict[str, dict]:
    """The first failing case of each stress contract, by contract."""
    stress = {cid for cid, c in report["contracts"].items() if c.get("tier") == "stress"}
    failed: dict[str, dict] = {}
    for result in report["results"]:
        if result["contract"] in stress and result["outcome"] == "fail":
            failed.setdefault(result["contract"], result)
    return failed


@pytest.mark.parametrize("fault", sorted(STRESS_FAULTS))
def test_a_stress_fault_fails_its_own_contract_and_nothing_of_the_functional_tier(refdev_library, tmp_path, fault):
    must, may = STRESS_FAULTS[fault]
    run = conformance_run(tmp_path, "--ep-library", str(refdev_library), "--ep", "refdev", env={"ORT_REFDEV_FAULT": fault})
    report = run.report
    assert report["verdict"] == "non_conformant" and run.exit_code != 0, report["verdict_reasons"]
    failed = failed_stress(report)
    assert must <= set(failed), f"{fault}: expected {sorted(must)} among the failed stress contracts {sorted(failed)}"
    assert set(failed) <= must | may, f"{fault}: stress contracts failed beyond what it breaks: {sorted(set(failed) - must - may)}"
    stress = {cid for cid, c in report["contracts"].items() if c.get("tier") == "stress"}
    functional = {r["contract"] for r in report["results"] if r["outcome"] in ("fail", "crash", "timeout", "error", "flaky")
                  and r["subject"] == "ep" and r["contract"] not in stress | may}
    assert not functional, f"{fault} is harmless to one thread of small copies, yet the functional tier failed: {sorted(functional)}"
    # The reproducer of the contract that names the fault: it fails on the faulty build, passes on the good one.
    case = failed[sorted(must)[0]]
    script = case["details"]["violations"][0]["reproducer"]
    with_fault = run_script(script, ORT_REFDEV_FAULT=fault)
    assert with_fault.returncode != 0, f"{fault}: the reproducer passed on the faulty build\n{with_fault.stdout[-1500:]}{with_fault.stderr[-1500:]}"
    good = run_script(script)
    assert good.returncode == 0, f"{fault}: the reproducer failed on the good build\n{good.stdout[-1500:]}{good.stderr[-1500:]}"


def test_nth_runs_the_pool_dry_inside_the_stress_tier_and_endurance_copies_fails_at_its_call(refdev_library, tmp_path):
    (tmp_path / "whole").mkdir()
    (tmp_path / "alone").mkdir()
    whole = conformance_run(tmp_path / "whole", "--ep-library", str(refdev_library), "--ep", "refdev", env={"ORT_REFDEV_FAULT": "nth"})
    report = whole.report
    assert report["verdict"] == "non_conformant", report["verdict_reasons"]
    failed = failed_stress(report)
    assert any("handle pool exhausted" in r["message"] for r in failed.values()), {c: r["message"][:200] for c, r in failed.items()}
    stress = {cid for cid, c in report["contracts"].items() if c.get("tier") == "stress"}
    assert not {r["contract"] for r in report["results"] if r["outcome"] == "fail" and r["subject"] == "ep" and r["contract"] not in stress}
    alone = conformance_run(tmp_path / "alone", "--ep-library", str(refdev_library), "--ep", "refdev", "-k", "endurance.copies",
                            env={"ORT_REFDEV_FAULT": "nth"})
    cases = [r for r in alone.report["results"] if r["contract"] == "endurance.copies"]
    assert cases and cases[0]["outcome"] == "fail" and "copy" in cases[0]["message"], cases[0]["message"]
    script = cases[0]["details"]["violations"][0]["reproducer"]
    assert run_script(script, ORT_REFDEV_FAULT="nth").returncode != 0
    assert run_script(script).returncode == 0


def test_size32_fails_the_large_copy_past_4_gib_and_its_reproducer_fails_only_with_the_fault(refdev_library, tmp_path):
    """The one stress fault that needs the large case at its real size (about 8.5 GiB at once)."""
    run = conformance_run(tmp_path, "--ep-library", str(refdev_library), "--ep", "refdev", "-k", "size.large-copy",
                          env={"ORT_REFDEV_FAULT": "size32", "ORT_CONFORMANCE_MEMORY_LIMIT": None})
    (case,) = [r for r in run.report["results"] if r["contract"] == "size.large-copy"]
    if case["outcome"] == "not_applicable" and "needs" in case["message"]:
        pytest.skip(f"this machine has no room for the large case now: {case['message']}")
    assert case["outcome"] == "fail", case["message"]
    assert "modulo 2^32" in case["message"], case["message"]
    script = case["details"]["violations"][0]["reproducer"]
    # The reproducers hold the large tensors too: one at a time on this machine, as the kit's own cases.
    with open(Path(tempfile.gettempdir()) / size_room.LOCK_FILE, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with_fault = run_script(script, ORT_REFDEV_FAULT="size32")
        good = run_script(script)
    assert with_fault.returncode != 0, with_fault.stdout[-1500:] + with_fault.stderr[-1500:]
    assert good.returncode == 0, good.stdout[-1500:] + good.stderr[-1500:]


def test_a_pool_run_dry_before_the_endurance_tier_fails_endurance_copies_and_is_not_hidden_as_not_run(refdev_library, tmp_path):
    """ORT_REFDEV_NTH=40: the functional copies before endurance.copies drain the pool, so the
    copies that place its values fail in a direction that worked earlier in the same process:
    the EP stopped copying after repetition, endurance.copies' failure. (A CI run once saw the
    pool run dry in copy.bad-requests, before the tier, and every endurance case not_run: the
    verdict incomplete, with no failure named.)"""
    run = conformance_run(tmp_path, "--ep-library", str(refdev_library), "--ep", "refdev", "-k", "copy.roundtrip-exact or endurance.copies",
                          env={"ORT_REFDEV_FAULT": "nth", "ORT_REFDEV_NTH": "40"})
    cases = [r for r in run.report["results"] if r["contract"] == "endurance.copies"]
    assert cases and all(c["outcome"] == "fail" for c in cases), [(c["outcome"], c["message"][:300]) for c in cases]
    assert all("had worked earlier in this process" in c["message"] and "handle pool exhausted" in c["message"] for c in cases), cases[0]["message"]
    assert run.report["verdict"] == "non_conformant"
