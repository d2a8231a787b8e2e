"""The concurrency family (specs/contracts/concurrency.yaml): each check passes on the CPU EP and
on the fault-free reference EP, and fails with a stand-in that breaks it, its failure carrying a
reproducer that passes on the good build.

No test here waits on timing: where a check needs calls of two threads in flight at once, a
stand-in (`Meeting`) holds the first such call of two of its threads at a barrier inside the call,
so that both are in flight together, and, to break the check, harms the later one's result right
there. The same stand-ins are used in this process (CPU EP) and, by their source, in the process
that loads the reference EP.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from conformance.engine.runner import Runner
from conformance.testbed.spans import Overlap, Span, overlap

MET = ("at-once-0", "at-once-1")  # the threads that meet: two of those conformance.testbed.spans.at_once starts


class Meeting:
    """The first call of thread at-once-0 and of at-once-1 (in each batch of threads started
    together) wait for each other inside the call: both are in flight at once. `harmed()` says,
    after the meeting, whether this thread is the one whose call is to be harmed (at-once-1)."""

    def __init__(self):
        self.barrier = threading.Barrier(2, timeout=30)
        self.local = threading.local()

    def meet(self) -> bool:
        """Whether this call met (its thread's first call, on a thread that meets)."""
        if threading.current_thread().name not in MET or getattr(self.local, "met", False):
            return False
        self.local.met = True
        self.barrier.wait()
        return True

    @staticmethod
    def harmed() -> bool:
        return threading.current_thread().name == MET[1]


def meeting_copies(patch, ctx, harm: str = "") -> None:
    """CopyTensors calls of two threads meet on their first copy into host memory; harm
    'corrupt': the harmed one's destination gets 16 bytes of 0xEE after the real copy;
    'crosstalk': its one destination of 256 KiB gets thread 0's bytes of round 0 instead."""
    import ctypes

    import numpy as np

    from conformance.testbed.interop import capi, rig, threaded_copies

    api = rig.c_device(ctx)[0]
    real, meeting = threaded_copies.native_copy, Meeting()

    def copy(function, env, sources, destinations, count):
        to_host = capi.memory_of(api, destinations[0])["device_type"] == "cpu"
        met = to_host and meeting.meet()
        status = real(function, env, sources, destinations, count)
        if met and harm == "corrupt" and meeting.harmed():
            ctypes.memset(capi.data_address(api, destinations[0]), 0xEE, 16)
        if met and harm == "crosstalk" and meeting.harmed() and count == 1:
            theirs = np.random.default_rng(threaded_copies.FIRST_SEED).integers(0, 256, 256 * 1024, dtype=np.uint8)
            theirs ^= np.uint8(threaded_copies.round_key(0))
            ctypes.memmove(capi.data_address(api, destinations[0]), theirs.ctypes.data, theirs.nbytes)
        return status

    patch(threaded_copies, "native_copy", copy)


class MeetingSession:
    """A real session whose run meets (see Meeting) on its thread's first run; harm 'corrupt':
    the harmed thread's output + 1, 'raise': its run raises, 'elsewhere': every run raises on a
    thread other than the main one."""

    def __init__(self, session, meeting, harm: str):
        self._session, self._meeting, self._harm = session, meeting, harm

    def __getattr__(self, name):
        return getattr(self._session, name)

    def run(self, outputs, feeds):
        if self._harm == "elsewhere" and threading.current_thread() is not threading.main_thread():
            raise RuntimeError("this EP runs only on the thread that loaded it")
        met = self._meeting.meet()
        result = self._session.run(outputs, feeds)
        if met and self._meeting.harmed() and self._harm == "raise":
            raise RuntimeError("the EP's kernel lost its scratch buffer to another thread")
        if met and self._meeting.harmed() and self._harm == "corrupt":
            result = [r + 1 for r in result]
        return result


def meeting_sessions(patch, ctx, harm: str = "") -> None:
    """Sessions made with more than one intra-op thread (the family's own) meet on their first
    creation and first run; harm 'refuse-creation': the harmed thread's creation fails; others:
    see MeetingSession. Harm 'elsewhere' applies to every session."""
    real, meeting = ctx.create_session, Meeting()

    def create_session(model, device=None, *, intra_op_threads=1):
        met = intra_op_threads > 1 and meeting.meet()
        session = real(model, device, intra_op_threads=intra_op_threads)
        if met and harm == "refuse-creation" and meeting.harmed():
            raise RuntimeError("the EP's allocator was being set up by another session")
        return MeetingSession(session, meeting, harm) if intra_op_threads > 1 or harm == "elsewhere" else session

    patch(ctx, "create_session", create_session)


STAND_INS = "\n\n".join(textwrap.dedent(inspect.getsource(part)) for part in (Meeting, meeting_copies, MeetingSession, meeting_sessions))


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    return Runner("cpu", models_dir=str(tmp_path_factory.mktemp("models")))


@pytest.fixture
def ctx(runner, monkeypatch):
    context = runner.context(0)
    monkeypatch.setattr(context.sessions, "_sessions", {})  # sessions made by the stand-in are not kept for the next test
    return context


def run(runner, contract: str) -> dict:
    return runner.run(contract, 0, {})


def reproduce(script: str, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "repro.py"
    path.write_text(script)
    return subprocess.run([sys.executable, "-I", str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)


# --- the overlap measure ------------------------------------------------------------------------

def test_overlap_counts_calls_that_share_time_with_a_call_of_another_thread():
    spans = [Span(0, 0, 10), Span(1, 5, 15), Span(0, 10, 20), Span(2, 30, 40), Span(2, 35, 45), Span(1, 40, 50)]
    # 0-10 meets 5-15 (thread 1), which meets 10-20; 30-40 and 35-45 are one thread's; 40-50 only touches 30-40
    assert overlap(spans) == Overlap(calls=6, overlapping=5, most_at_once=2)
    assert overlap([]) == Overlap(0, 0, 0)


# --- on the CPU EP ---------------------------------------------------------------------------------

def test_copies_do_not_apply_where_copytensors_does_not_move_cpu_memory(runner):
    """The CPU EP advertises no DEFAULT memory, and onnxruntime 1.32 refuses CopyTensors between
    CPU values: no copy to run at once, said with the refusal."""
    result = run(runner, "concurrency.copies")
    assert result["outcome"] == "not_applicable", result
    assert "plain CPU memory" in result["message"] and "cpu>default: refused" in result["message"]


@pytest.mark.parametrize("contract", ["concurrency.sessions", "concurrency.shared-session"])
def test_sessions_run_at_once_pass_on_the_cpu_ep_with_their_figures(runner, ctx, monkeypatch, contract):
    meeting_sessions(monkeypatch.setattr, ctx)  # two threads' calls in flight together, certainly
    result = run(runner, contract)
    assert result["outcome"] == "pass", result
    evidence = result["details"]["evidence"]
    assert evidence["overlapping_runs"] >= 2 and evidence["runs"]["threads"] == 4 and evidence["runs"]["runs_per_thread"] == [60]
    assert evidence["nodes_on_ep"] == ["Add"] and evidence["bytes_compared"] == 4 * 60 * 256 * 512 * 4
    if contract == "concurrency.sessions":
        assert evidence["sessions"]["intra_op_threads"] == 2 and evidence["sessions"]["creations"]["overlapping"] >= 2
    else:
        assert evidence["session"] == {"intra_op_threads": 2, "shape": [256, 512]}


@pytest.mark.parametrize("contract, harm, expected", [
    ("concurrency.sessions", "corrupt", "a run gave wrong outputs while other threads ran: thread 1, run 0: 131072 of 131072 values differ"),
    ("concurrency.sessions", "raise", "a run failed on thread 1 while other threads ran: run 0: RuntimeError: the EP's kernel lost"),
    ("concurrency.sessions", "refuse-creation", "creating the session on thread 1 failed: RuntimeError: the EP's allocator"),
    ("concurrency.shared-session", "corrupt", "a run gave wrong outputs while other threads ran: thread 1, run 0"),
])
def test_a_session_broken_while_another_thread_runs_fails_with_a_reproducer(runner, ctx, monkeypatch, tmp_path, contract, harm, expected):
    meeting_sessions(monkeypatch.setattr, ctx, harm)
    result = run(runner, contract)
    assert result["outcome"] == "fail" and expected in result["message"], result
    reproducer = result["details"]["violations"][0]["reproducer"]
    assert "at_once(" in reproducer and "so.intra_op_num_threads, so.inter_op_num_threads = 2, 1" in reproducer
    completed = reproduce(reproducer, tmp_path)  # the real EP is right: the script passes on it
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "every run gave numpy's result for its own inputs" in completed.stdout


def test_runs_that_never_overlapped_prove_nothing(runner, ctx, monkeypatch):
    from conformance.checks import concurrency_sessions

    monkeypatch.setattr(concurrency_sessions, "overlap", lambda spans: Overlap(len(spans), 0, 1))
    result = run(runner, "concurrency.shared-session")
    assert result["outcome"] == "not_run", result
    # every round was tried before saying so: RUNS per thread in each of OVERLAP_ROUNDS rounds
    calls = 240 * concurrency_sessions.OVERLAP_ROUNDS
    assert f"no two calls of different threads overlapped in time ({calls} calls" in result["message"], result["message"]


def test_a_soak_doubles_the_threads_and_runs_on_to_its_deadline(tmp_path, monkeypatch):
    soaking = Runner("cpu", models_dir=str(tmp_path), soak=0.3)
    meeting_sessions(monkeypatch.setattr, soaking.context(0))
    result = soaking.run("concurrency.shared-session", 0, {})
    assert result["outcome"] == "pass", result
    runs = result["details"]["evidence"]["runs"]
    assert runs["threads"] == soaking.load.threads() == 2 * Runner("cpu", models_dir=str(tmp_path)).load.threads()
    assert min(runs["runs_per_thread"]) >= 60 and runs["seconds"] >= 0.3


def test_any_thread_passes_on_the_cpu_ep_and_skips_what_fails_on_the_main_thread_too(runner):
    result = run(runner, "concurrency.any-thread")
    assert result["outcome"] == "pass", result
    evidence = result["details"]["evidence"]
    assert evidence["calls_from_another_thread"] == {"update_inplace(numpy) into default memory": "worked",
                                                     "update_inplace(OrtValue) cpu>default": "worked",
                                                     "update_inplace(OrtValue) default>default": "worked", "session run": "worked"}
    # onnxruntime 1.32 moves no bytes between CPU values through copy_tensors, on any thread
    assert set(evidence["skipped"]) == {"copy_tensors cpu>default", "copy_tensors default>cpu", "copy_tensors default>default"}
    assert evidence["threads"]["registered_and_created_on"] != evidence["threads"]["called_from"]


def test_calls_that_go_wrong_only_on_another_thread_fail_any_thread(runner, ctx, monkeypatch, tmp_path):
    real = ctx.read

    def read(value, kind, dtype, shape):
        got = np.array(real(value, kind, dtype, shape), copy=True)
        if threading.current_thread() is not threading.main_thread():
            got[0] ^= 0xFF
        return got

    monkeypatch.setattr(ctx, "read", read)
    result = run(runner, "concurrency.any-thread")
    assert result["outcome"] == "fail", result
    assert result["message"].startswith("update_inplace(numpy) into default memory on a thread other than the one that registered the EP library "
                                        "delivered wrong bytes (right on that thread)")
    assert result["details"]["evidence"]["calls_from_another_thread"]["session run"] == "worked"
    completed = reproduce(result["details"]["violations"][0]["reproducer"], tmp_path)
    assert completed.returncode == 0 and "session run on another thread: the 60 bytes are right" in completed.stdout, completed.stderr[-2000:]


def test_a_run_that_fails_on_any_thread_but_the_main_one_fails_any_thread_and_stops_the_session_checks(runner, ctx, monkeypatch):
    meeting_sessions(monkeypatch.setattr, ctx, "elsewhere")
    result = run(runner, "concurrency.any-thread")
    assert result["outcome"] == "fail", result
    assert result["message"].startswith("session run failed on a thread other than the one that registered the EP library (it works on that "
                                        "thread): this EP runs only on the thread that loaded it")
    for contract in ("concurrency.sessions", "concurrency.shared-session"):
        stopped = run(runner, contract)
        assert stopped["outcome"] == "not_run", stopped
        assert "one run alone, on a thread other than the one that registered the library, already goes wrong (RuntimeError: this EP runs " \
               "only on the thread that loaded it)" in stopped["message"] and "concurrency.any-thread's" in stopped["message"]


# --- on the reference EP ------------------------------------------------------------------------

REFDEV = """
import json, threading
MET = {met!r}
from conformance import data
from conformance.engine.runner import Runner
from conformance.testbed.interop import capi, threaded_copies
{stand_ins}

runner = Runner("RefDevExecutionProvider", specs=[str(data.contracts_dir())], library={library!r}, models_dir={models!r})
ctx = runner.context(0)
def case(contract):
    result = runner.run(contract, 0, {{}})
    return {{key: result[key] for key in ("outcome", "message", "duration")}} | {{
        "evidence": result["details"].get("evidence"), "reproducer": (result["details"].get("violations") or [{{}}])[0].get("reproducer")}}
out = {{}}
real_copy, real_ends_copy = threaded_copies.native_copy, threaded_copies.Ends.copy
meeting_copies(setattr, ctx)
meeting_sessions(setattr, ctx)
for contract in ("concurrency.copies", "concurrency.sessions", "concurrency.shared-session", "concurrency.any-thread"):
    out[contract] = case(contract)
threaded_copies.native_copy = real_copy
meeting_copies(setattr, ctx, "corrupt")
out["corrupt"] = case("concurrency.copies")
threaded_copies.native_copy = real_copy
meeting_copies(setattr, ctx, "crosstalk")
out["crosstalk"] = case("concurrency.copies")
threaded_copies.native_copy = real_copy

def only_here(self, sources, destinations):
    if threading.current_thread() is not threading.main_thread():
        raise capi.OrtError("CopyTensors", 1, "RefDev: this thread did not load the library")
    return real_ends_copy(self, sources, destinations)
threaded_copies.Ends.copy = only_here
out["elsewhere"] = case("concurrency.copies")
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def refdev_cases(refdev_library, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("refdev")
    code = REFDEV.format(met=MET, stand_ins=STAND_INS, library=str(refdev_library), models=str(folder / "models"))
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=folder)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_every_check_passes_on_the_fault_free_reference_ep(refdev_cases):
    for contract in ("concurrency.copies", "concurrency.sessions", "concurrency.shared-session", "concurrency.any-thread"):
        assert refdev_cases[contract]["outcome"] == "pass", (contract, refdev_cases[contract])
    copies = refdev_cases["concurrency.copies"]["evidence"]
    assert copies["skipped_directions"] == {} and copies["threads"] == 4 and copies["overlapping_calls"] >= 4
    single, batched = copies["copies"]["one pair a call"], copies["copies"]["16 pairs a call"]
    assert single["calls_per_direction"] == {"cpu>default": 600, "default>default": 600, "default>cpu": 600} and single["rounds_per_thread"] == [150]
    assert batched["pairs_per_call"] == 16 and batched["calls"] == 4 * 40 * 3
    assert copies["bytes_compared"] == 4 * 150 * 256 * 1024 + 4 * 40 * 16 * 16 * 1024
    assert refdev_cases["concurrency.any-thread"]["evidence"]["skipped"] == {}
    assert len(refdev_cases["concurrency.any-thread"]["evidence"]["calls_from_another_thread"]) == 7
    assert refdev_cases["concurrency.sessions"]["evidence"]["nodes_on_ep"] == ["Add"]


def test_a_copy_corrupted_while_another_thread_copies_fails_with_a_reproducer(refdev_cases, tmp_path):
    corrupt = refdev_cases["corrupt"]
    assert corrupt["outcome"] == "fail", corrupt
    assert corrupt["message"].startswith("CopyTensors from 4 threads at once, one pair a call (cpu>default, default>default, default>cpu): a "
                                         "thread's copy did not deliver its own bytes while other threads copied: thread 1, round 0, pair 0 ("
                                         "cpu>default, default>default, default>cpu): 16 of 262144 bytes differ, first at 0")
    completed = reproduce(corrupt["reproducer"], tmp_path)  # the good build passes it
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "every copy delivered its own bytes" in completed.stdout and "on 4 threads" in completed.stdout


def test_a_copy_that_lands_another_threads_bytes_says_whose_they_are(refdev_cases):
    crosstalk = refdev_cases["crosstalk"]
    assert crosstalk["outcome"] == "fail", crosstalk
    assert "thread 1, round 0, pair 0 (cpu>default, default>default, default>cpu): " in crosstalk["message"]
    assert "; the wrong bytes hold thread 0's pattern" in crosstalk["message"]


def test_copies_that_fail_on_any_thread_but_the_main_one_are_any_threads_finding(refdev_cases):
    elsewhere = refdev_cases["elsewhere"]
    assert elsewhere["outcome"] == "not_run", elsewhere
    assert "one round on one thread alone, not the one that registered the library, already goes wrong (cpu>default failed: RefDev: " \
           "this thread did not load the library)" in elsewhere["message"] and "concurrency.any-thread's" in elsewhere["message"]
