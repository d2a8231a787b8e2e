"""Workers forked from a process that has made their imports: the parent's end of the fork server.

Most of a worker's start is imports: Python, numpy and the kit, then onnxruntime and the EP.
The first worker of a run hosts a fork server: once it has made the first of those imports,
and before it imports onnxruntime, it forks the server off itself (a fork costs a few
milliseconds, another interpreter start would cost a tenth of a second of CPU beside the
worker's own start). The server then forks a worker on request; the worker imports
onnxruntime, loads the EP and serves as a spawned one does (conformance.engine.serve). A worker that
replaces one lost to a crash or a hang, or runs isolated or own-process contracts, starts in
tens of milliseconds instead of a whole interpreter start. The server outlives its host.

The server never imports onnxruntime, and is forked only from a process running one thread:
onnxruntime starts a thread at import, and a fork of a process with other threads may deadlock
in the child (on a lock a thread that does not exist there held). numpy's OpenBLAS starts a
thread pool at import unless told one thread, so the host is started with
OPENBLAS_NUM_THREADS=1 (the checks do no linear algebra). A host that finds another thread says
so and forks no server; workers are then spawned as usual.

Protocol, over a Unix stream socket: the server sends "ready" (or "unavailable REASON"). The
parent sends b"fork" with three file descriptors, the worker's stdin, stdout and stderr; the
server answers "pid N". Whenever a worker ends, the server sends "exit N CODE", CODE as
subprocess.Popen's returncode (-SIGNAL when a signal ended it). The server ends when the parent
closes the socket. Linux only (a process's threads are counted in /proc).

The server's half, which runs in the host worker and the server forked off it, is
conformance.engine.fork_server; neither half imports the other, so the parent never loads the server's
code and the server none of the parent's.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

# The returncode given to a worker whose fork server is gone: only its parent, the server,
# could read how it ended; that it ended is all that is known (ForkServer.status_unknown).
STATUS_LOST = 255


class ForkServer:
    """The parent's end of a fork server (see the module's doc). `host_args` and `host_fd`
    go to the first worker's command line; `hosted` once it is launched."""

    def __init__(self, startup_timeout: float = 60.0):
        self._channel, self._host_end = socket.socketpair()
        self._buffer = b""
        self.host_fd = self._host_end.fileno()
        self.host_args = ["--fork-server", str(self.host_fd)]
        self._startup_timeout = startup_timeout
        self._startup_deadline: float | None = None
        self.state = "starting"  # then "ready", or why it cannot serve
        self.ended: dict[int, int] = {}  # pid -> returncode, as the server reported them
        self.status_unknown: set[int] = set()  # workers seen ended after the server was gone

    def hosted(self) -> None:
        """The host process has its copy of the server's end; this process closes its own."""
        self._host_end.close()
        self._startup_deadline = time.monotonic() + self._startup_timeout

    @classmethod
    def supported(cls) -> bool:
        return sys.platform.startswith("linux") and hasattr(socket, "send_fds") and hasattr(os, "fork")

    def ready(self) -> bool:
        """Whether it forks workers (waiting for its host's imports the first time)."""
        if self._startup_deadline is None:
            return False  # no host launched yet
        while self.state == "starting":
            line = self._next_line(self._startup_deadline)
            if line is None:
                self._give_up("it did not start in time")
            elif line == "ready":
                self.state = "ready"
            elif line.startswith("unavailable "):
                self._give_up(line.partition(" ")[2])
        return self.state == "ready"

    def fork(self, stdin: int, stdout: int, stderr: int, timeout: float = 10.0) -> int | None:
        """The pid of a new worker on these file descriptors; None when the server cannot fork
        one (the caller then spawns it)."""
        if not self.ready():
            return None
        try:
            socket.send_fds(self._channel, [b"fork"], [stdin, stdout, stderr])
        except OSError as exc:
            self._give_up(f"it no longer answers ({exc})")
            return None
        deadline = time.monotonic() + timeout
        while True:
            line = self._next_line(deadline)
            if line is None:
                self._give_up("it did not fork in time")
                return None
            if line.startswith("pid "):
                return int(line.split()[1])

    def returncode(self, pid: int, timeout: float | None) -> int | None:
        """How worker `pid` ended, waiting up to `timeout` seconds (None: as long as it takes);
        None while it runs."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while pid not in self.ended:
            if self.state not in ("starting", "ready"):
                return self._orphan_returncode(pid, deadline)
            if self._next_line(deadline) is None and deadline is not None and time.monotonic() >= deadline:
                return None
        return self.ended[pid]

    def _orphan_returncode(self, pid: int, deadline: float | None) -> int | None:
        """A worker whose server is gone: its end is seen (it no longer exists), its status is
        not (STATUS_LOST)."""
        while True:
            if _ended(pid):
                self.status_unknown.add(pid)
                return self.ended.setdefault(pid, STATUS_LOST)
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(0.01)

    def _next_line(self, deadline: float | None) -> str | None:
        """The next line from the server, with the workers' ends recorded as they come; None
        at the deadline, or when the server is gone."""
        while b"\n" not in self._buffer:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self._channel], [], [], remaining)
            if not readable:
                return None
            try:
                chunk = self._channel.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self._give_up("it ended")
                return None
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\n")
        line = raw.decode()
        if line.startswith("exit "):
            _, pid, code = line.split()
            self.ended[int(pid)] = int(code)
        return line

    def _give_up(self, reason: str) -> None:
        if self.state in ("starting", "ready"):
            self.state = f"unavailable: {reason}"
            self.close()

    def close(self) -> None:
        """Ends the server (it ends when its socket closes); the workers it forked run on until
        they are closed themselves."""
        self._channel.close()
        if self._startup_deadline is None:
            self._host_end.close()
        if self.state in ("starting", "ready"):
            self.state = "unavailable: closed"


def _ended(pid: int) -> bool:
    """Whether process `pid` has ended: gone, or a zombie that its new parent (init, where no
    other reaper adopts it) has not reaped yet."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")


class ForkedProcess:
    """A worker the fork server forked, with what isolation.Worker uses of subprocess.Popen."""

    def __init__(self, server: ForkServer, pid: int, stdin, stdout):
        self.server, self.pid, self.stdin, self.stdout = server, pid, stdin, stdout
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.server.returncode(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
        return self.returncode

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not reported ended, so its pid is still its own
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    @property
    def status_lost(self) -> bool:
        return self.pid in self.server.status_unknown
