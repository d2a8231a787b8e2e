"""The worker process: checks run in it; a crash or a hang costs one result, not the run."""

from __future__ import annotations

import fcntl
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.engine import serve as worker_process
from conformance.data import read_recipes
from conformance.run.attribution import details_of, message_of, outcome_of
from conformance.calls import Call
from conformance.isolation.controller import Worker, WorkerLost, WorkerRefused, handover
from conformance.isolation.launcher import Launcher, process_state, signal_name
from conformance.outcomes import Details, MachineEvent
from conformance.catalogue.spec import load_catalogue


@pytest.fixture
def worker(cpu_init):
    w = Worker(cpu_init, timeout=60)
    yield w
    w.close()


def fake_worker(code: str, **popen) -> Worker:
    """A Worker whose process is a stand-in child running `code`."""
    w = Worker({"ep": "fake"}, timeout=5)
    w.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, **popen)
    return w


def test_real_worker_starts_and_runs_a_check_on_the_cpu_ep(worker, session_inputs):
    facts = worker.start()
    assert facts.provider == "CPUExecutionProvider"
    assert facts.devices[0].label == "cpu"
    result = worker.request(session_inputs)["result"]
    assert result["outcome"] == "pass", result
    assert result["message"] == "" and result["duration"] > 0


def test_request_starts_the_worker_when_needed_and_probes(worker):
    capabilities = worker.request({"op": "probe", "device": 0})["capabilities"]
    assert capabilities["ep"] == "CPUExecutionProvider" and capabilities["pairs"]
    assert worker.restarts == 0


def test_a_dead_worker_is_replaced_on_the_next_request(worker, session_inputs):
    worker.start()
    first = worker.process.pid
    worker.process.send_signal(signal.SIGKILL)
    worker.process.wait()
    assert worker.request(session_inputs)["result"]["outcome"] == "pass"
    assert worker.restarts == 1 and worker.process.pid != first


def test_a_loss_quotes_only_what_the_lost_process_wrote_to_its_log(tmp_path, cpu_init, session_inputs):
    log = tmp_path / "worker-cpu.log"
    log.write_text("Assertion failed: the abort of an earlier run\n")  # the log is kept across runs
    w = Worker(cpu_init, timeout=60, log=log)
    try:
        w.start()
        w.process.kill()  # ends without a word
        with pytest.raises(WorkerLost, match="killed by SIGKILL") as lost:
            w._exchange(session_inputs, 10, "the check")
        assert "earlier run" not in str(lost.value)
    finally:
        w.close()


def test_an_unknown_request_is_refused_not_lost(worker):
    worker.start()
    with pytest.raises(WorkerRefused, match="unknown request 'bogus'"):
        worker.request({"op": "bogus"})
    assert worker.process.poll() is None  # still serving


def test_an_unknown_ep_is_refused_with_the_kit_message(cpu_init):
    w = Worker(dict(cpu_init, ep="nosuch"), timeout=60)
    try:
        with pytest.raises(WorkerRefused, match="unknown EP 'nosuch'"):
            w.start()
    finally:
        w.close()


def test_close_ends_the_worker(worker):
    worker.start()
    process = worker.process
    worker.close()
    assert worker.process is None
    assert process.poll() == 0


def test_a_worker_killed_by_a_signal_is_a_crash_naming_the_signal():
    w = fake_worker("import os; os.abort()")
    with pytest.raises(WorkerLost) as lost:
        w._exchange({"op": "run"}, 10, "copy.x on cpu")
    assert lost.value.outcome == "crash"
    assert "SIGABRT" in str(lost.value)
    assert str(lost.value).startswith("the process running copy.x on cpu was killed by SIGABRT")
    assert w.process is None


def test_a_worker_that_exits_is_a_crash_with_its_status():
    w = fake_worker("import sys; sys.stdin.readline(); sys.exit(3)")
    with pytest.raises(WorkerLost, match="^the process running the check exited with status 3") as lost:
        w._exchange({"op": "run"}, 10, "the check")
    assert lost.value.outcome == "crash"


def test_a_crash_message_carries_the_tail_of_the_worker_log(tmp_path):
    log = tmp_path / "worker.log"
    with open(log, "wb") as stderr:
        w = fake_worker("import os, sys; sys.stderr.write('first\\n\\x1b[1;31mEP: device lost\\x1b[m\\n'); sys.stderr.flush(); os.abort()", stderr=stderr)
    w.log = log
    with pytest.raises(WorkerLost) as lost:
        w._exchange({"op": "run"}, 10, "the check")
    assert str(lost.value).endswith("; its last output: first | EP: device lost")  # without its colours


