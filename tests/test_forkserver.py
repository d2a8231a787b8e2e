"""Workers forked by the fork server their first worker hosts: replacements start from a process
that has made the imports, and still end, crash and hang as spawned workers do."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conformance.engine.fork_server import why_not_fork_safe
from conformance.isolation.fork_client import ForkedProcess, ForkServer
from conformance.isolation.controller import Worker, WorkerLost

pytestmark = pytest.mark.skipif(not ForkServer.supported(), reason="the fork server runs on Linux only")


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.fixture
def server():
    fork_server = ForkServer()
    yield fork_server
    fork_server.close()


@pytest.fixture
def host(server, cpu_init):
    """A started worker hosting `server`, which forks its replacements."""
    worker = Worker(cpu_init, timeout=60)
    worker.hosts = worker.fork_server = server
    worker.start()
    yield worker
    worker.close()


def replaced(worker: Worker, request: dict) -> ForkedProcess:
    """Kills the worker, and returns the process that replaces it on `request`, the next one."""
    worker.process.kill()
    worker.process.wait()
    assert worker.request(request)["result"]["outcome"] == "pass"
    assert worker.restarts == 1
    return worker.process


def killed_during_next_request(worker: Worker, *pids: int, sig: int = signal.SIGKILL) -> None:
    """Makes the next request's worker end while that request is outstanding, never before it.

    The worker is stopped first, so it cannot answer; `pids` get `sig` just after the request is
    sent, and the worker a SIGCONT (a stopped process holds any other signal than SIGKILL). A
    signal before the request would race the worker's next poll: one that sees the death
    replaces the worker silently, and the request then passes."""
    os.kill(worker.process.pid, signal.SIGSTOP)
    channel = worker._launcher.channel
    send = channel.send

    def send_then_kill(message):
        send(message)
        channel.send = send
        for pid in pids:
            os.kill(pid, sig)
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.process.pid, signal.SIGCONT)

    channel.send = send_then_kill


def test_the_host_is_spawned_and_its_replacement_forked_by_the_server_it_hosts(host, server, session_inputs):
    assert not isinstance(host.process, ForkedProcess) and parent_of(host.process.pid) == os.getpid()
    assert server.ready()
    replacement = replaced(host, session_inputs)
    assert isinstance(replacement, ForkedProcess)
    server_pid = parent_of(replacement.pid)
    assert server_pid != os.getpid()  # the server's child, not this process's
    # The replacement runs checks on real memory like any worker, and the server runs on.
    assert host.request(session_inputs)["result"]["outcome"] == "pass"
    assert Path(f"/proc/{server_pid}").exists()


def test_a_forked_worker_that_aborts_is_reported_with_its_signal(host, session_inputs):
    forked = replaced(host, session_inputs)
    killed_during_next_request(host, forked.pid, sig=signal.SIGABRT)
    with pytest.raises(WorkerLost, match="^the process running the check was killed by SIGABRT") as lost:
        host.request(session_inputs)
    assert lost.value.outcome == "crash" and forked.returncode == -signal.SIGABRT


def test_a_forked_worker_that_hangs_is_killed_at_the_timeout(host, session_inputs):
    forked = replaced(host, session_inputs)
    host.timeout = 0.5
    forked.send_signal(signal.SIGSTOP)
    with pytest.raises(WorkerLost, match=r"did not finish within 0\.5 s") as lost:
        host.request(session_inputs)
    assert lost.value.outcome == "timeout" and forked.returncode == -signal.SIGKILL
    # A stopped worker is the machine's event unless its next try repeats it (run/reruns.py): /proc
    # tells it of a forked worker as of a spawned one.
    assert lost.value.machine is not None and lost.value.machine.kind == "stopped"


def test_a_forked_worker_killed_from_outside_is_the_machines_event(host, session_inputs):
    forked = replaced(host, session_inputs)
    killed_during_next_request(host, forked.pid)
    with pytest.raises(WorkerLost, match="^the process running the check was killed by SIGKILL") as lost:
        host.request(session_inputs)
    assert lost.value.machine is not None and lost.value.machine.kind == "killed" and str(forked.pid) in lost.value.machine.evidence


def test_closing_a_forked_worker_ends_it_cleanly(host, session_inputs):
    forked = replaced(host, session_inputs)
    host.close()
    assert forked.returncode == 0 and host.process is None


def test_a_worker_exits_with_a_status_the_server_reports(host, session_inputs):
    forked = replaced(host, session_inputs)
    forked.stdin.close()  # the end of its requests: it exits as asked
    assert forked.wait(timeout=30) == 0


def test_without_a_host_the_server_forks_nothing_and_workers_are_spawned(server, cpu_init, session_inputs):
    worker = Worker(cpu_init, timeout=60)
    worker.fork_server = server
    try:
        assert worker.request(session_inputs)["result"]["outcome"] == "pass"
        assert not isinstance(worker.process, ForkedProcess)
    finally:
        worker.close()


def test_a_closed_server_leaves_replacements_spawned(host, server, session_inputs):
    server.close()
    assert not isinstance(replaced(host, session_inputs), ForkedProcess)


def test_a_process_with_another_thread_is_not_forked():
    threads = len(os.listdir("/proc/self/task"))  # pytest-xdist's process has threads of its own
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        assert why_not_fork_safe() == f"the process runs {threads + 1} threads; a fork could deadlock"
    finally:
        release.set()
        thread.join()


def test_a_host_with_another_thread_forks_no_server_and_says_why(server, cpu_init, session_inputs):
    # OPENBLAS_NUM_THREADS is what keeps numpy's thread pool out of the host; without it (and
    # more than one core) OpenBLAS starts its threads at import.
    worker = Worker(cpu_init, timeout=60, env={"OPENBLAS_NUM_THREADS": "2"})
    worker.hosts = worker.fork_server = server
    try:
        worker.start()
        assert not server.ready() and server.state.startswith("unavailable: the process runs ")
        assert worker.request(session_inputs)["result"]["outcome"] == "pass"  # the host serves all the same
    finally:
        worker.close()


def test_a_process_standing_by_replaces_a_lost_worker_at_once(host, session_inputs):
    host.stand_by()
    standby = host._launcher._standby
    assert isinstance(standby, ForkedProcess) and standby.poll() is None
    host.process.kill()
    host.process.wait()
    assert host.request(session_inputs)["result"]["outcome"] == "pass"
    assert host.process is standby and host.restarts == 1 and host._launcher._standby is None


def test_a_process_standing_by_unused_is_killed_at_close(host):
    host.stand_by()
    standby = host._launcher._standby
    host.stand_by()  # one at most
    assert host._launcher._standby is standby
    host.close()
    assert standby.returncode == -signal.SIGKILL


def test_without_a_fork_server_nothing_stands_by(cpu_init):
    worker = Worker(cpu_init, timeout=60)
    worker.stand_by()  # a spawned spare would cost a whole interpreter start
    assert worker._launcher._standby is None


def test_a_forked_worker_whose_server_is_gone_is_lost_without_a_made_up_status(host, server, session_inputs):
    forked = replaced(host, session_inputs)
    killed_during_next_request(host, parent_of(forked.pid), forked.pid)  # the fork server, then its worker
    with pytest.raises(WorkerLost, match="^the process running the check ended, how is unknown: the fork server that could tell is gone"):
        host.request(session_inputs)
    assert not server.ready()
    assert host.request(session_inputs)["result"]["outcome"] == "pass"  # its replacement is spawned
    assert not isinstance(host.process, ForkedProcess)


def loaded_after(statement: str) -> set[str]:
    """The kit's modules a fresh interpreter has loaded after `statement`."""
    code = f"import sys\n{statement}\nprint(' '.join(m for m in sys.modules if m.startswith('conformance.')))"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return set(completed.stdout.split())


