"""The check functions, registered by id; one module per contract family.

A check is a generator: it receives a `CheckContext` and the case's parameters, does real work
on the EP, and yields a `Violation` for each way the contract was broken. Yielding nothing is a
pass. A check that finds the contract does not apply, or cannot run here, raises `NotApplicable`
or `NotRun` with the reason. Checks know nothing of pytest, subprocesses or waivers: the runner
adds the contract, EP and parameters to what they yield.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

CheckFunction = Callable[..., Iterator["Violation"]]
CHECKS: dict[str, CheckFunction] = {}


def check(check_id: str) -> Callable[[CheckFunction], CheckFunction]:
    def register(function: CheckFunction) -> CheckFunction:
        if check_id in CHECKS:
            raise ValueError(f"check '{check_id}' registered twice")
        CHECKS[check_id] = function
        return function

    return register


@dataclass
class Violation:
    message: str
    expected: str = ""
    actual: str = ""
    memory: dict[str, Any] = field(default_factory=dict)
    reproducer: str = ""


class NotApplicable(Exception):
    """The EP does not claim what the contract is about (e.g. an element type it does not take)."""


class NotRun(Exception):
    """The contract applies but cannot run here (hardware absent, API too old, nothing to run)."""


def message_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type where it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def first_line(exc: BaseException) -> str:
    """An exception in one line: its type and the first line of its message."""
    return f"{type(exc).__name__}: {message_line(exc)}" if str(exc).strip() else type(exc).__name__


class ClaimedButUnrunnable(NotRun):
    """The EP claimed nodes of a model in GetCapability, then could not create a kernel for
    them, while the CPU EP alone runs the model: the EP should have declined those nodes so that
    onnxruntime placed them elsewhere. A defect of the EP, which `session.claimed-nodes-run`
    reports as its failure (`violation`); any other check needing that session cannot run."""

    def __init__(self, violation: Violation):
        super().__init__(f"the session could not be created: {violation.message} (the failure of session.claimed-nodes-run)")
        self.violation = violation


def known_checks() -> set[str]:
    load_all()
    return set(CHECKS)


def load_all() -> None:
    # Importing registers. The modules import onnxruntime only inside functions, so the
    # registry is available to spec validation without an onnxruntime installed.
    from conformance.checks import copy, iobinding, lifecycle, memory_info, session, streams, update_inplace  # noqa: F401
