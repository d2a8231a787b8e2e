"""What was asked of one worker and not yet answered, or answered and not yet collected.

The worker answers a batch in order, so the first pending request is the one running. What a
request sends ahead of its answer (progress lines: the step its check takes, how to reproduce
it, the onnxruntime call in flight) is kept as its note until it is answered, so that a loss
still says what the request was doing. Knows nothing of processes or pipes.
"""

from __future__ import annotations

import time
from typing import Any

from conformance.calls import Call


# The key of a progress line whose reproducer is the last one sent (engine.serve.SAME_REPRODUCER).
SAME_REPRODUCER = "same_reproducer"


class Ledger:
    """Requests by id (None: a lone request, see isolation.Worker.request), in the order the
    worker runs them, their notes and their answers."""

    def __init__(self):
        self.pending: dict[str, str] = {}  # id -> what, in the order the worker runs them
        self.answers: dict[str, dict[str, Any] | Exception] = {}
        self.requests: dict[str | None, dict[str, Any]] = {}  # id -> request, until answered
        self.notes: dict[str | None, dict[str, Any]] = {}  # id -> its latest step, reproducer and call
        self.progress = 0.0  # when the worker last finished a request (or got work while idle)
        self.reproducer = ""  # the last reproducer a progress line of this process carried

    def clear(self) -> None:
        """A new process: nothing is pending in it."""
        self.pending.clear()
        self.requests.clear()
        self.notes.clear()
        self.reproducer = ""

    def submitted(self, requests: list[tuple[str, dict[str, Any], str]]) -> None:
        if not self.pending:
            self.progress = time.monotonic()
        self.pending.update((id_, what) for id_, _, what in requests)
        self.requests.update((id_, request) for id_, request, _ in requests)

    def outstanding(self, id_: str) -> bool:
        return id_ in self.pending or id_ in self.answers

    def running(self) -> tuple[str, str]:
        """The id of the request the worker runs now, and what it is called."""
        return next(iter(self.pending.items()))

    def note(self, reply: dict[str, Any]) -> None:
        """Keeps a progress line (`{"id": ..., "progress": {...}}`) as its request's note. A
        line that says its reproducer is the one the line before carried (`same_reproducer`,
        see engine.serve.Handler._progress_of) gets that one back."""
        progress = reply["progress"]
        if progress.pop(SAME_REPRODUCER, False):
            progress["reproducer"] = self.reproducer
        elif "reproducer" in progress:
            self.reproducer = progress["reproducer"]
        self.notes.setdefault(reply.get("id"), {}).update(progress)

    def call_of(self, id_: str | None) -> Call | None:
        """The call request `id_` has in flight, from its note."""
        return call_from((self.notes.get(id_) or {}).get("call"))

    def told(self, id_: str | None) -> tuple[dict[str, Any], dict[str, str]]:
        """Request `id_` and what its note says of it besides the call: step and reproducer."""
        note = self.notes.get(id_) or {}
        return self.requests.get(id_) or {}, {key: note[key] for key in ("step", "reproducer") if note.get(key)}

    def answered(self, reply: dict[str, Any], running: str) -> None:
        """Files `reply`, the answer to `running` unless it names another request."""
        self.progress = time.monotonic()
        id_ = reply.pop("id", running)
        self.pending.pop(id_, None)
        self.forget(id_)
        self.answers[id_] = reply

    def lost(self, running: str, loss: Exception) -> None:
        """The worker was lost running `running`: that one's answer is `loss`; the requests
        queued behind it are dropped (to be submitted again)."""
        self.answers[running] = loss
        self.clear()

    def take(self, id_: str) -> dict[str, Any] | Exception | None:
        return self.answers.pop(id_, None)

    def forget(self, id_: str | None) -> None:
        self.requests.pop(id_, None)
        self.notes.pop(id_, None)


def call_from(wire: Any) -> Call | None:
    """The Call a note names (its wire dict, see conformance.calls); None for none."""
    if wire is None:
        return None
    try:
        return Call.from_wire(wire)
    except ValueError:
        return None  # not a call: nothing to blame a loss on