def test_a_worker_that_hangs_is_a_timeout_and_is_killed():
    w = fake_worker("import time; time.sleep(60)")
    process = w.process
    with pytest.raises(WorkerLost) as lost:
        w._exchange({"op": "run"}, 0.5, "copy.x on cpu")
    assert lost.value.outcome == "timeout"
    assert str(lost.value) == "copy.x on cpu did not finish within 0.5 s; the worker was killed and replaced"
    # Killed, not waited for: its 60 s sleep never ended on its own.
    assert process.poll() == -signal.SIGKILL and w.process is None
    assert lost.value.machine is None  # it slept: a hang, as its EP would make one


# --- the machine's events: a worker killed, stopped or starved from outside ----------------------

WAITS_FOR_A_REQUEST = "import sys, time; sys.stdin.readline(); time.sleep(60)"
SPINS = "import sys; sys.stdin.readline()\nwhile True:\n    pass"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or not Path("/proc/self/task").is_dir(), reason="pins processes to a CPU through Linux")
def test_a_worker_kept_waiting_for_a_cpu_when_its_time_runs_out_is_a_timeout_naming_the_machines_load():
    """A worker pinned with three spinning processes to one CPU gets about a quarter of it, by the
    scheduler's fairness, not by luck: ready to run, it waits for the CPU about three quarters
    of the time the kit watches it."""
    cpu = min(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass"]) for _ in range(3)]
    try:
        for hog in hogs:
            os.sched_setaffinity(hog.pid, {cpu})
        w = fake_worker(SPINS)
        os.sched_setaffinity(w.process.pid, {cpu})
        process = w.process
        with pytest.raises(WorkerLost) as lost:
            w._exchange({"op": "run"}, 1.0, "copy.x on cpu")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert lost.value.outcome == "timeout" and lost.value.machine is not None and lost.value.machine.kind == "starved"
    evidence = lost.value.machine.evidence
    assert evidence.startswith(f"/proc/{process.pid}/task/*/schedstat over 0.5 s: waited ") and evidence.endswith(" when its 1 s ran out")
    assert str(lost.value).startswith("copy.x on cpu did not finish within 1 s: the worker was kept waiting for a CPU (/proc/")
    assert process.poll() == -signal.SIGKILL and w.process is None


def in_state(pid: int, wanted: bool) -> None:
    """Waits until process `pid` is stopped (`wanted`) or no longer is: a signal's delivery is
    asynchronous, and the tests act on the state, not on a guess at how long delivery takes."""
    deadline = time.monotonic() + 30
    while (process_state(pid) == "T") is not wanted:
        assert time.monotonic() < deadline, f"process {pid} state {process_state(pid)!r}"
        time.sleep(0.01)


def test_a_worker_killed_by_sigkill_from_outside_is_a_crash_naming_the_machines_event():
    w = fake_worker(WAITS_FOR_A_REQUEST)
    pid = w.process.pid
    os.kill(pid, signal.SIGKILL)  # as the OOM killer or a CI runner would
    with pytest.raises(WorkerLost, match="^the process running copy.x on cpu was killed by SIGKILL") as lost:
        w._exchange({"op": "run"}, 10, "copy.x on cpu")
    assert lost.value.outcome == "crash"
    assert lost.value.machine == MachineEvent("killed", f"process {pid}'s wait status: killed by SIGKILL, a signal the kit had not sent it")
    assert details_of(lost.value).machine == lost.value.machine


@pytest.mark.parametrize("code", ["import os; os.abort()", "import sys; sys.stdin.readline(); sys.exit(3)"])
def test_a_worker_that_aborts_or_exits_is_no_event_of_the_machine(code):
    w = fake_worker(code)
    with pytest.raises(WorkerLost) as lost:
        w._exchange({"op": "run"}, 10, "copy.x on cpu")
    assert lost.value.outcome == "crash" and lost.value.machine is None and details_of(lost.value).machine is None


def test_a_worker_stopped_when_its_time_runs_out_is_a_timeout_naming_the_stop():
    w = fake_worker(WAITS_FOR_A_REQUEST)
    process = w.process
    os.kill(process.pid, signal.SIGSTOP)
    in_state(process.pid, True)  # stopped for longer than its timeout: it never runs again
    with pytest.raises(WorkerLost) as lost:
        w._exchange({"op": "run"}, 0.5, "copy.x on cpu")
    assert lost.value.outcome == "timeout"
    evidence = f"/proc/{process.pid}/stat: state T (stopped by a signal)"
    said = f"the worker was stopped ({evidence} when its 0.5 s ran out); it was killed and replaced"
    assert str(lost.value) == f"copy.x on cpu did not finish within 0.5 s: {said}"
    assert lost.value.machine == MachineEvent("stopped", f"{evidence} when its 0.5 s ran out")
    assert process.poll() == -signal.SIGKILL and w.process is None  # a stopped process dies of SIGKILL all the same


def test_a_worker_stopped_and_continued_before_its_time_runs_out_just_answers():
    w = fake_worker("import sys; sys.stdin.readline(); print('{\"ok\": true}', flush=True); sys.stdin.readline()")
    try:
        os.kill(w.process.pid, signal.SIGSTOP)
        in_state(w.process.pid, True)
        os.kill(w.process.pid, signal.SIGCONT)
        in_state(w.process.pid, False)
        assert w._exchange({"op": "run"}, 60, "the check") == {"ok": True}
    finally:
        w._kill()


def test_a_reply_split_across_writes_is_read_whole():
    code = ("import sys, time; sys.stdin.readline(); out = sys.stdout\n"
            "out.write('{\"ok\": true, '); out.flush(); time.sleep(0.2); out.write('\"n\": 1}\\n'); out.flush(); time.sleep(60)")
    w = fake_worker(code)
    try:
        assert w._exchange({"op": "run"}, 30, "the check") == {"ok": True, "n": 1}
    finally:
        w._kill()


def test_replies_written_together_are_taken_one_by_one_and_a_split_one_whole():
    code = ("import sys, time; out = sys.stdout\n"
            "out.write('{\"n\": 1}\\n{\"n\": 2}\\n{\"n\": '); out.flush(); time.sleep(0.2)\n"
            "out.write('3}\\n{\"n\": 4}\\n'); out.flush(); time.sleep(60)")
    w = fake_worker(code)
    try:
        deadline = time.monotonic() + 30
        assert [w._launcher.channel.read_line(deadline) for _ in range(4)] == [b'{"n": 1}', b'{"n": 2}', b'{"n": 3}', b'{"n": 4}']
        assert w._launcher.channel.read_line(time.monotonic() + 0.05) is None  # nothing more within the deadline
    finally:
        w._kill()


NOISY_WORKER = """\
import os, sys
from conformance.engine import serve as worker
real = worker.serve
def noisy(requests, replies, **options):
    print("noise from python", flush=True)
    os.system("echo noise from C")
    real(requests, replies, **options)
worker.serve = noisy
worker.main()
"""


def test_worker_stdout_is_reserved_for_replies():
    """What a check or an EP library prints (Python or C) goes to stderr, never into the protocol."""
    completed = subprocess.run([sys.executable, "-c", NOISY_WORKER], input='{"op": "bogus"}\n{"op": "exit"}\n',
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == '{"ok": false, "error": "unknown request \'bogus\'"}\n'
    assert "noise from python" in completed.stderr and "noise from C" in completed.stderr


WARM_UP_WORKER = """\
import io, json, sys
from conformance.engine import serve as worker
if sys.argv[2] == "failing":
    sys.modules["conformance.testbed.onnx_types"] = None  # importing it raises ImportError
replies = io.BytesIO()
worker.serve(io.StringIO(sys.argv[1] + "\\n" + json.dumps({"op": "bogus"}) + "\\n"), replies)
print(json.dumps({"replies": [json.loads(line) for line in replies.getvalue().splitlines()],
                  "warm": sys.modules.get("conformance.testbed.onnx_types") is not None, "onnx": "onnx" in sys.modules}))
"""


def serve_in_a_child(init: dict, warm_up: str = "as it is") -> dict:
    completed = subprocess.run([sys.executable, "-c", WARM_UP_WORKER, json.dumps(dict(init, op="init")), warm_up],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


@pytest.mark.parametrize("warm_up", [True, False])
def test_a_worker_told_to_warm_up_makes_its_imports_after_its_facts_and_never_imports_onnx(warm_up, cpu_init):
    """What building a model needs (models.warm_up) is imported while pytest collects; not onnx,
    whose import (0.9 s with ml_dtypes 0.7) models no longer need (onnx_wire)."""
    answer = serve_in_a_child(dict(cpu_init, warm_up=warm_up))
    assert answer["replies"][0]["ok"] and answer["replies"][0]["facts"]["provider"] == "CPUExecutionProvider"
    assert answer["warm"] is warm_up
    assert answer["onnx"] is False


def test_a_worker_whose_warm_up_fails_goes_on_serving(cpu_init):
    answer = serve_in_a_child(dict(cpu_init, warm_up=True), "failing")
    assert [reply["ok"] for reply in answer["replies"]] == [True, False]  # the next request is answered


def test_a_worker_whose_init_failed_does_not_warm_up(cpu_init):
    answer = serve_in_a_child(dict(cpu_init, ep="nosuch", warm_up=True))
    assert not answer["replies"][0]["ok"] and answer["warm"] is False


def test_only_the_first_process_of_a_worker_warms_up(monkeypatch, cpu_init):
    """A replacement has requests waiting: it answers them at once."""
    sent = []
    monkeypatch.setattr(Launcher, "_new_process", lambda self, fork_only=False: object())
    monkeypatch.setattr(Launcher, "_write", staticmethod(lambda process, message: sent.append(message)))
    warm = Worker(cpu_init, timeout=5, warm_up=True)
    warm.launch()
    warm.launch()
    Worker(cpu_init, timeout=5).launch()
    assert [message.get("warm_up") for message in sent] == [True, None, None]


HANDED_WORKER = """\
import gc, io, json, sys
from conformance.engine import serve as worker
replies = io.BytesIO()
worker.serve(io.StringIO(sys.stdin.read()), replies)
print(json.dumps({"replies": [json.loads(line) for line in replies.getvalue().splitlines()], "yaml": "yaml" in sys.modules,
                  "frozen": gc.get_freeze_count()}))
"""


def serve_handed(catalogue, init: dict) -> dict:
    """A worker's answer to `init`, saying a handover follows, and the handover of `catalogue`."""
    lines = [json.dumps(dict(init, op="init", handover=True)), json.dumps(handover(catalogue, read_recipes()))]
    completed = subprocess.run([sys.executable, "-c", HANDED_WORKER], input="\n".join(lines) + "\n",
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_a_worker_handed_the_catalogue_reads_no_yaml(cpu_init):
    answer = serve_handed(load_catalogue(), cpu_init)
    assert answer["replies"][0]["ok"] and answer["replies"][0]["facts"]["provider"] == "CPUExecutionProvider"
    assert answer["yaml"] is False


def test_a_worker_freezes_the_catalogue_it_is_handed_out_of_the_cyclic_collectors_reach(cpu_init):
    # It lives as long as the worker: a collection would otherwise traverse each of its objects.
    catalogue = load_catalogue()
    assert serve_handed(catalogue, cpu_init)["frozen"] >= len(catalogue.contracts) > 0


ONNX_AT_THE_HANDOVER = """\
import io, json, sys
from conformance.engine import serve as worker
lines = sys.stdin.read().splitlines(keepends=True)
seen = []
def requests():
    for line in lines:
        if json.loads(line)["op"] == "handover":
            seen.append("conformance.testbed.onnx_types" in sys.modules)
        yield line
worker.serve(requests(), io.BytesIO(), arrived=lambda: sys.argv[1] == "arrived")
print(json.dumps(seen))
"""


@pytest.mark.parametrize("warm_up, handover_is, onnx_first", [(True, "to come", True), (False, "to come", False), (True, "arrived", False)])
def test_a_handed_worker_told_to_warm_up_makes_its_imports_while_it_waits_for_a_handover_still_to_come(warm_up, handover_is, onnx_first, cpu_init):
    lines = [json.dumps(dict(cpu_init, op="init", handover=True, warm_up=warm_up)), json.dumps(handover(load_catalogue(), read_recipes()))]
    completed = subprocess.run([sys.executable, "-c", ONNX_AT_THE_HANDOVER, handover_is], input="\n".join(lines) + "\n",
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == [onnx_first]


def test_a_handed_catalogue_naming_an_unknown_check_is_refused_where_the_check_is_written(tmp_path, contract_text, cpu_init):
    """The pytest process loads the catalogue without the check registry; the worker checks
    the ids it was handed against its own."""
    (tmp_path / "c.yaml").write_text(contract_text.replace("check: update-inplace.from-numpy", "check: update-inplace.from-numpi"), encoding="utf-8")
    catalogue = load_catalogue([tmp_path / "c.yaml"])  # as the pytest process does, with no registry
    (reply,) = serve_handed(catalogue, cpu_init)["replies"]
    assert reply["kind"] == "SpecErrors"
    assert reply["error"].endswith("c.yaml:11:12: contracts[0].check: unknown check 'update-inplace.from-numpi' (did you mean 'update-inplace.from-numpy'?)")


def test_every_process_of_a_worker_is_handed_the_catalogue_after_its_init(monkeypatch, cpu_init):
    """Started before the handover exists (the first worker, while the catalogue is read) or
    after it (a replacement, a spare standing by): each gets init, then the handover, once."""
    sent = []

    class Running:
        stdin = None

        def poll(self):
            return None

    monkeypatch.setattr(Launcher, "_new_process", lambda self, fork_only=False: Running())
    monkeypatch.setattr(Launcher, "_write", staticmethod(lambda process, message: sent.append(message["op"])))
    worker = Worker(dict(cpu_init, handover=True), timeout=5)
    worker.launch()
    worker.hand_over({"op": "handover"})
    worker.launch()
    worker.fork_server = type("Server", (), {"ready": lambda self: True})()
    worker.stand_by()
    assert sent == ["init", "handover", "init", "handover", "init", "handover"]


def test_asking_a_worker_to_exit_kills_its_spare(cpu_init):
    killed = []
    worker = Worker(cpu_init, timeout=5)
    worker._launcher._standby = type("Spare", (), {"poll": lambda self: None, "kill": lambda self: killed.append(True)})()
    worker.ask_to_exit()
    assert killed == [True]


@pytest.mark.skipif(not hasattr(fcntl, "F_GETPIPE_SZ") or int(Path("/proc/sys/fs/pipe-max-size").read_text()) < 1 << 20,
                    reason="pipes cannot be grown to 1 MiB here")
def test_the_pipe_to_a_worker_holds_a_whole_batch_while_the_worker_is_busy(cpu_init):
    process = Worker(cpu_init, timeout=60)._launcher._new_process()
    try:
        assert fcntl.fcntl(process.stdin.fileno(), fcntl.F_GETPIPE_SZ) == 1 << 20
    finally:
        process.kill()
        process.wait()


class Trickle:
    """A pipe that takes at most 7 bytes per write, as one interrupted by a signal may."""

    def __init__(self):
        self.data = b""

    def write(self, data: bytes) -> int:
        self.data += data[:7]
        return min(7, len(data))


def test_a_reply_the_pipe_takes_in_parts_is_written_whole():
    pipe = Trickle()
    worker_process._write(pipe, {"ok": True, "facts": {"provider": "CPUExecutionProvider"}})
    assert pipe.data.endswith(b"\n") and json.loads(pipe.data) == {"ok": True, "facts": {"provider": "CPUExecutionProvider"}}


def test_a_reply_holding_a_value_json_has_no_type_for_is_sent_as_its_text():
    replies = io.BytesIO()
    worker_process._write(replies, {"ok": True, "path": Path("/models/m.onnx")})
    assert json.loads(replies.getvalue()) == {"ok": True, "path": "/models/m.onnx"}


def test_signal_name():
    assert signal_name(-signal.SIGSEGV) == "SIGSEGV"
    assert signal_name(-200) == "signal 200"


def test_a_reply_that_is_not_json_loses_the_worker_not_the_run(tmp_path):
    lost = Worker({"ep": "cpu"}, timeout=5)
    chatty = "import sys; sys.stdout.write('hello from a vendor library\\n'); sys.stdout.flush(); sys.stdin.read()"
    lost.process = subprocess.Popen([sys.executable, "-c", chatty],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    with pytest.raises(WorkerLost, match="not a reply") as caught:
        lost._exchange({"op": "run"}, 5, "the check")
    assert caught.value.outcome == "crash" and lost.process is None


# --- requests sent ahead in one batch -----------------------------------------------------------

ANSWER_FIRST_THEN = """\
import json, os, sys, time
batch = json.loads(sys.stdin.readline())
first = batch["requests"][0]
sys.stdout.write(json.dumps({{"ok": True, "id": first["id"], "n": 1}}) + "\\n")
sys.stdout.flush()
{then}
"""


def batch_of_three(w: Worker) -> None:
    w.facts = {}  # a stand-in: already started
    w.submit([(name, {"op": "run", "n": i}, f"check {name}") for i, name in enumerate("abc")])


def test_a_batch_runs_ahead_and_each_reply_is_collected_by_its_id(worker, session_inputs):
    worker.start()
    other = dict(session_inputs, params={"recipe": "add", "dtype": "float32"})
    worker.submit([("first", session_inputs, "first"), ("bogus", {"op": "bogus"}, "bogus"), ("second", other, "second")])
    assert worker.outstanding("first") and worker.outstanding("second")
    assert worker.collect("second")["result"]["outcome"] == "pass"  # out of order: the first is kept
    assert worker.collect("first")["result"]["outcome"] == "pass"
    with pytest.raises(WorkerRefused, match="unknown request 'bogus'"):
        worker.collect("bogus")
    assert not worker.outstanding("first") and worker.process.poll() is None


def test_a_crash_in_a_batch_costs_the_running_request_and_drops_the_queued_ones():
    w = fake_worker(ANSWER_FIRST_THEN.format(then="os.abort()"))
    batch_of_three(w)
    crashed = w.process
    assert w.collect("a") == {"ok": True, "n": 1}
    with pytest.raises(WorkerLost, match="^the process running check b was killed by SIGABRT") as lost:
        w.collect("b")
    assert lost.value.outcome == "crash"
    assert not w.outstanding("c") and w.collect("c") is None  # to be submitted again
    # Its replacement is already starting, for the dropped request; unused, close kills it.
    assert w.process not in (None, crashed) and w.process.poll() is None and w.facts is None
    replacement = w.process
    w.close()
    assert replacement.poll() == -signal.SIGKILL


def test_a_crash_of_the_last_request_queued_starts_no_replacement():
    w = fake_worker(ANSWER_FIRST_THEN.format(then="os.abort()"))
    w.facts = {}
    w.submit([(name, {"op": "run", "n": i}, f"check {name}") for i, name in enumerate("ab")])
    assert w.collect("a") == {"ok": True, "n": 1}
    with pytest.raises(WorkerLost, match="^the process running check b was killed by SIGABRT"):
        w.collect("b")
    assert w.process is None


NOTES_THEN_ABORT = """\
import json, os, sys
sys.stdin.readline()
def send(message):
    sys.stdout.write(json.dumps(message) + "\\n")
send({"id": "a", "progress": {"step": "copying", "reproducer": "ort.copy_tensors(...)"}})
send({"ok": True, "id": "a", "n": 1})
send({"id": "b", "progress": {"step": "binding the input", "reproducer": "b.bind_input(...)"}})
send({"id": "b", "progress": {"step": "running again", "reproducer": "b.bind_input(...); s.run_with_iobinding(b)"}})
sys.stdout.flush()
os.abort()
"""


def test_a_crash_in_a_batch_carries_the_step_and_reproducer_its_check_sent_ahead():
    """The request that was running gets what its own check announced last before the fatal
    call; what the request before it announced is not taken for it."""
    w = fake_worker(NOTES_THEN_ABORT)
    batch_of_three(w)
    assert w.collect("a") == {"ok": True, "n": 1}
    with pytest.raises(WorkerLost, match="^the process running check b was killed by SIGABRT$") as lost:
        w.collect("b")
    assert lost.value.note == {"step": "running again", "reproducer": "b.bind_input(...); s.run_with_iobinding(b)"}
    # The caller, not the worker, says what the loss costs (conformance.run.attribution).
    assert message_of(lost.value) == "the process running check b was killed by SIGABRT while running again"
    details = details_of(lost.value)
    assert details.step == "running again"
    (violation,) = details.violations
    assert violation.reproducer == "b.bind_input(...); s.run_with_iobinding(b)"
    assert violation.actual == "killed by SIGABRT" and violation.expected


def sends_then_aborts(*messages: dict) -> str:
    """A fake worker's script: it reads its batch, writes `messages` as its lines, and aborts."""
    lines = "".join(f"sys.stdout.write({json.dumps(json.dumps(message) + chr(10))})\n" for message in messages)
    return f"import os, sys\nsys.stdin.readline()\n{lines}sys.stdout.flush()\nos.abort()\n"


SAME_REPRODUCER_THEN_ABORT = sends_then_aborts({"id": "a", "progress": {"step": "copying", "reproducer": "ort.copy_tensors(...)"}},
                                               {"ok": True, "id": "a", "n": 1},
                                               {"id": "b", "progress": {"step": "copying again", "same_reproducer": True}})


def test_a_crash_after_a_reproducer_sent_as_the_same_as_before_carries_that_reproducer():
    w = fake_worker(SAME_REPRODUCER_THEN_ABORT)
    batch_of_three(w)
    assert w.collect("a") == {"ok": True, "n": 1}
    with pytest.raises(WorkerLost) as lost:
        w.collect("b")
    assert lost.value.note == {"step": "copying again", "reproducer": "ort.copy_tensors(...)"}


def test_a_worker_sends_a_reproducer_once_while_it_stays_the_same():
    from conformance.engine.serve import Handler

    lines: list[dict] = []
    handler = Handler(lines.append)
    handler._progress_of({"id": "a"})({"step": "placing", "reproducer": "script 1"})
    handler._progress_of({"id": "b"})({"step": "placing", "reproducer": "script 1"})
    handler._progress_of({"id": "b"})({"call": None})
    handler._progress_of({"id": "c"})({"step": "placing", "reproducer": "script 2"})
    assert [line["progress"] for line in lines] == [{"step": "placing", "reproducer": "script 1"}, {"step": "placing", "same_reproducer": True},
                                                    {"call": None}, {"step": "placing", "reproducer": "script 2"}]


def test_a_lost_case_that_announced_nothing_is_reproduced_through_the_kit(cpu_init, session_inputs):
    w = fake_worker("import sys, time; sys.stdin.readline(); time.sleep(60)")
    w.init = dict(cpu_init, op="init")
    with pytest.raises(WorkerLost) as lost:
        w._exchange(session_inputs, 0.5, "the check")
    details = details_of(lost.value)
    (violation,) = details.violations
    assert details.step == "" and violation.actual == "no answer after 0.5 s"
    assert violation.reproducer.splitlines()[-1] == (
        "print(Runner('cpu').run('memory-info.session-inputs', 0, {'recipe': 'identity', 'dtype': 'float32'}))")


def test_a_hang_in_a_batch_is_a_timeout_of_the_running_request_measured_from_the_one_before():
    w = fake_worker(ANSWER_FIRST_THEN.format(then="time.sleep(60)"))
    w.timeout = 0.5
    batch_of_three(w)
    assert w.collect("a")["n"] == 1
    process = w.process
    with pytest.raises(WorkerLost, match=r"^check b did not finish within 0\.5 s") as lost:
        w.collect("b")
    assert lost.value.outcome == "timeout"
    assert process.poll() == -signal.SIGKILL and w.collect("c") is None
    # As after a crash, the replacement for the dropped request is already starting.
    assert w.process not in (None, process) and w.facts is None
    w.close()


def test_close_kills_a_worker_still_busy_with_a_batch():
    w = fake_worker(ANSWER_FIRST_THEN.format(then="time.sleep(60)"))
    batch_of_three(w)
    process = w.process
    w.close()
    assert process.poll() == -signal.SIGKILL and w.process is None


# --- the call in flight, and calls quarantined after a loss --------------------------------------

ANNOUNCE_THEN = """\
import json, os, sys, time
sys.stdin.readline()
sys.stdout.write(json.dumps({{"id": None, "progress": {{"call": {{"kind": "copy_tensors", "direction": "cpu>default", "note": ""}}}}}}) + "\\n")
sys.stdout.flush()
{then}
"""


def test_a_crash_names_the_call_the_worker_announced_last():
    w = fake_worker(ANNOUNCE_THEN.format(then="os.abort()"))
    with pytest.raises(WorkerLost, match="^the process running the check was killed by SIGABRT during copy_tensors cpu>default") as lost:
        w._exchange({"op": "run"}, 10, "the check")
    assert lost.value.call == Call("copy_tensors", "cpu>default")


def test_a_crash_after_the_call_returned_is_not_blamed_on_it():
    returned = 'sys.stdout.write(json.dumps({"id": None, "progress": {"call": None}}) + "\\n"); sys.stdout.flush()\nos.abort()'
    w = fake_worker(ANNOUNCE_THEN.format(then=returned))
    with pytest.raises(WorkerLost) as lost:
        w._exchange({"op": "run"}, 10, "the check")
    assert lost.value.call is None and str(lost.value) == "the process running the check was killed by SIGABRT"


def test_a_line_that_is_no_reply_read_with_the_announcement_before_it_names_the_call_in_flight():
    # Both lines in one write: the second is decoded from what was read with the first, without
    # a wait (Worker._answer), and still loses the worker with the call the first announced.
    announce_and_garble = """\
import json, sys
sys.stdin.readline()
call = {"kind": "copy_tensors", "direction": "cpu>default", "note": ""}
sys.stdout.write(json.dumps({"id": None, "progress": {"call": call}}) + "\\n" + "a vendor library writing to fd 1\\n")
sys.stdout.flush()
sys.stdin.read()
"""
    w = fake_worker(announce_and_garble)
    with pytest.raises(WorkerLost, match="not a reply") as lost:
        w._exchange({"op": "run"}, 10, "the check")
    assert lost.value.outcome == "crash" and lost.value.call == Call("copy_tensors", "cpu>default") and w.process is None


def test_a_hang_names_the_call_it_is_stuck_in_and_announcements_do_not_extend_the_timeout():
    # Announcements for 10 s, then an exit: were the timeout extended by each, the worker's end
    # would be the outcome (a crash), not the timeout, whatever the machine's load.
    hang = ("for _ in range(200):\n"
            "    sys.stdout.write(json.dumps({'id': None, 'progress': {'call': {'kind': 'copy_tensors', 'direction': 'cpu>default'}}}) + '\\n')\n"
            "    sys.stdout.flush(); time.sleep(0.05)\nsys.exit(0)")
    w = fake_worker(ANNOUNCE_THEN.format(then=hang))
    with pytest.raises(WorkerLost, match=r"within 2 s \(stuck in copy_tensors cpu>default\)") as lost:
        w._exchange({"op": "run"}, 2.0, "the check")
    assert lost.value.outcome == "timeout" and lost.value.call == Call("copy_tensors", "cpu>default")


def test_a_check_that_goes_on_announcing_its_steps_runs_past_the_timeout():
    # A step every 0.1 s for 3 s, then the reply: a timeout of 1 s counts from the last step.
    steps = ("for _ in range(30):\n"
             "    sys.stdout.write(json.dumps({'id': None, 'progress': {'step': 'copying a chunk'}}) + '\\n')\n"
             "    sys.stdout.flush(); time.sleep(0.1)\n"
             "sys.stdout.write(json.dumps({'id': None, 'ok': True, 'done': 1}) + '\\n'); sys.stdout.flush(); sys.stdin.read()")
    w = fake_worker(ANNOUNCE_THEN.format(then=steps))
    assert w._exchange({"op": "run"}, 1.0, "the check")["done"] == 1
    w.close()


def test_a_lost_checks_result_carries_the_call_in_flight_as_its_wire_dict():
    w = fake_worker(ANNOUNCE_THEN.format(then="os.abort()"))
    reply = outcome_of(lambda: w._exchange({"op": "run"}, 10, "the check"))
    outcome, message, details = reply.outcome, reply.message, reply.details
    assert outcome.value == "crash" and message == "the process running the check was killed by SIGABRT during copy_tensors cpu>default"
    assert details.to_wire()["call"] == {"kind": "copy_tensors", "direction": "cpu>default", "note": ""}
    assert str(Call.from_wire(details.to_wire()["call"])) == "copy_tensors cpu>default"


def test_a_lost_checks_message_names_its_step_before_the_last_output_of_its_process(tmp_path):
    log = tmp_path / "worker.log"
    code = ("import json, os, sys; sys.stdin.readline()\n"
            "sys.stdout.write(json.dumps({'id': None, 'progress': {'step': 'copying', 'reproducer': 'ort.copy(...)'}}) + '\\n')\n"
            "sys.stdout.flush(); sys.stderr.write('EP: device lost\\n'); sys.stderr.flush(); os.abort()")
    with open(log, "wb") as stderr:
        w = fake_worker(code, stderr=stderr)
    w.log = log
    reply = outcome_of(lambda: w._exchange({"op": "run"}, 10, "the check"))
    message, details = reply.message, reply.details
    assert message == "the process running the check was killed by SIGABRT while copying; its last output: EP: device lost"
    (violation,) = details.violations
    assert violation.message == "the process running the check was killed by SIGABRT while copying"
    assert violation.reproducer == "ort.copy(...)" and details.call is None


def test_a_worker_lost_while_starting_is_blamed_on_no_request():
    w = fake_worker("import os; os.abort()")
    with pytest.raises(WorkerLost) as lost:
        w.ready()
    assert lost.value.request is None and details_of(lost.value) == Details()
    assert message_of(lost.value) == str(lost.value) == "the process running starting the worker was killed by SIGABRT"


def test_an_announcement_is_not_taken_for_the_reply(worker):
    reply = worker.request(dict(NODES_ON_EP))
    assert reply["result"]["outcome"] == "pass" and "progress" not in reply


NODES_ON_EP = {"op": "run", "contract": "session.nodes-on-ep", "device": 0, "params": {"recipe": "relu", "dtype": "float32"}}


def test_a_check_stops_before_a_quarantined_call_as_not_run(worker):
    why = "that call ended in crash in the earlier check x"
    reply = worker.request(dict(NODES_ON_EP, quarantined=[{"call": {"kind": "InferenceSession.run", "direction": "", "note": "inputs in cpu"}, "reason": why}]))
    assert reply["result"]["outcome"] == "not_run"
    assert reply["result"]["message"] == f"stopped before InferenceSession.run, inputs in cpu: {why}"
    assert reply["result"]["details"] == {"quarantined_call": "InferenceSession.run, inputs in cpu"}
    # Other calls still run, and the quarantine belongs to the request that carried it.
    quarantined = [{"call": {"kind": "copy_tensors", "direction": "cpu>default", "note": ""}, "reason": why}]
    assert worker.request(dict(NODES_ON_EP, quarantined=quarantined))["result"]["outcome"] == "pass"
    assert worker.request(NODES_ON_EP)["result"]["outcome"] == "pass"


def test_a_probe_reaching_a_quarantined_call_is_refused_with_the_reason(worker):
    with pytest.raises(WorkerRefused, match="^stopped before copy_tensors cpu>cpu: it hung") as refused:
        hung = [{"call": {"kind": "copy_tensors", "direction": "cpu>cpu", "note": ""}, "reason": "it hung"}]
        worker.request({"op": "probe", "device": 0, "sizes": [], "quarantined": hung})
    assert refused.value.kind == "CallQuarantined"

