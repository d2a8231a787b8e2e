"""Which check a lost worker costs, and how to reproduce it: the parent's side of a crash or hang.

isolation says what happened to the process (conformance.isolation.controller.WorkerLost: how it ended,
the call in flight, the request it was running and what that request announced); this module
turns that into the result of the check the request ran, as pytest-xdist's controller turns a
crashed worker into an ordinary failed report. Knows nothing of pytest.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from conformance.findings import Violation, kit_snippet
from conformance.isolation.controller import WorkerLost, WorkerRefused
from conformance.outcomes import CaseReply, Details, Outcome

EXPECTED = {"crash": "the call to return, with a result or an error", "timeout": "the check to finish in time"}


def outcome_of(reply_of: Callable[[], dict[str, Any]]) -> CaseReply:
    """The outcome of a check from its reply (`reply_of()`, the wire dict), or from how its worker was lost."""
    try:
        reply = reply_of()
    except WorkerLost as lost:
        return CaseReply(Outcome(lost.outcome), message_of(lost), details_of(lost))
    except WorkerRefused as exc:
        return CaseReply(Outcome.ERROR, f"the worker refused the request: {exc}")
    return CaseReply.from_wire(reply)


def message_of(lost: WorkerLost) -> str:
    """What happened, with the step the lost request had announced, and the process's last output."""
    return _headline(lost) + lost.tail


def details_of(lost: WorkerLost) -> Details:
    """A result's details: the step, the violation (expected, actual, reproducer), the call in
    flight, and the machine's event the loss may be (`machine`, which conformance.run.reruns
    weighs against the next try); none but the call and the event for a worker lost before it
    ran a request."""
    known = Details(call=lost.call, machine=lost.machine)
    if lost.request is None:
        return known
    violation = Violation(_headline(lost), EXPECTED[lost.outcome], lost.actual, reproducer=lost.note.get("reproducer") or _kit_reproducer(lost))
    return dataclasses.replace(known, step=lost.note.get("step", ""), violations=(violation,))


def _headline(lost: WorkerLost) -> str:
    step = lost.note.get("step", "")
    return lost.message + (f" while {step}" if step else "")


def _kit_reproducer(lost: WorkerLost) -> str:
    """The case run through the kit, for a request that ran a case and announced no reproducer."""
    request = lost.request or {}
    if request.get("op") != "run" or not {"contract", "device", "params"} <= request.keys():
        return ""
    return kit_snippet(lost.init, request["contract"], request["device"], request["params"])
