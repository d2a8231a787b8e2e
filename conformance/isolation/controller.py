"""Checks run in a child process with a timeout; a crash or a hang costs one result.

One persistent worker per EP keeps isolation cheap (no interpreter start or onnxruntime import
per check); when it dies or stops answering it is replaced. Requests can be sent ahead in one
batch (`submit`) and their replies taken as they arrive (`collect`), so the worker runs checks
while the caller is busy with the results of earlier ones. The worker answers a batch in order,
so the request running when it crashed or hung is known: that one is lost, the ones queued
behind it are dropped and can be submitted again to its replacement. Ahead of its answer a
request sends progress lines ({"id": ..., "progress": {...}}): the step its check takes and how
to reproduce it, and the risky onnxruntime call it makes next (a Call's wire dict), so a loss
still says which call was in flight and what the request was doing. Which check a loss costs,
and how to reproduce it, the caller decides (conformance.run.attribution). Knows nothing of pytest,
reports or checks.

`Worker` ties three parts: the process and its spare (conformance.isolation.launcher), the JSON lines over
its pipes (conformance.isolation.lines) and the requests it owes answers to (conformance.isolation.ledger).
"""

from __future__ import annotations

import base64
import json
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from conformance.calls import Call
from conformance.isolation.launcher import Launcher, seen_at_timeout
from conformance.isolation.ledger import Ledger
from conformance.errors import KitError, SpecError
from conformance.facts import EpFacts
from conformance.outcomes import MachineEvent

if TYPE_CHECKING:
    from conformance.catalogue.contracts import Catalogue
    from conformance.isolation.lines import LineChannel


def handover(catalogue: Catalogue, recipes: dict[str, Any]) -> dict[str, Any]:
    """The request that hands a worker the catalogue and the recipes this process has read and
    validated (see Runner's `handed`): pickled, since it goes to a child of this process and
    holds the catalogue's frozen objects; a worker started with `"handover": true` in its init
    waits for it once it has imported onnxruntime."""
    import pickle  # here, not at the top: the plugin imports this module before it launches a worker

    data = pickle.dumps({"catalogue": catalogue, "recipes": recipes}, protocol=pickle.HIGHEST_PROTOCOL)
    return {"op": "handover", "data": base64.b64encode(data).decode("ascii")}


# The least a worker's start is given, whatever --conformance-timeout: an interpreter start and
# onnxruntime's import take seconds on a busy machine. A library that hangs as it loads costs
# the larger of the two, not the two minutes a start was once given.
START_SECONDS = 10.0


class WorkerLost(KitError):
    """The worker crashed or timed out, as facts: `outcome` ('crash' or 'timeout'), `message`
    (what happened to the process), `actual` (the same, short), `tail` (its last output), `call`
    (the onnxruntime call the lost request had in flight, None when it had none), `machine` (the
    machine's event it may have been: killed by a SIGKILL the kit did not send, or stopped when
    its time ran out; None for none); once the worker has said which request it lost
    (`concerning`), that `request` ({} for none known), the `note` it sent ahead (its step and
    reproducer) and the worker's `init`."""

    def __init__(self, outcome: str, message: str, *, actual: str, tail: str = "", call: Call | None = None,
                 machine: MachineEvent | None = None):
        super().__init__(message + tail)
        self.outcome = outcome
        self.message, self.actual, self.tail = message, actual, tail
        self.call = call
        self.machine = machine
        self.request: dict[str, Any] | None = None  # None: lost before it ran any request (starting)
        self.note: dict[str, str] = {}
        self.init: dict[str, Any] = {}

    @classmethod
    def timed_out(cls, what: str, timeout: float, call: Call | None, machine: MachineEvent | None = None) -> "WorkerLost":
        """`machine`: what showed, at the deadline, that the worker could not have finished whatever
        its EP did (launcher.seen_at_timeout): stopped by a signal, or kept from a CPU by other
        processes. Either makes the loss the machine's event, until the next try repeats it."""
        stuck = f" (stuck in {call})" if call else ""
        if machine is not None:
            was = "stopped" if machine.kind == MachineEvent.STOPPED else "kept waiting for a CPU"
            return cls("timeout", f"{what} did not finish within {timeout:g} s{stuck}: the worker was {was} ({machine.evidence}); "
                                  "it was killed and replaced", actual=f"{was}, no answer after {timeout:g} s", call=call, machine=machine)
        return cls("timeout", f"{what} did not finish within {timeout:g} s{stuck}; "
                              "the worker was killed and replaced", actual=f"no answer after {timeout:g} s", call=call)

    @classmethod
    def garbled(cls, what: str, line: bytes, call: Call | None) -> "WorkerLost":
        return cls("crash", f"the process running {what} answered something that is not a reply "
                            f"({line[:80]!r}); it was killed and replaced", actual="not a reply", call=call)

    def concerning(self, request: dict[str, Any], note: dict[str, str], init: dict[str, Any]) -> "WorkerLost":
        self.request, self.note, self.init = request, note, init
        return self


