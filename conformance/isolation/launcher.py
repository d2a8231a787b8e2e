"""The processes behind one isolation.Worker: started, handed what they need, killed and ended.

A process is spawned (`python -m conformance.engine.serve`), or forked by the run's fork server once
it serves (see conformance.isolation.fork_client), which makes a replacement, and a spare standing by for
one, cheap. Every process is sent its init, then the handover once there is one. Knows nothing
of requests or their answers: conformance.isolation.ledger keeps those, isolation.Worker ties the two.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conformance import safe_io
from conformance.isolation.fork_client import ForkedProcess, ForkServer
from conformance.isolation.lines import LineChannel, widen_pipe, write
from conformance.orphans import PARENT
from conformance.outcomes import MachineEvent

TERMINAL_COLOURS = re.compile(r"\x1b\[[0-9;]*m")


def signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class Launcher:
    """The running process of a worker (and its channel), a spare standing by, and how to start
    the next. `init` is sent to every process first; `hosts`: a fork server the next spawned
    process starts; `fork_server`: forks the processes once set and serving; `wrapper`: the command
    every spawned process runs under (`qemu-x86_64 -cpu ...`: see spawn_command)."""

    def __init__(self, init: dict[str, Any], *, log: Path | None, env: dict[str, str] | None, warm_up: bool,
                 wrapper: tuple[str, ...] = ()):
        self.init, self.log, self.env, self.wrapper = init, log, env, wrapper
        # The first process may warm up after answering init (worker.serve): its caller has
        # other work before the first request. A replacement has requests waiting at once.
        self.warm_up = warm_up
        self.fork_server: ForkServer | None = None
        self.hosts: ForkServer | None = None
        self.channel = LineChannel(None)
        self.restarts = 0  # replacements of a process that crashed, hung or exited
        self._started = False
        self._log_start = 0  # where the running process's output begins in the log
        self._standby: subprocess.Popen | ForkedProcess | None = None  # see stand_by
        self._handover: dict[str, Any] | None = None  # see hand_over

    @property
    def process(self) -> subprocess.Popen | ForkedProcess | None:
        return self.channel.process

    @process.setter
    def process(self, process: subprocess.Popen | ForkedProcess | None) -> None:
        self.channel = LineChannel(process)  # a new process: nothing of the last one's output

    def launch(self) -> None:
        """Starts a process and sends it init, or takes the one standing by (see stand_by)."""
        self.restarts += self._started
        self._started = True
        standby, self._standby = self._standby, None
        # The log is kept across runs and replacements; a loss quotes what this process wrote.
        self._log_start = self.log.stat().st_size if self.log and self.log.exists() else 0
        if standby and standby.poll() is None:
            self.process = standby  # its init (and handover) was sent when it was forked
        else:
            self.process = self._new_process()
            self._introduce(self.process, dict(self.init, warm_up=True) if self.warm_up and not self.restarts else self.init)

    def stand_by(self) -> None:
        """Forks a spare process that starts initialising now, to be taken by the next launch,
        so that it replaces a lost worker at once. Only where the fork server forks it, which
        makes a spare cheap; one at most (once per loss)."""
        if self._standby is None and self.fork_server is not None and not self.env and self.fork_server.ready():
            self._standby = self._new_process(fork_only=True)
            if self._standby is not None:
                self._introduce(self._standby, self.init)

    def hand_over(self, request: dict[str, Any]) -> None:
        """Gives the worker the `handover` request its init said would follow: sent now to the
        processes already started, and after init to every process started from now on."""
        self._handover = request
        for process in (self.process, self._standby):
            if process is not None and process.poll() is None:
                self._write(process, request)

    def _introduce(self, process, init: dict[str, Any]) -> None:
        self._write(process, init)
        if self._handover:
            self._write(process, self._handover)

    @staticmethod
    def _write(process, message: dict[str, Any]) -> None:
        write(process.stdin, message)

    def _new_process(self, fork_only: bool = False) -> subprocess.Popen | ForkedProcess | None:
        # Through safe_io: a symlink planted as reports/worker-cpu.log is refused, not appended to.
        log = safe_io.open_in(self.log.parent, self.log.name, "ab") if self.log else subprocess.DEVNULL
        try:
            forked = _forked(self.fork_server, log) if self.fork_server is not None and not self.env else None
            process = forked or (None if fork_only else self._spawned(log))
        finally:
            if not isinstance(log, int):  # DEVNULL otherwise
                log.close()
        if process is not None:
            widen_pipe(process.stdin)
        return process

    def _spawned(self, log) -> subprocess.Popen:
        fds: tuple[int, ...]
        command, fds, hosting = spawn_command(self.wrapper, "-m", "conformance.engine.serve"), (), {}
        server, self.hosts = self.hosts, None
        if server:  # see forkserver.py: one OpenBLAS thread, so that the host can fork the server
            command, fds, hosting = command + server.host_args, (server.host_fd,), {"OPENBLAS_NUM_THREADS": "1"}
        env = {**os.environ, **hosting, **(self.env or {}), **parent_variable(self.wrapper)}
        try:
            return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, pass_fds=fds)
        finally:
            if server:
                server.hosted()

    def reap(self) -> tuple[str, str, MachineEvent | None]:
        """How the process whose output ended did end: as a fact ('killed by SIGABRT'), as said
        of it ('was killed by SIGABRT', 'exited with status 3'), and the machine's event it may
        be (killed_from_outside). It is no longer running."""
        process, self.process = self.process, None
        assert process is not None, "reap() follows the end of a process's output"
        code = process.wait()
        how = f"killed by {signal_name(code)}" if code < 0 else f"exited with status {code}"
        if isinstance(process, ForkedProcess) and process.status_lost:
            how = "ended, how is unknown: the fork server that could tell is gone"
            return how, how, None
        return how, (f"was {how}" if code < 0 else how), killed_from_outside(process.pid, code)

    def log_tail(self, lines: int = 3) -> str:
        return _log_tail(self.log, self._log_start, lines)

    def kill(self) -> None:
        """Kills the process and waits for its end."""
        if self.process:
            self.process.kill()
            self.process.wait()
            self.process = None

    def ask_to_exit(self) -> None:
        """Tells the process to end, without waiting; a spare standing by is killed."""
        if self._standby and self._standby.poll() is None:
            self._standby.kill()
        if self.process and self.process.poll() is None and self.process.stdin and not self.process.stdin.closed:
            try:
                self.process.stdin.write(b'{"op": "exit"}\n')
                self.process.stdin.close()
            except (BrokenPipeError, OSError):
                self.kill()

    def close(self) -> None:
        """Waits for a process asked to exit (killing it after 5 s) and for the spare."""
        if self.process and not self._exited_within(5.0):
            self.kill()
        self.process = None
        if self._standby:
            self._standby.wait()
            self._standby = None

    def _exited_within(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        if not self.channel.drained_within(seconds):
            return False
        assert self.process is not None
        try:
            self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return False
        return True


# The state /proc/PID/stat gives a process stopped by a signal (SIGSTOP, SIGTSTP, SIGTTIN,
# SIGTTOU). Not a tracer's stop ('t'): a tracing wrapper (strace) stops its worker at every
# system call, and a loss there is no more the machine's than any other.
STOPPED = "T"


def killed_from_outside(pid: int, code: int) -> MachineEvent | None:
    """The machine's event a process that ended with returncode `code` may be: the kit sends
    SIGKILL only through Launcher.kill, which waits for the process and forgets it, so a SIGKILL
    seen when its output ends came from someone else (or from the process itself, which the
    case's next try tells: conformance.run.reruns)."""
    if code != -signal.SIGKILL:
        return None
    return MachineEvent(MachineEvent.KILLED, f"process {pid}'s wait status: killed by SIGKILL, a signal the kit had not sent it")


def stopped(process: subprocess.Popen | ForkedProcess | None) -> str:
    """What /proc says of `process` where a signal has stopped it (SIGSTOP, SIGTSTP), so that it
    makes no progress whatever its EP would do: '/proc/123/stat: state T (stopped by a signal)';
    '' where it runs or waits, or where /proc cannot tell (not Linux)."""
    if process is None or process_state(process.pid) != STOPPED:
        return ""
    return f"/proc/{process.pid}/stat: state {STOPPED} (stopped by a signal)"


# How long a worker whose time ran out is watched before it is killed, and the share of that
# time it must spend ready to run but waiting for a CPU to be found starved. A worker that waits
# on a lock or a device sleeps (it does not wait for a CPU at all), and one alone on a core never
# waits for one: only a machine busier than it has cores keeps a runnable worker off the CPU for
# a quarter of the time.
STARVED_WINDOW = 0.5
STARVED_SHARE = 0.25


def seen_at_timeout(process: subprocess.Popen | ForkedProcess | None, timeout: float) -> MachineEvent | None:
    """The machine's event a worker whose time ran out may be, seen before it is killed: stopped
    by a signal (it made no progress, whatever its EP would do), or kept waiting for a CPU by
    other processes (a 4 GiB copy took over 60 s on 2 cores under a load of 8). None for neither."""
    if process is None:
        return None
    stop = stopped(process)
    if stop:
        return MachineEvent(MachineEvent.STOPPED, f"{stop} when its {timeout:g} s ran out")
    starving = starved(process.pid)
    return MachineEvent(MachineEvent.STARVED, f"{starving} when its {timeout:g} s ran out") if starving else None


def starved(pid: int, window: float = STARVED_WINDOW) -> str:
    """What /proc's scheduler figures say of process `pid` over the next `window` seconds where
    its threads, ready to run, waited for a CPU at least STARVED_SHARE of it: '/proc/123/task/*/
    schedstat over 0.5 s: waited 0.38 s for a CPU, ran 0.12 s'; '' otherwise, or where /proc
    cannot tell (not Linux, no schedstat)."""
    before = schedstat(pid)
    if not before:
        return ""
    time.sleep(window)
    after = schedstat(pid)
    ran = sum(after[t][0] - before[t][0] for t in after.keys() & before.keys()) / 1e9
    waited = sum(after[t][1] - before[t][1] for t in after.keys() & before.keys()) / 1e9
    if waited < STARVED_SHARE * window:
        return ""
    return f"/proc/{pid}/task/*/schedstat over {window:g} s: waited {waited:.2f} s for a CPU, ran {ran:.2f} s"


def schedstat(pid: int) -> dict[int, tuple[int, int]]:
    """Each thread of process `pid`: nanoseconds it ran and waited on a run queue for a CPU, as
    /proc/PID/task/TID/schedstat gives them since it began; {} where they cannot be read."""
    figures = {}
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as stat:
                ran, waited = stat.read().split()[:2]
            figures[int(tid)] = (int(ran), int(waited))
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
    return figures


def process_state(pid: int) -> str:
    """The state letter of process `pid` in /proc/PID/stat ('R', 'S', 'T', ...); '' where it
    cannot be read (the process is gone, or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # The command name, in parentheses, may hold spaces and parentheses: the state follows the last ')'.
            return stat.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return ""


def spawn_command(wrapper: tuple[str, ...], *args: str) -> list[str]:
    """This interpreter with `args`, under `wrapper` when there is one. A process the fork server
    forks is forked from a process started so, and stays under the wrapper: an emulator or a
    tool that follows forks (valgrind) runs its children too. (Under qemu-user the server does
    not start: the emulator's own thread makes its host a process of two threads, which the
    server refuses to fork, see engine.fork_server; every worker is then spawned this way.)"""
    return [*wrapper, sys.executable, *args]


def parent_variable(wrapper: tuple[str, ...]) -> dict[str, str]:
    """The spawning process's pid for the worker (see orphans.die_with_parent), which ends at once
    when its parent is another process. Not under a wrapper: a wrapper that does not exec the
    interpreter (strace, a shell script) is its parent, and the worker, still killed when that
    parent ends, would take itself for an orphan."""
    return {} if wrapper else {PARENT: str(os.getpid())}


def _log_tail(log_path: Path | None, start: int, lines: int) -> str:
    """The last `lines` lines a process wrote to its log from `start` on, for a loss's message."""
    if not log_path or not log_path.exists():
        return ""
    try:
        log = safe_io.open_regular(log_path, follow_symlinks=False)
    except (OSError, safe_io.UnsafeFile):
        return ""
    with log:
        log.seek(start)
        text = TERMINAL_COLOURS.sub("", log.read().decode(errors="replace"))  # onnxruntime colours its log lines
    tail = [line for line in text.splitlines() if line.strip()][-lines:]
    return ("; its last output: " + " | ".join(tail)) if tail else ""


def _forked(server: ForkServer, log) -> ForkedProcess | None:
    """A process forked by `server`, or None where it cannot fork one."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    stderr = log.fileno() if log is not subprocess.DEVNULL else os.open(os.devnull, os.O_WRONLY)
    try:
        pid = server.fork(stdin_read, stdout_write, stderr)
    finally:
        for fd in (stdin_read, stdout_write) + (() if log is not subprocess.DEVNULL else (stderr,)):
            os.close(fd)
    if pid is None:
        os.close(stdin_write)
        os.close(stdout_read)
        return None
    return ForkedProcess(server, pid, os.fdopen(stdin_write, "wb"), os.fdopen(stdout_read, "rb"))
