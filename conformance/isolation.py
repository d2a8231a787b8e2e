"""Checks run in a child process with a timeout; a crash or a hang costs one result.

One persistent worker per EP keeps isolation cheap (no interpreter start or onnxruntime import
per check); when it dies or stops answering it is replaced. Requests can be sent ahead in one
batch (`submit`) and their replies taken as they arrive (`collect`), so the worker runs checks
while the caller is busy with the results of earlier ones. The worker answers a batch in order,
so the request running when it crashed or hung is known: that one is lost, the ones queued
behind it are dropped and can be submitted again to its replacement. Ahead of its answer a
request sends progress lines ({"id": ..., "progress": {...}}): the step its check takes and how
to reproduce it, and the risky onnxruntime call it makes next, so a loss still says which call
was in flight and carries a reproducer. Knows nothing of pytest or reports.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conformance.findings import Violation
from conformance.forkserver import ForkedProcess, ForkServer
from conformance.reproduce import kit_snippet

if TYPE_CHECKING:
    from conformance.contracts import Catalogue

TERMINAL_COLOURS = re.compile(r"\x1b\[[0-9;]*m")


def handover(catalogue: Catalogue, recipes: dict[str, Any]) -> dict[str, Any]:
    """The request that hands a worker the catalogue and the recipes this process has read and
    validated (see Runner's `handed`): pickled, since it goes to a child of this process and
    holds the catalogue's frozen objects; a worker started with `"handover": true` in its init
    waits for it once it has imported onnxruntime."""
    import pickle  # here, not at the top: the plugin imports this module before it launches a worker

    data = pickle.dumps({"catalogue": catalogue, "recipes": recipes}, protocol=pickle.HIGHEST_PROTOCOL)
    return {"op": "handover", "data": base64.b64encode(data).decode("ascii")}


class WorkerLost(Exception):
    """The worker crashed or timed out; `outcome` is 'crash' or 'timeout'. `details` say what
    the lost request was doing (once `attribute` has been told), as a result's details do;
    `call` is the onnxruntime call the lost request had in flight (None when it had
    none)."""

    def __init__(self, outcome: str, message: str, *, actual: str, tail: str = "", call: str | None = None):
        super().__init__(message + tail)
        self.outcome = outcome
        self.message, self.actual, self.tail = message, actual, tail
        self.call = call
        self.details: dict[str, Any] = {}

    def attribute(self, note: dict[str, str] | None, fallback: str) -> "WorkerLost":
        """Names the step the request had announced (`note`, sent ahead by the worker) and its
        reproducer; `fallback` reproduces the request where it announced none."""
        step = (note or {}).get("step", "")
        message = self.message + (f" while {step}" if step else "")
        self.args = (message + self.tail,)
        expected = "the call to return, with a result or an error" if self.outcome == "crash" else "the check to finish in time"
        violation = Violation(message, expected, self.actual, reproducer=(note or {}).get("reproducer") or fallback)
        self.details = {**({"step": step} if step else {}), "violations": [asdict(violation)]}
        return self


class WorkerRefused(Exception):
    """The worker answered with an error (e.g. the EP is unavailable); `kind` names it
    (EpUnavailable, SpecErrors, internal) where the worker says."""

    def __init__(self, message: str, kind: str = ""):
        super().__init__(message)
        self.kind = kind

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> "WorkerRefused":
        return cls(reply.get("error", "unknown error"), reply.get("kind", ""))


def _widen_pipe(stream) -> None:
    """Grows the pipe to a worker's stdin to 1 MiB (on Linux, within the system's limit): a
    batch of checks (70 kB for the CPU EP) is then written at once while the worker is busy,
    e.g. importing onnx (models.warm_up), instead of pytest's process waiting for it to read."""
    resize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if resize is None or stream is None:
        return
    try:
        fcntl.fcntl(stream.fileno(), resize, 1 << 20)
    except OSError:
        pass  # past /proc/sys/fs/pipe-max-size: the pipe keeps its size, and writes may wait


def signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class Worker:
    def __init__(self, init: dict[str, Any], *, timeout: float, log: Path | None = None, env: dict[str, str] | None = None,
                 warm_up: bool = False):
        self.init = dict(init, op="init")
        # The first process may warm up after answering init (worker.serve): its caller has
        # other work before the first request. A replacement has requests waiting at once.
        self.warm_up = warm_up
        self.timeout = timeout
        self.log = log
        self.env = env
        # Forks this worker's processes once set and serving (see forkserver.py); else spawned.
        self.fork_server: ForkServer | None = None
        self.hosts: ForkServer | None = None  # a fork server the next spawned process starts
        self.process: subprocess.Popen | ForkedProcess | None = None
        self.facts: dict[str, Any] | None = None
        self._buffer, self._taken = b"", 0  # bytes read from the worker; how many are taken as lines
        self.restarts = 0  # replacements of a worker that crashed, hung or exited
        self._started = False
        self._log_start = 0  # where the running process's output begins in the log
        self._standby: subprocess.Popen | ForkedProcess | None = None  # see stand_by
        self._handover: dict[str, Any] | None = None  # see hand_over
        self._pending: dict[str, str] = {}  # id -> what, in the order the worker runs them
        self._answers: dict[str, dict[str, Any] | Exception] = {}
        self._requests: dict[str | None, dict[str, Any]] = {}  # id (None: a lone request) -> request, until answered
        self._notes: dict[str | None, dict[str, str]] = {}  # id -> its latest step, reproducer and call
        self._progress = 0.0  # when the worker last finished a request (or got work while idle)

    def start(self) -> dict[str, Any]:
        self.launch()
        return self.ready()

    def launch(self) -> None:
        """Starts the process and sends it the init request, without waiting for the answer:
        the worker imports onnxruntime and loads the EP while the caller does other work. A
        process standing by (see stand_by) is taken instead of starting one."""
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
        self._buffer, self._taken = b"", 0
        self._pending.clear()
        self._requests.clear()
        self._notes.clear()
        self.facts = None

    def stand_by(self) -> None:
        """Forks a spare process that starts initialising now and replaces this worker at once
        should it be lost (for requests likely to crash it, such as bad requests). Only where
        the fork server forks it, which makes a spare cheap; once per loss at most."""
        if self._standby is None and self.fork_server is not None and not self.env and self.fork_server.ready():
            self._standby = self._new_process(fork_only=True)
            if self._standby is not None:
                self._introduce(self._standby, self.init)

    def _introduce(self, process, init: dict[str, Any]) -> None:
        """Sends a new process its init, and the handover when it is known already."""
        self._write(process, init)
        if self._handover:
            self._write(process, self._handover)

    def hand_over(self, request: dict[str, Any]) -> None:
        """Gives the worker the `handover` request its init said would follow: sent now to a
        process already started, and after init to every process started from now on."""
        self._handover = request
        for process in (self.process, self._standby):
            if process is not None and process.poll() is None:
                self._write(process, request)

    def _new_process(self, fork_only: bool = False) -> subprocess.Popen | ForkedProcess | None:
        log = open(self.log, "ab") if self.log else subprocess.DEVNULL
        try:
            process = self._forked(log) or (None if fork_only else self._spawned(log))
        finally:
            if self.log:
                log.close()
        if process is not None:
            _widen_pipe(process.stdin)
        return process

    def _spawned(self, log) -> subprocess.Popen:
        command, fds, hosting = [sys.executable, "-m", "conformance.worker"], (), {}
        server, self.hosts = self.hosts, None
        if server:  # see forkserver.py: one OpenBLAS thread, so that the host can fork the server
            command, fds, hosting = command + server.host_args, (server.host_fd,), {"OPENBLAS_NUM_THREADS": "1"}
        env = {**os.environ, **hosting, **(self.env or {})}
        try:
            return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, pass_fds=fds)
        finally:
            if server:
                server.hosted()

    def _forked(self, log) -> ForkedProcess | None:
        """A process forked by the fork server, or None where there is none to fork it (or
        the worker needs an environment of its own, which a fork would not have)."""
        if self.fork_server is None or self.env:
            return None
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        stderr = log.fileno() if self.log else os.open(os.devnull, os.O_WRONLY)
        try:
            pid = self.fork_server.fork(stdin_read, stdout_write, stderr)
        finally:
            for fd in (stdin_read, stdout_write) + (() if self.log else (stderr,)):
                os.close(fd)
        if pid is None:
            os.close(stdin_write)
            os.close(stdout_read)
            return None
        return ForkedProcess(self.fork_server, pid, os.fdopen(stdin_write, "wb"), os.fdopen(stdout_read, "rb"))

    def ready(self) -> dict[str, Any]:
        """The facts the worker answered to init (waiting for them)."""
        timeout = max(self.timeout, 120.0)
        reply = self._receive(time.monotonic() + timeout, timeout, "starting the worker")
        if not reply.get("ok"):
            self._kill()  # a worker without an EP serves nothing; a later request starts afresh
            raise WorkerRefused.from_reply(reply)
        self.facts = reply["facts"]
        return self.facts

    def _ensure_running(self) -> None:
        if self.process is None or self.process.poll() is not None:
            self.start()
        elif self.facts is None:
            self.ready()

    def request(self, message: dict[str, Any], timeout: float | None = None, what: str = "the check") -> dict[str, Any]:
        self._ensure_running()
        return self._exchange(message, timeout or self.timeout, what)

    def _exchange(self, message: dict[str, Any], timeout: float, what: str) -> dict[str, Any]:
        self._requests[None] = message
        self._send(message)
        try:
            reply = self._answer(time.monotonic() + timeout, timeout, what, None)
        except WorkerLost as lost:
            raise self._attributed(lost, None) from None
        finally:
            self._requests.pop(None, None)
            self._notes.pop(None, None)
        if not reply.get("ok"):
            raise WorkerRefused.from_reply(reply)
        return reply

    def submit(self, requests: list[tuple[str, dict[str, Any], str]]) -> None:
        """Sends (id, request, what) ahead in one batch; the worker runs them in order.

        The worker reads a batch only between batches, and a batch may be larger than a pipe's
        buffer: submit to a worker that is idle or new (as the plugin does, once per worker and
        after each replacement), not while it may be blocked writing replies nobody reads."""
        self._ensure_running()
        if not self._pending:
            self._progress = time.monotonic()
        self._pending.update((id_, what) for id_, _, what in requests)
        self._requests.update((id_, request) for id_, request, _ in requests)
        self._send({"op": "batch", "requests": [dict(request, id=id_) for id_, request, _ in requests]})

    def outstanding(self, id_: str) -> bool:
        """Submitted and not yet collected (answered or still queued in the worker)."""
        return id_ in self._pending or id_ in self._answers

    def collect(self, id_: str) -> dict[str, Any] | None:
        """The reply to a submitted request, waiting for it; None when it was dropped because
        the worker was lost running an earlier one (submit it again). Raises WorkerLost when the
        worker crashed or hung running this request, WorkerRefused when it refused it."""
        while id_ not in self._answers and id_ in self._pending:
            self._take_next_answer()
        answer = self._answers.pop(id_, None)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def _take_next_answer(self) -> None:
        running, what = next(iter(self._pending.items()))
        dropped = len(self._pending) > 1  # counted now: a timeout clears the queue as it kills
        try:
            reply = self._answer(self._progress + self.timeout, self.timeout, what, running)
        except WorkerLost as lost:
            self._pending.clear()
            self._answers[running] = self._attributed(lost, running)
            self._requests.clear()
            self._notes.clear()
            if dropped:
                # The requests queued behind the lost one will be submitted again: their
                # replacement worker starts now, while the caller reports the loss.
                self.launch()
            return
        self._progress = time.monotonic()
        id_ = reply.pop("id", running)
        self._pending.pop(id_, None)
        self._requests.pop(id_, None)
        self._notes.pop(id_, None)
        self._answers[id_] = reply if reply.get("ok") else WorkerRefused.from_reply(reply)

    def _answer(self, deadline: float, timeout: float, what: str, running: str | None) -> dict[str, Any]:
        """The next reply that answers a request; the progress a request sends ahead of its
        answer (see CheckContext.attempt and calling) is kept for `_attributed`, and the
        call `running` has in flight names what it was in if the worker is lost."""
        while True:
            reply = self._receive(deadline, timeout, what, self._notes.get(running, {}).get("call"))
            if "progress" not in reply:
                return reply
            self._notes.setdefault(reply.get("id"), {}).update(reply["progress"])

    def _attributed(self, lost: WorkerLost, id_: str | None) -> WorkerLost:
        """`lost`, told what request `id_` was doing: the step and reproducer its check sent
        ahead, else the case run through the kit."""
        request = self._requests.get(id_) or {}
        is_case = request.get("op") == "run" and {"contract", "device", "params"} <= request.keys()
        fallback = kit_snippet(self.init, request["contract"], request["device"], request["params"]) if is_case else ""
        return lost.attribute(self._notes.get(id_), fallback)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process and self.process.stdin
        self._write(self.process, message)

    @staticmethod
    def _write(process, message: dict[str, Any]) -> None:
        try:
            process.stdin.write((json.dumps(message) + "\n").encode())
            process.stdin.flush()
        except BrokenPipeError:
            pass  # the worker is gone; reading will say how it ended

    def _receive(self, deadline: float, timeout: float, what: str, call: str | None = None) -> dict[str, Any]:
        """The next line the worker sends, or WorkerLost when it ended or `deadline` passed;
        `call`: the onnxruntime call the running request has in flight."""
        line = self._read_line(deadline)
        during = f" during {call}" if call else ""
        if line is None:
            self._kill()
            raise WorkerLost("timeout", f"{what} did not finish within {timeout:g} s{f' (stuck in {call})' if call else ''}; "
                                        "the worker was killed and replaced", actual=f"no answer after {timeout:g} s", call=call)
        if line == b"":
            process, self.process = self.process, None
            code = process.wait()
            how = f"killed by {signal_name(code)}" if code < 0 else f"exited with status {code}"
            if isinstance(process, ForkedProcess) and process.status_lost:
                how = "ended, how is unknown: the fork server that could tell is gone"
            ended = f"was {how}" if code < 0 else how
            raise WorkerLost("crash", f"the process running {what} {ended}{during}", actual=how, tail=self._log_tail(), call=call)
        try:
            return json.loads(line)
        except ValueError:
            self._kill()
            raise WorkerLost("crash", f"the process running {what} answered something that is not a reply "
                                      f"({line[:80]!r}); it was killed and replaced", actual="not a reply", call=call) from None

    def _read_line(self, deadline: float) -> bytes | None:
        """One line from the worker; b'' at end of file; None when `deadline` passed."""
        assert self.process and self.process.stdout
        # The worker mostly writes lines faster than they are taken (nine in ten are here
        # already in a CPU run): those are sliced off what was read, without waiting on the pipe
        # and without copying the rest of the buffer for every line.
        end = self._buffer.find(b"\n", self._taken)
        if end < 0:
            self._buffer, self._taken = self._buffer[self._taken:], 0
            fd = self.process.stdout.fileno()
            with selectors.DefaultSelector() as selector:
                selector.register(fd, selectors.EVENT_READ)
                while end < 0:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not selector.select(remaining):
                        return None
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        return b""
                    end = chunk.find(b"\n")
                    if end >= 0:
                        end += len(self._buffer)
                    self._buffer += chunk
        line, self._taken = self._buffer[self._taken:end], end + 1
        return line

    def _log_tail(self, lines: int = 3) -> str:
        if not self.log or not self.log.exists():
            return ""
        with open(self.log, "rb") as log:
            log.seek(self._log_start)
            text = TERMINAL_COLOURS.sub("", log.read().decode(errors="replace"))  # onnxruntime colours its log lines
        tail = [l for l in text.splitlines() if l.strip()][-lines:]
        return ("; its last output: " + " | ".join(tail)) if tail else ""

    def _kill(self) -> None:
        self._pending.clear()
        if self.process:
            self.process.kill()
            self.process.wait()
            self.process = None

    def close(self) -> None:
        self.ask_to_exit()
        if self.process and not self._exited_within(5.0):
            self._kill()
        self.process = None
        if self._standby:
            self._standby.wait()
            self._standby = None

    def _exited_within(self, seconds: float) -> bool:
        """Whether the worker, asked to exit, ended within `seconds`. Its end is seen as the end
        of its replies (the pipe closes when the process does), not by polling for its exit
        status, which rounds each worker's end up to the next poll."""
        deadline = time.monotonic() + seconds
        while self.process.stdout and not self.process.stdout.closed:
            line = self._read_line(deadline)
            if line is None:
                return False
            if line == b"":
                break
        try:
            self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return False
        return True

    def ask_to_exit(self) -> None:
        """Tells the worker to end, without waiting (several workers then end side by side); a
        spare standing by, which nothing will ask for now, is killed."""
        if self._standby and self._standby.poll() is None:
            self._standby.kill()
        if self._pending or self.facts is None:
            self._kill()  # busy with requests nobody will collect, or still starting, unused
        if self.process and self.process.poll() is None and not self.process.stdin.closed:
            try:
                self.process.stdin.write(b'{"op": "exit"}\n')
                self.process.stdin.close()
            except (BrokenPipeError, OSError):
                self._kill()
