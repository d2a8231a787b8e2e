"""The check functions, registered by id; one module per contract family.

A check is a generator: it receives a `CheckContext` and the case's parameters, does real work
on the EP, and yields a `Violation` for each way the contract was broken. Yielding nothing is a
pass. A check that finds the contract does not apply, or cannot run here, raises `NotApplicable`
or `NotRun` with the reason. Checks know nothing of pytest, subprocesses or waivers: the runner
adds the contract, EP and parameters to what they yield.
"""

from __future__ import annotations

from typing import Callable, Iterator

# The outcomes a check yields or raises live in a leaf module; they are re-exported here for the
# checks, which import them with the registry.
from conformance.findings import ClaimedButUnrunnable, NotApplicable, NotRun, Violation, first_line, message_line  # noqa: F401

CheckFunction = Callable[..., Iterator["Violation"]]
CHECKS: dict[str, CheckFunction] = {}


def check(check_id: str) -> Callable[[CheckFunction], CheckFunction]:
    def register(function: CheckFunction) -> CheckFunction:
        if check_id in CHECKS:
            raise ValueError(f"check '{check_id}' registered twice")
        CHECKS[check_id] = function
        return function

    return register


def known_checks() -> set[str]:
    load_all()
    return set(CHECKS)


def load_all() -> None:
    # Importing registers. The modules import onnxruntime only inside functions, so the
    # registry is available to spec validation without an onnxruntime installed.
    from conformance.checks import copy, interop, iobinding, lifecycle, memory_info, session, streams, update_inplace  # noqa: F401
