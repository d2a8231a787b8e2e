"""Runs one case of a contract on one EP device and turns what happened into a result.

Used inside the worker process (and in-process when isolation is off). Knows nothing of pytest,
reports or waivers.
"""

from __future__ import annotations

import os
import time
import dataclasses
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable

from conformance.testbed import eps
from conformance.checks import CHECKS, load_all
from conformance.checks.context import CheckContext
from conformance.checks.context.load import Load
from conformance.findings import CallQuarantined, ImpossibleResult, NotApplicable, NotRun, SilentRetry, Violation, first_line, kit_snippet
from conformance.catalogue import selectors
from conformance.catalogue.contracts import Catalogue
from conformance.testbed.models import ModelCache, recipes_from
from conformance.outcomes import Details, Outcome
from conformance import proofs
from conformance.catalogue.cross_checks import unknown_checks
from conformance.catalogue.spec import load_catalogue
from conformance.errors import SpecErrors
from conformance.facts import EpFacts


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


NO_EVIDENCE = "the check passed without recording what it proved"

Handed = Callable[[], tuple[Catalogue, dict[str, Any]]]  # gives the catalogue and the recipes file as parsed


class Runner:
    def __init__(self, ep: str, *, specs: list[str] | None = None, library: str | None = None,
                 options: dict[str, str] | None = None, models_dir: str | None = None, handed: Handed | None = None, soak: float = 0.0,
                 models_record: str | None = None):
        """`handed`: the catalogue of `specs` and the recipes, as the pytest process read and
        validated them, instead of reading them again here. It is called once onnxruntime is
        imported, so that a worker imports it while the pytest process is still reading them."""
        load_all()
        self.init = {"ep": ep, "specs": specs, "library": library, "options": options, "soak": soak}  # what a reproducer must set up
        self.load = Load(soak)  # how hard the stress tier pushes (--conformance-soak)
        recipes = None
        if handed is None:
            self.catalogue = load_catalogue(specs, known_checks=CHECKS)
        else:
            eps.import_onnxruntime()
            self.catalogue, raw_recipes = handed()
            recipes = recipes_from(raw_recipes)
            errors = unknown_checks(self.catalogue.contracts, CHECKS)  # the one check the pytest process cannot make
            if errors:
                raise SpecErrors(errors)
        self.target = eps.resolve(ep, self.catalogue, library=library, options=options)
        self.target.facts = eps.describe(self.target)
        # models_record: the file that lists the models this run used (its report folder's models-used.txt)
        self.models = ModelCache(Path(models_dir) if models_dir else None, recipes, Path(models_record) if models_record else None)
        self._contexts: dict[int, CheckContext] = {}

    @property
    def facts(self) -> EpFacts:
        assert self.target.facts is not None, "described in __init__"
        return self.target.facts

    def context(self, device: int) -> CheckContext:
        if device not in self._contexts:
            self._contexts[device] = CheckContext(self.target, device, self.models, self.load)
        return self._contexts[device]

    def run(self, contract_id: str, device: int, params: dict[str, Any], progress: Callable[[dict[str, Any]], None] | None = None,
            quarantined: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """One case; `progress` hears each step the check announces before taking it, and each
        call it makes (as the call's wire dict). `quarantined`: the request's list of calls that
        crashed or hung in earlier checks on this device, `[{"call": <Call wire dict>, "reason":
        ...}]`; the check stops before making one."""
        contract = self.catalogue.contract(contract_id)
        ctx = self.context(device)
        ctx.begin(progress, quarantined)
        ctx.contested_rule_holds = contract.contested is not None and selectors.selects(
            contract.contested.where, self.facts, self.facts.devices[device])
        started = time.perf_counter()
        outcome, message, details = self._run(CHECKS[contract.check].function, ctx, params)
        subject = case_subject(contract.subject, ctx, details)
        if subject:
            details = dataclasses.replace(details, subject=subject, subject_reason=PLAIN_CPU_CASE)
        if outcome is Outcome.FAIL:
            _complete(details.violations, ctx.reproducer or kit_snippet(self.init, contract_id, device, params))
        return {"outcome": outcome.value, "message": message, "details": details.to_wire(), "duration": time.perf_counter() - started}

    def _run(self, function, ctx: CheckContext, params: dict[str, Any]) -> tuple[Outcome, str, Details]:
        violations: list[Violation] = []
        subject = ""
        try:
            for violation in function(ctx, **params):
                violations.append(violation)
        except CallQuarantined as stop:
            if not violations:
                return Outcome.NOT_RUN, f"stopped before {stop}", Details(quarantined_call=str(stop.call))
            violations.append(Violation(f"the check stopped after that, before {stop}"))
        except SilentRetry as retry:
            # The result came from another EP: the check's own verdict on it means nothing.
            violations.append(retry.violation)
        except ImpossibleResult as impossible:
            # A shape, size or record the EP's call left impossible: the EP's failure, whatever
            # the contract's subject (the kit checked it before using it).
            impossible.violation.subject = impossible.violation.subject or "ep"
            violations.append(impossible.violation)
        except (NotApplicable, NotRun) as exc:
            if not violations:
                outcome = Outcome.NOT_APPLICABLE if isinstance(exc, NotApplicable) else Outcome.NOT_RUN
                return outcome, str(exc), Details()
            # What was already found stands; the check stopped early for the reason given.
            violations.append(Violation(f"the check stopped after that: {exc}", expected="the check to go on", actual=str(exc)))
        except Exception as exc:
            if not is_onnxruntime_error(exc):
                return Outcome.ERROR, f"the kit failed: {type(exc).__name__}: {exc}", Details(traceback=traceback.format_exc(limit=-4))
            if raised_by_onnxruntime_python(exc):
                # Refused by onnxruntime's Python layer before the EP was asked: a finding
                # against onnxruntime, whoever's promise the contract is.
                subject = "runtime"
                violations.append(_raised(ctx, exc, "onnxruntime's Python layer refused"))
            else:
                violations.append(_raised(ctx, exc, "onnxruntime raised"))
        # Whatever the check itself found, a write past a host buffer it handed out is a failure.
        guarded = len(ctx.memories.guarded)
        violations += ctx.memories.overruns()
        evidence = ctx.evidence.proven()
        if evidence and guarded:
            evidence = evidence.plus(proofs.HOST_BUFFERS_GUARDED, guarded)  # besides what the check proved, never instead of it
        if not violations:
            if not evidence:
                # A pass states what it proved; one that recorded nothing may have run nothing.
                return Outcome.ERROR, NO_EVIDENCE, Details()
            return Outcome.PASS, "", Details(evidence=evidence)
        if any(v.subject == "both" for v in violations):
            subject = "both"  # onnxruntime passed it through and the EP accepted it: counted against both
        elif any(v.subject == "ep" for v in violations):
            subject = "ep"  # the EP's own copy went wrong (a write past a host buffer), whatever the contract's subject
        elif all(v.subject == "runtime" for v in violations):
            subject = "runtime"  # the rule a contested contract holds for this EP puts the defect on onnxruntime
        message = violations[0].message + (f" (and {len(violations) - 1} more)" if len(violations) > 1 else "")
        return Outcome.FAIL, message, Details(violations=tuple(violations), evidence=evidence, subject=subject)


PLAIN_CPU_CASE = "every value of this case was in onnxruntime's plain CPU memory and no node ran on the EP: the promise is onnxruntime's"
SESSION_EVIDENCE = (proofs.RUNS_ON_EP, proofs.NODES_ON_EP, proofs.PROVIDERS)


def case_subject(subject: str, ctx: CheckContext, details: Details) -> str:
    """Whose promise this case was, where it is not the contract's: 'runtime' for a case of an
    EP contract that used only onnxruntime's plain CPU memory (no memory info of the EP device at
    either end) and ran no node on the EP, which is onnxruntime's own copy or update however the
    contract is worded; '' to keep what the contract and the check said."""
    if subject != "ep" or details.subject or not ctx.only_plain_cpu():
        return ""
    if any(key in ctx.evidence for key in SESSION_EVIDENCE):
        return ""
    return "runtime"


def _raised(ctx: CheckContext, exc: BaseException, who: str) -> Violation:
    """A check stopped by an onnxruntime error: what it was doing (the step it announced), what
    onnxruntime said, and the check's reproducer (filled in by `run` where it gave none)."""
    step = f" while {ctx.step}" if ctx.step else ""
    return Violation(f"{who}{step}: {type(exc).__name__}: {exc}".strip(),
                     expected=f"{ctx.step} to succeed" if ctx.step else "the check's onnxruntime calls to succeed",
                     actual=first_line(exc), reproducer=ctx.reproducer)


def _complete(violations: Iterable[Violation], reproducer: str) -> None:
    """Every violation says how to reproduce it: where the check gave no snippet of its own,
    the last one it announced (`CheckContext.attempt`), else the case run through the kit."""
    for violation in violations:
        violation.reproducer = violation.reproducer or reproducer