def test_the_parent_never_loads_the_servers_half_nor_the_server_the_parents():
    assert "conformance.engine.fork_server" not in loaded_after("import conformance.plugin.hooks, conformance.run.probing, conformance.isolation.controller")
    assert loaded_after("import conformance.engine.fork_server") == {"conformance.version", "conformance.engine", "conformance.engine.fork_server"}
    loaded = loaded_after("import conformance.engine.serve; conformance.engine.serve.preload()")
    assert not {"conformance.isolation.fork_client", "conformance.isolation.controller"} & loaded


def test_a_forked_worker_has_what_building_a_model_needs_and_not_onnx(host):
    # The server makes the imports a worker needs to build a model once it serves
    # (serve.warm_forks): numpy and onnx_wire, not onnx, whose import (0.9 s with ml_dtypes 0.7)
    # building a model no longer needs.
    host.stand_by()
    standby = host._launcher._standby
    assert isinstance(standby, ForkedProcess)
    maps = Path(f"/proc/{standby.pid}/maps").read_text()
    assert "_multiarray_umath" in maps
    assert "onnx_cpp2py_export" not in maps and "_ml_dtypes_ext" not in maps


def test_a_warm_up_that_leaves_a_thread_running_ends_the_server_before_it_forks():
    code = ("import threading\nfrom conformance.engine.fork_server import _warm_up\nrelease = threading.Event()\n"
            "_warm_up(lambda: threading.Thread(target=release.wait, daemon=True).start())\nprint('forked on')\n")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0 and "forked on" not in completed.stdout, completed.stderr


def test_a_warm_up_that_fails_leaves_the_imports_to_the_workers_and_serves_on():
    code = "from conformance.engine.fork_server import _warm_up\n_warm_up(lambda: 1 / 0)\nprint('forked on')\n"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0 and "forked on" in completed.stdout, completed.stderr