class WorkerRefused(KitError):
    """The worker answered with an error (e.g. the EP is unavailable); `kind` names it
    (EpUnavailable, SpecErrors, internal) where the worker says; `errors`: the spec errors it
    found, as data (their wire dicts in the reply), never to be parsed back from the message."""

    def __init__(self, message: str, kind: str = "", errors: tuple[SpecError, ...] = ()):
        super().__init__(message)
        self.kind = kind
        self.errors = errors

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> "WorkerRefused":
        errors = tuple(SpecError.from_wire(error) for error in reply.get("errors", ()))
        return cls(reply.get("error", "unknown error"), reply.get("kind", ""), errors)


def facts_of(reply: dict[str, Any]) -> EpFacts:
    """The EP's facts an init reply carries, as the record; WorkerRefused where it carries none."""
    facts = EpFacts.from_wire(reply.get("facts"))
    if facts is None:
        raise WorkerRefused(f"the worker answered init without the EP's facts: {reply!r:.200}", "internal")
    return facts


# A reply line's decoder, made once: json.loads takes bytes through its encoding detection and a
# check of its arguments on every call.
_decode = json.JSONDecoder().decode


def _decoded(line: bytes, garbled: Callable[[bytes], Exception]) -> dict[str, Any]:
    """The message `line` holds; what `garbled` makes of it when it is not one, raised. Most
    lines of a busy run (five a case) were read with the line before: Worker._answer decodes
    those without setting up a wait, and looks up the call in flight only for a wait or a loss
    (10 000 cases: 50 000 lines, each of which built both)."""
    try:
        return _decode(line.decode())
    except ValueError:  # UnicodeDecodeError is one
        raise garbled(line) from None


def _garbled(worker: "Worker", what: str, line: bytes, call: Call | None) -> WorkerLost:
    """A line that is no message: the worker is killed (what it says next cannot be trusted either)."""
    worker._kill()
    return WorkerLost.garbled(what, line, call)


# How long a request's reply may take before the caller hears that it is waited for (on_wait),
# and how often after that: a hang is seen moving long before its timeout, and a normal run,
# whose replies come within milliseconds, hears nothing.
WAIT_NOTICE_AFTER = 3.0
WAIT_NOTICE_EVERY = 5.0


@dataclass(frozen=True)
class Waiting:
    """A reply waited for: `what` (the request, 'copy.roundtrip-exact on refdev'), the call it
    has in flight (None before it announced one), seconds waited of `timeout`."""

    what: str
    call: Call | None
    waited: float
    timeout: float

    def __str__(self) -> str:
        on = f"{self.call} in {self.what}" if self.call else self.what
        return f"waiting on {on}: {self.waited:.0f} s of {self.timeout:g}"


def read_line_telling(channel: LineChannel, deadline: float, waiting: Waiting, on_wait: Callable[[Waiting], None] | None) -> bytes | None:
    """`channel`'s next line; `on_wait` (if any) is told `waiting`, with the seconds waited,
    WAIT_NOTICE_AFTER into the wait and every WAIT_NOTICE_EVERY after. The times count from the
    wait's start (`deadline` - its timeout), not from this read: a progress line read meanwhile
    moves no notice."""
    if on_wait is None:
        return channel.read_line(deadline)
    start = deadline - waiting.timeout
    while True:
        waited = time.monotonic() - start
        steps = 0 if waited < WAIT_NOTICE_AFTER else math.floor((waited - WAIT_NOTICE_AFTER) / WAIT_NOTICE_EVERY) + 1
        line = channel.read_line(min(deadline, start + WAIT_NOTICE_AFTER + steps * WAIT_NOTICE_EVERY))
        if line is not None or time.monotonic() >= deadline:
            return line
        on_wait(replace(waiting, waited=time.monotonic() - start))


