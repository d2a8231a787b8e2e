"""Runs one case of a contract on one EP device and turns what happened into a result.

Used inside the worker process (and in-process when isolation is off). Knows nothing of pytest,
reports or waivers.
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

from conformance import eps
from conformance.checks import CHECKS, NotApplicable, NotRun, Violation, load_all
from conformance.context import CallQuarantined, CheckContext
from conformance.models import ModelCache
from conformance.outcomes import Outcome
from conformance.spec import load_catalogue


def is_onnxruntime_error(exc: BaseException) -> bool:
    """An error raised by onnxruntime itself (the EP or the runtime refused), as opposed to a
    defect of the kit. onnxruntime raises RuntimeError or its own pybind exception types."""
    return type(exc) is RuntimeError or type(exc).__module__.startswith("onnxruntime") or raised_by_onnxruntime_python(exc)


def raised_by_onnxruntime_python(exc: BaseException) -> bool:
    """Raised by onnxruntime's own Python code (e.g. a ValueError from
    onnxruntime_inference_collection.py refusing a request before any C call): a refusal of the
    runtime. Errors of the C layer (RuntimeError and onnxruntime's pybind types) also surface
    through those Python wrappers, so they are told apart by type."""
    if type(exc) is RuntimeError or type(exc).__module__.startswith("onnxruntime"):
        return False
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return last is not None and f"{os.sep}onnxruntime{os.sep}" in last


class Runner:
    def __init__(self, ep: str, *, specs: list[str] | None = None, library: str | None = None,
                 options: dict[str, str] | None = None, models_dir: str | None = None, schema_checked: bool = False):
        load_all()
        self.catalogue = load_catalogue(specs, known_checks=CHECKS, schema_checked=schema_checked)
        self.target = eps.resolve(ep, self.catalogue, library=library, options=options)
        self.target.facts = eps.describe(self.target)
        self.models = ModelCache(Path(models_dir) if models_dir else None)
        self._contexts: dict[int, CheckContext] = {}

    @property
    def facts(self) -> dict[str, Any]:
        return self.target.facts

    def context(self, device: int) -> CheckContext:
        if device not in self._contexts:
            self._contexts[device] = CheckContext(self.target, device, self.models)
        return self._contexts[device]

    def run(self, contract_id: str, device: int, params: dict[str, Any], quarantined: dict[str, str] | None = None) -> dict[str, Any]:
        """`quarantined`: calls (as CheckContext.announce_call names them) that crashed or hung
        in earlier checks on this device, with why; the check stops before making one."""
        contract = self.catalogue.contract(contract_id)
        started = time.perf_counter()
        context = self.context(device)
        context.quarantined_calls = quarantined or {}
        outcome, message, details = self._run(CHECKS[contract.check], context, params)
        return {"outcome": outcome.value, "message": message, "details": details, "duration": time.perf_counter() - started}

    def _run(self, function, ctx: CheckContext, params: dict[str, Any]) -> tuple[Outcome, str, dict[str, Any]]:
        violations: list[Violation] = []
        details: dict[str, Any] = {}
        try:
            for violation in function(ctx, **params):
                violations.append(violation)
        except CallQuarantined as stop:
            if not violations:
                return Outcome.NOT_RUN, f"stopped before {stop}", {"quarantined_call": stop.call}
            violations.append(Violation(f"the check stopped after that, before {stop}"))
        except (NotApplicable, NotRun) as exc:
            if not violations:
                outcome = Outcome.NOT_APPLICABLE if isinstance(exc, NotApplicable) else Outcome.NOT_RUN
                return outcome, str(exc), {}
            # What was already found stands; the check stopped early for the reason given.
            violations.append(Violation(f"the check stopped after that: {exc}"))
        except Exception as exc:
            if not is_onnxruntime_error(exc):
                return Outcome.ERROR, f"the kit failed: {type(exc).__name__}: {exc}", {"traceback": traceback.format_exc(limit=-4)}
            if raised_by_onnxruntime_python(exc):
                # Refused by onnxruntime's Python layer before the EP was asked: a finding
                # against onnxruntime, whoever's promise the contract is.
                details["subject"] = "runtime"
                violations.append(Violation(f"onnxruntime's Python layer refused: {type(exc).__name__}: {exc}"))
            else:
                violations.append(Violation(f"onnxruntime raised {type(exc).__name__}: {exc}".strip()))
        if not violations:
            return Outcome.PASS, "", {}
        message = violations[0].message + (f" (and {len(violations) - 1} more)" if len(violations) > 1 else "")
        return Outcome.FAIL, message, {**details, "violations": [asdict(v) for v in violations]}
