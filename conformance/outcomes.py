"""Outcomes, results and the verdict.

The outcome set is closed. Results round-trip through plain dicts (they cross the worker
boundary and land in report.json); `verdict()` is the one place that decides what a run means.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable

from conformance.calls import Call
from conformance.findings import Violation
from conformance.proofs import GROWTH, Proven


class Outcome(str, enum.Enum):
    # No `known_issue`: a known upstream defect annotates a failure (`ort-conformance found`,
    # from known_issues.yaml and the EP spec's `known_issues`) but never changes its outcome;
    # only the vendor's own waiver, in its EP spec, does that.
    PASS = "pass"
    FAIL = "fail"
    NOT_APPLICABLE = "not_applicable"
    NOT_RUN = "not_run"
    WAIVED = "waived"
    CRASH = "crash"
    TIMEOUT = "timeout"
    ERROR = "error"
    # Tried again (--conformance-rerun, or once after a crash or hang) and the tries' outcomes
    # differ: counted as a failure, never certified, never waived; Details.tries holds each.
    # A try lost to the machine (MachineEvent) that the next did not repeat is not counted.
    FLAKY = "flaky"


class Verdict(str, enum.Enum):
    CONFORMANT = "conformant"
    NON_CONFORMANT = "non_conformant"
    INCOMPLETE = "incomplete"


BROKEN = (Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT, Outcome.FLAKY)
RERUN = (Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT)  # the outcomes a case is tried again after
# Whose promise a result is (its subject): the EP's, onnxruntime's own layer's, or both, when
# onnxruntime passed a bad request through without checking it and the EP accepted it. A broken
# `both` result counts against the EP in the verdict and is listed among the findings against
# onnxruntime too. `package`: the promise of the onnxruntime package as shipped (a built-in EP it
# lists must run); its failures are findings, against that package, never the EP's.
SUBJECTS = ("ep", "runtime", "both", "package")
AGAINST_EP = ("ep", "both")
AGAINST_RUNTIME = ("runtime", "both")
NOT_AGAINST_EP = ("runtime", "package")  # broken, they are findings alone: xfail, counted apart
COULD_NOT_RUN = (Outcome.NOT_RUN, Outcome.ERROR)
BROKEN_OR_ERROR = (*BROKEN, Outcome.ERROR)  # what a person looks into after a run
# Errors of an item's call, which pytest and JUnit count as errors, not failures (unless the
# result is a finding against onnxruntime: an expected failure); see conformance.plugin.terminal.
PYTEST_ERRORS = (Outcome.CRASH, Outcome.TIMEOUT, Outcome.ERROR)
# The properties of every result's test case in JUnit XML (pytest's user_properties).
CASE_PROPERTIES = ("contract", "ep", "device", "outcome", "severity", "subject", "spec")


@dataclass(frozen=True)
class MachineEvent:
    """How a worker was lost where the machine, not the EP's code, may have ended it: `kind`
    KILLED (its wait status says SIGKILL, which the kit had not sent it: the OOM killer's and a
    CI runner's signal), STOPPED (stopped by a signal, as /proc showed it, when its time ran
    out) or STARVED (ready to run but kept waiting for a CPU, as /proc's scheduler figures showed
    it, when its time ran out: a machine busier than it has cores), and `evidence`: what showed
    it, in words. An EP can do each to itself (raise(SIGKILL), raise(SIGSTOP), a spin that the
    machine's load slows), so an event is only a suspicion until the case's next try: one that
    the next try repeats is the EP's crash or timeout after all (conformance.run.reruns)."""

    kind: str
    evidence: str

    KILLED: ClassVar[str] = "killed"
    STOPPED: ClassVar[str] = "stopped"
    STARVED: ClassVar[str] = "starved"

    def said(self) -> str:
        """What happened to the worker, after 'the worker was'."""
        return {self.STOPPED: "stopped from outside until its time ran out",
                self.STARVED: "kept waiting for a CPU by other processes when its time ran out"}.get(self.kind, "killed from outside (SIGKILL)")

    def to_wire(self) -> dict[str, str]:
        return {"kind": self.kind, "evidence": self.evidence}

    @classmethod
    def from_wire(cls, wire: Any) -> "MachineEvent | None":
        """The event a try's details name (None for none, or for what is not one)."""
        if not isinstance(wire, dict) or wire.get("kind") not in (cls.KILLED, cls.STOPPED, cls.STARVED):
            return None
        return cls(wire["kind"], str(wire.get("evidence", "")))


@dataclass(frozen=True)
class Tried:
    """One try of a case tried again (conformance.run.reruns); `counted` False for a try lost to
    the machine that the next did not repeat."""

    outcome: Outcome
    message: str
    counted: bool = True

    def to_wire(self) -> dict[str, Any]:
        return {"outcome": self.outcome.value, "message": self.message, **({} if self.counted else {"counted": False})}

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> "Tried | None":
        """The try `wire` says (None for what is not one: a file read back may be anything)."""
        if wire.get("outcome") not in _OUTCOME_VALUES:
            return None
        return cls(Outcome(wire["outcome"]), str(wire.get("message", "")), wire.get("counted") is not False)


@dataclass(frozen=True)
class ExcusedTry:
    """A try lost to the machine and not counted: its number among the tries, the event, and
    the sentence the reports show."""

    number: int
    event: MachineEvent
    text: str

    def to_wire(self) -> dict[str, Any]:
        return {"try": self.number, **self.event.to_wire(), "text": self.text}

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> "ExcusedTry | None":
        event, number = MachineEvent.from_wire(wire), wire.get("try")
        return None if event is None or not isinstance(number, int) else cls(number, event, str(wire.get("text", "")))


@dataclass(frozen=True)
class WaiverStatus:
    """What became of the EP spec's waiver that matched a case (conformance.rules.waivers): a row
    of the report's waiver table."""

    contract: str
    status: str  # applied, expired, waiver no longer needed, not applied: flaky
    reason: str
    url: str
    until: str | None = None
    device: str | None = None
    spec: str | None = None  # where the waiver is written, path:line

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> "WaiverStatus":
        def text(name: str) -> str | None:
            return None if wire.get(name) is None else str(wire[name])

        return cls(str(wire.get("contract", "")), str(wire.get("status", "")), str(wire.get("reason", "")), str(wire.get("url", "")),
                   text("until"), text("device"), text("spec"))


_FIELDS_OF_VIOLATION = tuple(f.name for f in dataclasses.fields(Violation))


@dataclass(frozen=True)
class Details:
    """What a result holds besides its outcome and message: its violations, the evidence of what
    the check proved, whose promise it was where not the contract's, how its worker was lost,
    its tries, and what the verdict rules made of it. `to_wire` is its JSON (report.json's
    `details`, a worker's reply, the journal), an empty field left out; `from_wire` reads it back,
    from this kit's files and older ones (a key it does not know is ignored)."""

    violations: tuple[Violation, ...] = ()
    # What the check proved (CheckContext.prove), under the keys conformance.proofs declares:
    # every pass has some; report.schema.json says the names a reader relies on (growth).
    evidence: Proven = field(default_factory=Proven)
    subject: str = ""  # whose promise the case was, where the check or the runner decided it
    subject_reason: str = ""
    step: str = ""  # the step a lost worker had announced
    call: Call | None = None  # the call a lost worker had in flight
    machine: MachineEvent | None = None  # what may have ended that worker from outside, before the next try weighs it
    tries: tuple[Tried, ...] = ()
    machine_events: tuple[ExcusedTry, ...] = ()
    quarantined_call: str = ""  # the call the check stopped before, quarantined after it crashed or hung earlier
    traceback: str = ""  # where the kit itself failed (an `error`)
    strict: str = ""  # why the case fails a strict run (conformance.rules.strict)
    waiver: str = ""  # a waiver that matched and was not applied, and why
    waiver_status: WaiverStatus | None = None
    waived_outcome: str = ""  # the outcome and message a waiver covered
    waived_message: str = ""

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {}
        for name in _FIELDS_OF_DETAILS:
            value = getattr(self, name)
            if not value:
                continue
            if name == "violations":
                value = [dataclasses.asdict(v) for v in value]
            elif name in ("tries", "machine_events"):
                value = [item.to_wire() for item in value]
            elif name in ("call", "machine", "waiver_status", "evidence"):
                value = value.to_wire()
            wire[name] = value
        return wire

    @classmethod
    def from_wire(cls, wire: Any) -> "Details":
        if isinstance(wire, Details):
            return wire
        if not isinstance(wire, dict):
            return cls()
        texts = {name: str(wire[name]) for name in _TEXT_FIELDS if wire.get(name)}
        call, status, evidence = wire.get("call"), wire.get("waiver_status"), wire.get("evidence")
        return cls(
            violations=tuple(Violation(**{"message": "", **{k: v for k, v in item.items() if k in _FIELDS_OF_VIOLATION}})
                             for item in _list(wire.get("violations")) if isinstance(item, dict)),
            evidence=Proven.from_wire(evidence),
            call=Call.from_wire(call) if isinstance(call, dict) and isinstance(call.get("kind"), str) else None,
            machine=MachineEvent.from_wire(wire.get("machine")),
            tries=tuple(tried for item in _list(wire.get("tries")) if isinstance(item, dict) if (tried := Tried.from_wire(item)) is not None),
            machine_events=tuple(event for item in _list(wire.get("machine_events")) if isinstance(item, dict)
                                 if (event := ExcusedTry.from_wire(item)) is not None),
            waiver_status=WaiverStatus.from_wire(status) if isinstance(status, dict) else None,
            **texts)


_FIELDS_OF_DETAILS = tuple(f.name for f in dataclasses.fields(Details))
_OUTCOME_VALUES = {outcome.value for outcome in Outcome}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
_TEXT_FIELDS = ("subject", "subject_reason", "step", "quarantined_call", "traceback", "strict", "waiver", "waived_outcome", "waived_message")


@dataclass(frozen=True)
class CaseReply:
    """What one case came to where it ran, before the parent makes it a `Result`: a worker's
    answer (its wire dict, `from_wire`) or what the loss of its worker made of it."""

    outcome: Outcome
    message: str
    details: Details = field(default_factory=Details)
    duration: float = 0.0  # the check's own seconds, as its worker timed it

    @classmethod
    def from_wire(cls, reply: dict[str, Any]) -> "CaseReply":
        return cls(Outcome(reply["outcome"]), reply["message"], Details.from_wire(reply["details"]), reply["duration"])


@dataclass
class Result:
    contract: str
    ep: str
    device: str
    params: dict[str, Any]
    outcome: Outcome
    message: str
    spec: str
    severity: str
    subject: str
    nodeid: str = ""
    duration: float = 0.0
    details: Details = field(default_factory=Details)
    # For a contract whose sources disagree: which rule judged this case, in words ('' otherwise).
    contested: str = ""

    @property
    def is_finding(self) -> bool:
        """A broken result of onnxruntime's promise (subject runtime or both) or of its package's
        (subject package): a defect of onnxruntime, listed among the findings against it."""
        return (self.subject in AGAINST_RUNTIME or self.subject == "package") and self.outcome in BROKEN

    @property
    def against_ep(self) -> bool:
        """Whether the result is the EP's to answer for (subject ep or both): the verdict counts it."""
        return self.subject in AGAINST_EP

    def case_properties(self) -> list[tuple[str, str]]:
        """(name, value) of each of CASE_PROPERTIES, the outcome by its value; `contested`
        where the contract's sources disagree; and the figures of each memory curve the check
        sampled (`growth_properties`)."""
        properties = [(name, self.outcome.value if name == "outcome" else getattr(self, name)) for name in CASE_PROPERTIES]
        return properties + ([("contested", self.contested)] if self.contested else []) + growth_properties(self.details)

    def to_dict(self) -> dict[str, Any]:
        # A shallow copy: params are JSON data that nothing changes in place. asdict's deep copy
        # took 6 ms per 500 results, and every result is turned into a dict twice in a run.
        return {**self.__dict__, "outcome": self.outcome.value, "details": self.details.to_wire()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Result":
        data = dict(data)
        data["outcome"] = Outcome(data["outcome"])
        data["details"] = Details.from_wire(data.get("details"))
        return cls(**data)


def growth_properties(details: Details) -> list[tuple[str, str]]:
    """`growth.<gauge>.slope_per_call` and `growth.<gauge>.per_1000_calls` (bytes) of each memory
    curve in the result's evidence (`evidence.growth`, the stress tier's endurance checks)."""
    growth = details.evidence.get(GROWTH) or {}
    return [(f"growth.{key}.{name}", str(figure)) for key, curve in growth.items()
            for name, figure in (("slope_per_call", curve.slope_per_call), ("per_1000_calls", curve.per_1000_calls)) if figure is not None]


def counts(results: Iterable[Result]) -> dict[str, int]:
    summary = {outcome.value: 0 for outcome in Outcome}
    for result in results:
        summary[result.outcome.value] += 1
    return summary


def verdict(results: list[Result], *, interrupted: bool = False, strict: bool = False, subset: str = "",
            shard: str = "", draft: str = "") -> tuple[Verdict, list[str]]:
    """The verdict and the reasons for it (see `_decided`). `shard` names the shard of a run
    these results are ("shard 1 of 4", --conformance-shard): a shard alone never certifies, so
    it is `incomplete` at best; a broken required contract makes it `non_conformant`, as it
    would the whole run. `ort-conformance merge` of every shard decides the run. `draft`: why
    the EP spec is a draft whose claims nobody confirmed (rules.strict.draft_reason; '' for none)."""
    decided, reasons = _decided(results, interrupted=interrupted, strict=strict, subset=subset, draft=draft)
    if shard and decided is not Verdict.NON_CONFORMANT:
        return Verdict.INCOMPLETE, [f"{shard}: a shard alone never certifies; `ort-conformance merge` of every shard gives the run's verdict", *reasons]
    return decided, reasons


def _decided(results: list[Result], *, interrupted: bool, strict: bool, subset: str, draft: str = "") -> tuple[Verdict, list[str]]:
    """The verdict and the reasons for it.

    Only required results against the EP (subject ep, or both) decide: a runtime-subject failure
    is a finding against onnxruntime alone, and recommended or informational contracts inform
    without deciding.

    A waived failure counts as shown: the check ran, and its failure is covered by a waiver
    that cites an upstream issue (the Vulkan CTS rule), so a run whose only failures are waived
    is `conformant` and its reasons list the waivers. A waived `not_run` proves nothing ran.

    In a strict (certification) run nothing required may be left unshown: whatever would make
    the run `incomplete`, a required contract that could not run on one of the EP devices, and
    every case marked `Details.strict` by the plugin (a required contract the vendor declared
    not applicable), make it `non_conformant`.

    `subset` names the part of the catalogue that ran when it was not all of it (see
    conformance.plugin.selection). A strict subset is never a certification: it is `incomplete`, unless
    it showed a failure or a self-exemption, which no larger run would undo. A subset outside a
    strict run is decided as usual; the reports label it partial.

    A strict run whose EP spec is a `draft` (ort-conformance init wrote it, nobody confirmed
    its claims) certifies nothing either: `incomplete`, naming the claims left to confirm,
    unless it showed a failure or a self-exemption. Outside a strict run a draft is a spec
    like any other."""
    deciding = [r for r in results if r.severity == "required" and r.against_ep]
    broken = sorted({r.contract for r in deciding if r.outcome in RERUN})
    flaky = sorted({r.contract for r in deciding if r.outcome is Outcome.FLAKY} - set(broken))
    if broken or flaky:
        return Verdict.NON_CONFORMANT, ([f"required contract broken: {c}" for c in broken]
                                        + [f"required contract flaky (its tries gave different outcomes): {c}" for c in flaky])
    reasons = []
    if interrupted:
        reasons.append("the run was interrupted before every check finished")
    # A contract could not run when none of its cases did: cases that are not_run because the
    # EP does not take that model are expected, as long as the contract was shown somewhere.
    ran = {r.contract for r in deciding if r.outcome in (Outcome.PASS, Outcome.WAIVED)}
    missing = sorted({r.contract for r in deciding if r.outcome is Outcome.NOT_RUN and r.contract not in ran})
    reasons += [f"required contract could not run: {c}" for c in missing]
    errors = sorted({r.contract for r in results if r.outcome is Outcome.ERROR})
    reasons += [f"the kit failed to run: {c}" for c in errors]
    if not results:
        reasons.append("no check ran")
    elif not any(r.outcome is Outcome.PASS or _waived_failure(r) for r in deciding):
        reasons.append("no required contract passed on this EP")
        # One cause behind every check that did not run (an EP that is not functional here)
        # is the reason that matters: it goes first.
        # (A package's finding is beside the point: it is that cause, seen from the package.)
        causes = {r.message for r in results if r.outcome is Outcome.NOT_RUN}
        if len(causes) == 1 and all(r.outcome in (Outcome.NOT_RUN, Outcome.NOT_APPLICABLE) or r.subject == "package" for r in results):
            reasons.insert(0, f"no check could run: {causes.pop()}")
    if strict:
        reasons += _unshown_on_a_device(deciding, set(missing))
        exempted = sorted({f"{r.contract}: {r.details.strict}" for r in results if r.details.strict})
        reasons = [f"strict run: {reason}" for reason in dict.fromkeys(reasons + exempted)]
        if subset and not exempted:
            return Verdict.INCOMPLETE, [f"strict run: a subset of the catalogue cannot certify: {subset}", *reasons]
        if draft and not exempted:
            return Verdict.INCOMPLETE, [f"strict run: {draft}", *reasons]
        if reasons:
            return Verdict.NON_CONFORMANT, reasons
    if reasons:
        return Verdict.INCOMPLETE, reasons
    waived = sorted({r.contract for r in deciding if r.outcome is Outcome.WAIVED})
    return Verdict.CONFORMANT, [f"conformant under a waiver: {c}" for c in waived]


def _unshown_on_a_device(deciding: list[Result], already: set[str]) -> list[str]:
    """Required contracts shown on some EP device but not on another (strict runs only)."""
    shown = {(r.ep, r.device, r.contract) for r in deciding if r.outcome in (Outcome.PASS, Outcome.WAIVED)}
    unshown = {(r.ep, r.device, r.contract) for r in deciding if r.outcome in COULD_NOT_RUN} - shown
    return [f"required contract could not run on {ep} {device}: {contract}" for ep, device, contract in sorted(unshown) if contract not in already]


def _waived_failure(result: Result) -> bool:
    return result.outcome is Outcome.WAIVED and result.details.waived_outcome in {o.value for o in BROKEN}