def _noted(ledger: Ledger, reply: dict[str, Any], deadline: float, timeout: float) -> float:
    """Keeps a progress line as its request's note; the request's deadline after it: a step
    announced (CheckContext.attempt) gives `timeout` seconds from now, so that a stress check's
    long loop that announces its step every second runs on; a call in flight gives none, so a
    check stuck in one call is killed `timeout` seconds after its last step."""
    ledger.note(reply)
    return max(deadline, time.monotonic() + timeout) if "step" in reply["progress"] else deadline


def _launch(launcher: Launcher) -> None:
    """launcher.launch(), a process that cannot even be executed (its wrapper, or the
    interpreter) being a worker lost at its start."""
    try:
        launcher.launch()
    except OSError as exc:
        raise WorkerLost("crash", f"the worker could not be started ({' '.join(launcher.wrapper + (sys.executable,))}): {exc.strerror or exc}",
                         actual="not started") from None


class _Launchers:
    """An attribute of Worker that is its launcher's (init, process, fork_server, ...), methods
    too."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, worker, owner=None):
        return self if worker is None else getattr(worker._launcher, self.name)

    def __set__(self, worker, value) -> None:
        setattr(worker._launcher, self.name, value)


class Worker:
    isolates = True  # its requests run in a process of their own (in_process.InProcessWorker: they do not)
    init = _Launchers()
    log = _Launchers()
    fork_server = _Launchers()  # forks this worker's processes once set and serving; else spawned
    hosts = _Launchers()  # a fork server the next spawned process starts
    process = _Launchers()
    restarts = _Launchers()
    stand_by = _Launchers()  # a spare for requests likely to crash the worker
    hand_over = _Launchers()  # what every process gets after init

    def __init__(self, init: dict[str, Any], *, timeout: float, log: Path | None = None, env: dict[str, str] | None = None,
                 warm_up: bool = False, on_wait: Callable[[Waiting], None] | None = None, wrapper: tuple[str, ...] = ()):
        self._launcher = Launcher(dict(init, op="init"), log=log, env=env, warm_up=warm_up, wrapper=wrapper)
        self._ledger = Ledger()
        self.timeout, self.on_wait = timeout, on_wait  # on_wait: hears a slow reply to a request (see Waiting)
        self.facts: EpFacts | None = None

    def start(self) -> EpFacts:
        self.launch()
        return self.ready()

    def launch(self) -> None:
        """Starts the process and sends it the init request, without waiting for the answer:
        the worker imports onnxruntime and loads the EP while the caller does other work. A
        process standing by (see stand_by) is taken instead of starting one."""
        _launch(self._launcher)
        self._ledger.clear()
        self.facts = None

    def ready(self) -> EpFacts:
        """The facts the worker answered to init, waiting as long as a check may take (START_SECONDS at least): it loads the EP library."""
        timeout = max(self.timeout, START_SECONDS)
        reply = self._receive(time.monotonic() + timeout, timeout, "starting the worker")
        if not reply.get("ok"):
            self._kill()  # a worker without an EP serves nothing; a later request starts afresh
            raise WorkerRefused.from_reply(reply)
        self.facts = facts_of(reply)
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
        self._ledger.requests[None] = message
        self._launcher.channel.send(message)
        try:
            reply = self._answer(time.monotonic() + timeout, timeout, what, None)
        except WorkerLost as lost:
            raise self._concerning(lost, None) from None
        finally:
            self._ledger.forget(None)
        if not reply.get("ok"):
            raise WorkerRefused.from_reply(reply)
        return reply

    def submit(self, requests: list[tuple[str, dict[str, Any], str]]) -> None:
        """Sends (id, request, what) ahead in one batch; the worker runs them in order.

        The worker reads a batch only between batches, and a batch may be larger than a pipe's
        buffer: submit to a worker that is idle or new (as the plugin does, once per worker and
        after each replacement), not while it may be blocked writing replies nobody reads."""
        self._ensure_running()
        self._ledger.submitted(requests)
        self._launcher.channel.send({"op": "batch", "requests": [dict(request, id=id_) for id_, request, _ in requests]})

    def outstanding(self, id_: str) -> bool:
        """Submitted and not yet collected (answered or still queued in the worker)."""
        return self._ledger.outstanding(id_)

    def collect(self, id_: str) -> dict[str, Any] | None:
        """The reply to a submitted request, waiting for it; None when it was dropped because
        the worker was lost running an earlier one (submit it again). Raises WorkerLost when the
        worker crashed or hung running this request, WorkerRefused when it refused it."""
        while id_ not in self._ledger.answers and id_ in self._ledger.pending:
            self._take_next_answer()
        answer = self._ledger.take(id_)
        if isinstance(answer, Exception):
            raise answer
        if answer is not None and not answer.get("ok"):
            raise WorkerRefused.from_reply(answer)
        return answer

    def _take_next_answer(self) -> None:
        running, what = self._ledger.running()
        dropped = len(self._ledger.pending) > 1  # counted now: a timeout clears the queue as it kills
        try:
            reply = self._answer(self._ledger.progress + self.timeout, self.timeout, what, running)
        except WorkerLost as lost:
            self._ledger.lost(running, self._concerning(lost, running))
            if dropped:
                # The requests queued behind the lost one will be submitted again: their
                # replacement worker starts now, while the caller reports the loss.
                self.launch()
            return
        self._ledger.answered(reply, running)

    def _answer(self, deadline: float, timeout: float, what: str, running: str | None) -> dict[str, Any]:
        """The next reply that answers a request; the progress a request sends ahead of its
        answer (see CheckContext.attempt and calling) is kept as its note, and the call
        `running` has in flight names what it was in if the worker is lost."""
        while True:
            line = self._launcher.channel.buffered_line()  # read with the line before: no wait to set up (see _decoded)
            reply = (_decoded(line, lambda bad: _garbled(self, what, bad, self._ledger.call_of(running))) if line is not None
                     else self._receive(deadline, timeout, what, self._ledger.call_of(running), self.on_wait))
            if "progress" not in reply:
                return reply
            deadline = _noted(self._ledger, reply, deadline, timeout)

    def _concerning(self, lost: WorkerLost, id_: str | None) -> WorkerLost:
        """`lost`, told which request it cost: `id_`'s request and the note it sent ahead."""
        request, note = self._ledger.told(id_)
        return lost.concerning(request, note, self.init)

    def _receive(self, deadline: float, timeout: float, what: str, call: Call | None = None, on_wait=None) -> dict[str, Any]:
        """The next line the worker sends, or WorkerLost when it ended or `deadline` passed;
        `call`: the call the running request has in flight; `on_wait`: hears that it waits."""
        line = read_line_telling(self._launcher.channel, deadline, Waiting(what, call, 0.0, timeout), on_wait)
        if line is None:  # hung, stopped from outside or starved of CPU: what the kit sees before the kill tells which
            machine = seen_at_timeout(self._launcher.process, timeout)
            self._kill()
            raise WorkerLost.timed_out(what, timeout, call, machine)
        if line == b"":
            how, ended, killed = self._launcher.reap()
            raise WorkerLost("crash", f"the process running {what} {ended}{f' during {call}' if call else ''}", actual=how,
                             tail=self._launcher.log_tail(), call=call, machine=killed)
        return _decoded(line, lambda bad: _garbled(self, what, bad, call))

    def _kill(self) -> None:
        """Kills the process, dropping what it owed."""
        self._ledger.pending.clear()
        self._launcher.kill()

    def close(self) -> None:
        self.ask_to_exit()
        self._launcher.close()

    def ask_to_exit(self) -> None:
        """Tells the worker to end, without waiting (several workers then end side by side); a
        spare standing by, which nothing will ask for now, is killed."""
        if self._ledger.pending or self.facts is None:
            self._kill()  # busy with requests nobody will collect, or still starting, unused
        self._launcher.ask_to_exit()
