"""A worker that answers its requests in this process (`--conformance-isolation none`), behind
the same interface as the real one (`conformance.isolation.controller.Worker`: launch, ready,
submit, outstanding, collect), so that the scheduler and the plugin have one path for both.

It is handed the function that answers a request (the worker process's own
`conformance.engine.serve.Handler.handle`, given by the plugin): this side of the kit never
imports a check, the runner or onnxruntime. A request runs when it is collected, not when it is
submitted: nothing runs beside the caller in this process, so running ahead gains nothing, and a
check pytest never reaches (after -x) is never run. A crash here is the caller's own: it has no
process to lose, so it never raises WorkerLost.
"""

from __future__ import annotations

from typing import Any, Callable

from conformance.facts import EpFacts
from conformance.isolation.controller import WorkerRefused, facts_of

Handle = Callable[[dict[str, Any]], dict[str, Any]]  # a request -> its reply, as the worker process answers it


class InProcessWorker:
    isolates = False  # its requests share the caller's process (Worker.isolates: they do not)

    def __init__(self, init: dict[str, Any], handle: Handle):
        self.init = init  # what starts a worker for this EP, as Worker's init
        self._handle = handle
        self._submitted: dict[str, dict[str, Any]] = {}  # id -> request, submitted and not yet collected
        self.facts: EpFacts | None = None

    def launch(self) -> None:
        """Nothing to start: the EP is loaded by ready(), in this process."""

    def ready(self) -> EpFacts:
        """The facts of the EP, loaded here by the init request; WorkerRefused when it cannot be."""
        self.facts = facts_of(self._answer(dict(self.init, op="init")))
        return self.facts

    def submit(self, requests: list[tuple[str, dict[str, Any], str]]) -> None:
        for id_, request, _ in requests:
            self._submitted[id_] = request

    def outstanding(self, id_: str) -> bool:
        return id_ in self._submitted

    def collect(self, id_: str) -> dict[str, Any] | None:
        """The reply to a submitted request, run now; None when it was not submitted."""
        request = self._submitted.pop(id_, None)
        return None if request is None else self._answer(dict(request, id=id_))

    def stand_by(self) -> None:
        """Nothing to stand by: a request likely to crash a worker never runs here (the scheduler sends it to a real one)."""

    def ask_to_exit(self) -> None:
        self._submitted.clear()

    def close(self) -> None:
        self.ask_to_exit()

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        reply = self._handle(request)
        if not reply.get("ok"):
            raise WorkerRefused.from_reply(reply)
        return reply
