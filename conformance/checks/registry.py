"""The registry of checks: each check function under its id, with what a contract naming it must
agree with (the parameters it takes, the onnxruntime APIs it needs).

A leaf of the checks package: the check modules import `check` from here, and the package's
`load_all` imports the check modules, so neither imports the other back.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Iterator

from conformance import apis as api_table
from conformance.findings import Violation

CheckFunction = Callable[..., Iterator[Violation]]


@dataclass(frozen=True)
class Check:
    """A registered check: `params`, the names it takes after the context, in order; `required`,
    those without a default; `apis`, the names (in `conformance.apis`) of the onnxruntime APIs
    it calls. The catalogue's loading compares a contract's `params` with these."""

    id: str
    function: CheckFunction
    params: tuple[str, ...]
    required: frozenset[str]
    apis: tuple[str, ...] = ()


CHECKS: dict[str, Check] = {}


def check(check_id: str, *, apis: tuple[str, ...] = ()) -> Callable[[CheckFunction], CheckFunction]:
    def register(function: CheckFunction) -> CheckFunction:
        if check_id in CHECKS:
            raise ValueError(f"check '{check_id}' registered twice")
        CHECKS[check_id] = signature_of(check_id, function, apis)
        return function

    return register


def signature_of(check_id: str, function: CheckFunction, apis: tuple[str, ...] = ()) -> Check:
    """`function`'s registration: its parameters after the first (the context)."""
    unknown = [name for name in apis if name not in api_table.BY_NAME]
    if unknown:
        raise ValueError(f"check '{check_id}' needs APIs that conformance/apis.py does not list: {', '.join(unknown)}")
    parameters = list(inspect.signature(function).parameters.values())[1:]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY) for p in parameters):
        raise TypeError(f"check '{check_id}': a check takes its parameters by name, each named (no *args, **kwargs or /)")
    return Check(check_id, function, tuple(p.name for p in parameters),
                 frozenset(p.name for p in parameters if p.default is p.empty), tuple(apis))
