"""What a check can end in, besides a pass: the outcomes a check yields or raises, the helpers
that put an exception into one line, and the reproducer that runs a case through the kit. A leaf
module: it imports only the leaf of the kit's errors, so the registry (`conformance.checks`), the
check context, EP discovery, the worker and the report can all use it without importing one
another."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conformance.errors import KitError, KitException
from conformance.facts import MemoryFacts


@dataclass
class Violation:
    """`subject`: whose defect this violation is, where it is not the contract's own subject:
    "both" when onnxruntime passed a bad request through unchecked and the EP accepted it."""

    message: str
    expected: str = ""
    actual: str = ""
    # The memories the violation involved, by role ("source", "default", ...), as their wire
    # dicts (null: plain CPU memory); a check may hand the records, made wire dicts here.
    memory: dict[str, Any] = field(default_factory=dict)
    reproducer: str = ""
    subject: str = ""

    def __post_init__(self) -> None:
        if any(isinstance(facts, MemoryFacts) for facts in self.memory.values()):
            wire = {role: facts.to_wire() if isinstance(facts, MemoryFacts) else facts for role, facts in self.memory.items()}
            object.__setattr__(self, "memory", wire)


class NotApplicable(KitError):
    """The EP does not claim what the contract is about (e.g. an element type it does not take)."""


class NotRun(KitError):
    """The contract applies but cannot run here (hardware absent, API too old, nothing to run)."""


class ClaimedButUnrunnable(NotRun):
    """The EP claimed nodes of a model in GetCapability, then could not create a kernel for
    them, while the CPU EP alone runs the model: the EP should have declined those nodes so that
    onnxruntime placed them elsewhere. A defect of the EP, which `session.claimed-nodes-run`
    reports as its failure (`violation`); any other check needing that session cannot run."""

    def __init__(self, violation: Violation):
        super().__init__(f"the session could not be created: {violation.message} (the failure of session.claimed-nodes-run)")
        self.violation = violation


class SilentRetry(KitError):
    """A session run that onnxruntime retried on another EP after the EP under test failed it
    (Python's InferenceSession falls back to the CPU EP on an EP failure): the result came from
    elsewhere, so the run is the check's failure (`violation`), naming the EP's error."""

    def __init__(self, violation: Violation):
        super().__init__(violation.message)
        self.violation = violation


class ImpossibleResult(KitError):
    """What an EP call left behind makes no sense: a value the kit made reads back with another
    shape or byte size than it was made with, or a record the kit keeps of its own memory changed
    under it. Only the EP's code (or onnxruntime's, on its behalf) wrote there, so this is the EP's
    failure with the evidence (`violation`), not a defect of the kit: raised where the kit checks
    what it reads before building anything on it, instead of an error from numpy further on."""

    def __init__(self, violation: Violation):
        super().__init__(violation.message)
        self.violation = violation


class CallQuarantined(KitException):
    """A check reached an onnxruntime call that crashed or hung earlier on this EP device; the
    runner records the check as not_run. A BaseException, so that a check catching the EP's
    errors (Exception) cannot take it for the EP refusing the call."""

    def __init__(self, call: object, reason: str):  # call: a conformance.calls.Call
        super().__init__(f"{call}: {reason}")
        self.call = call


def message_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type where it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def first_line(exc: BaseException) -> str:
    """An exception in one line: its type and the first line of its message."""
    return f"{type(exc).__name__}: {message_line(exc)}" if str(exc).strip() else type(exc).__name__


def kit_snippet(init: dict[str, Any], contract: str, device: int, params: dict[str, Any]) -> str:
    """A violation's reproducer where its check said nothing more precise: Python that runs one
    case of `contract` through the kit, with the EP set up as `init` (a worker's init request:
    ep, specs, library, options), and prints its result. Light on purpose (no onnxruntime, numpy
    or onnx): the parent builds it too, for a worker lost before its check said how to
    reproduce what it was doing."""
    arguments = [repr(init["ep"])]
    arguments += [f"{key}={init[key]!r}" for key in ("specs", "library", "options", "soak") if init.get(key)]
    return ("# the case, run by the kit (pip install -e <this repository>)\n"
            "from conformance.engine.runner import Runner\n"
            f"print(Runner({', '.join(arguments)}).run({contract!r}, {device}, {params!r}))")
