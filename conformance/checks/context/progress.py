"""What the running check is doing: the step it announced, its reproducer, and the risky call in
flight, passed on to the worker before each is made; and the calls it must not make."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from conformance.calls import Call
from conformance.findings import CallQuarantined, ImpossibleResult, NotApplicable, NotRun

Progress = Callable[[dict[str, Any]], None]


class CallGuard:
    def __init__(self) -> None:
        self.step = ""  # what the running check does now, in words
        self.reproducer = ""  # how to reproduce it
        self.quarantined: dict[Call, str] = {}  # call -> why it must not be made again on this device
        self._call: Call | None = None  # the risky call in flight (see calling)
        self._on_progress: Progress | None = None
        self._sent = ""  # the reproducer last passed on (a script is kilobytes: it is sent when it changes)

    def begin(self, on_progress: Progress | None = None, quarantined: list[dict[str, Any]] | None = None) -> None:
        """A new check starts: it has said nothing yet; `on_progress` hears each `attempt`, and
        each call as it starts and returns (see calling); `quarantined`: the calls it must not
        make, as the request carries them (`[{"call": <Call wire dict>, "reason": ...}]`)."""
        self.step, self.reproducer, self._call, self._on_progress, self._sent = "", "", None, on_progress, ""
        self.quarantined = {Call.from_wire(entry["call"]): entry["reason"] for entry in quarantined or ()}

    def attempt(self, step: str, reproducer: str | None = None) -> None:
        """Says what the check does next, and how to reproduce it, before doing it. A call that
        kills the process or hangs leaves no answer: the worker passes this on at once
        (`on_progress`), so the parent still knows the step and the reproducer; a call that
        raises is reported with them. The reproducer stands until the next one is given."""
        self.step = step
        if reproducer is not None:
            self.reproducer = reproducer
        if self._on_progress is not None:
            # The parent keeps a request's progress as one note, updated key by key: a
            # reproducer it already has is not sent again.
            changed = {"reproducer": self.reproducer} if self.reproducer != self._sent else {}
            self._sent = self.reproducer
            self._on_progress({"step": self.step, **changed})

    @contextlib.contextmanager
    def calling(self, call: Call) -> Iterator[None]:
        """Around a risky onnxruntime call on this EP device (`Call("copy_tensors", "cpu>default")`,
        `Call("InferenceSession creation")`, ...): raises CallQuarantined instead when that call
        crashed or hung in an earlier check. The call is passed on (`on_progress`, as its wire
        dict) before it is made and again when it has returned, so that the parent knows which
        call was in flight when the EP aborts or hangs, and blames no call for a loss after it
        returned. A call made within another is part of it: the outer one names what is in
        flight (and a timed loop of calls sends nothing)."""
        reason = self.quarantined.get(call)
        if reason is not None:
            raise CallQuarantined(str(call), reason)
        if self._call is not None:
            yield
            return
        self._in_flight(call)
        try:
            yield
        finally:
            self._in_flight(None)

    def _in_flight(self, call: Call | None) -> None:
        self._call = call
        if self._on_progress is not None:
            self._on_progress({"call": call.to_wire() if call is not None else None})

    @contextlib.contextmanager
    def precondition(self, what: str) -> Iterator[None]:
        """A step that must work for the check to mean anything (e.g. placing valid values on
        the device before a bad request is tried): if onnxruntime fails there, the contract
        under test was not reached, so the case is not_run, not a failure of that contract."""
        try:
            yield
        except (NotApplicable, NotRun, ImpossibleResult):
            raise  # an impossible result of the EP's is its failure, not a set-up that could not be made
        except Exception as exc:
            raise NotRun(f"{what} failed, so the contract could not be tried: {type(exc).__name__}: {exc}") from None
