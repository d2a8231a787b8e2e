"""The check functions, registered by id; one module per contract family.

A check is a generator: it receives a `CheckContext` and the case's parameters, does real work
on the EP, and yields a `Violation` for each way the contract was broken. Yielding nothing is a
pass if the check recorded what it proved (`ctx.prove`, `ctx.tally`, `ctx.compare`: bytes
compared, memory infos seen, nodes that ran on the EP); the runner makes a pass that recorded
nothing an error. A case that cannot prove its statement on the EP is not a pass: a check that
finds the contract does not apply (or cannot be shown here), or cannot run here, raises
`NotApplicable` or `NotRun` with the reason (both from `conformance.findings`). Checks know nothing of pytest,
subprocesses or waivers: the runner adds the contract, EP and parameters to what they yield.

The registry itself is `conformance.checks.registry`; this package finds the check modules
(`load_all`) and loads them into it.
"""

from __future__ import annotations

import importlib
import pkgutil

from conformance.checks.registry import CHECKS, Check, check  # noqa: F401


def known_checks() -> dict[str, Check]:
    """Every check, by id, with the parameters and APIs it was registered with."""
    load_all()
    return CHECKS


def load_all() -> None:
    """Every family registered: each module of this package is imported once, which registers
    its checks (`@check`). Discovered, not listed: a new family is its module and nothing else.
    The subpackage `context` is what checks work with, not a family. The modules import
    onnxruntime only inside functions, so the registry is available to spec validation without
    an onnxruntime installed."""
    for module in pkgutil.iter_modules(__path__):
        if not module.ispkg:
            importlib.import_module(f"{__name__}.{module.name}")
