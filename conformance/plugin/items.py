"""pytest's items of the kit: a spec file (`ContractFile`) and one case of a contract on one EP
device with one set of parameters (`ContractItem`).

An item decides before anything runs whether its case applies (rules.applicability) or was
quarantined by an earlier loss, hands the scheduler its case as plain data (`planned()`), and
turns the reply into a `Result` after the EP spec's waivers and the strict rules. It reaches
the run through pytest's stash (`CASES_KEY`, under which the plugin registers its run as a
`CaseSource`), never by importing the plugin's hooks.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from conformance.catalogue import selectors
from conformance.facts import DeviceFacts
from conformance.outcomes import PYTEST_ERRORS, CaseReply, Outcome, Result
from conformance.plugin import ids, terminal
from conformance.run.pool import EpUnderTest
from conformance.run.scheduler import Planned, Scheduler
from conformance.errors import KitError

if TYPE_CHECKING:
    from conformance.catalogue.contracts import Contract
    from conformance.rules.applicability import Skip


class CaseSource(Protocol):
    """What the items read of the run: its EPs under test, each spec file's contracts, the
    scheduler that runs a case, whether the run is strict, and the report folder (whose repro/
    a failure names its reproducer in)."""

    eps: list[EpUnderTest]
    contract_files: dict[Path, list[Contract]]
    scheduler: Scheduler
    strict: bool
    report_dir: Path


CASES_KEY = pytest.StashKey[CaseSource]()
RESULT_KEY = pytest.StashKey[Result]()


class ContractFile(pytest.File):
    # The hooks its cases call, set once collection is over (see ContractItem.ihook).
    case_hooks: Any = None

    def collect(self):
        run = self.config.stash[CASES_KEY]
        for contract in run.contract_files.get(self.path.resolve(), ()):
            for ep in run.eps:
                for device in ep.facts.devices:
                    for params in contract.cases():
                        label = "-".join([device.label, *map(str, params.values())])
                        # The id given as text, parsed by pytest as it parses its cache's (pytest 9 would
                        # otherwise keep `[label]` in the name, and --lf would find no item it knows).
                        yield ContractItem.from_parent(self, name=f"{contract.id}[{label}]", nodeid=ids.case_id(self.nodeid, contract.id, label),
                                                       contract=contract, ep=ep, device=device, params=params)


class ContractFailure(KitError):
    def __init__(self, result: Result, contract: Contract):
        super().__init__(result.message)
        self.result = result
        self.contract = contract


class ContractItem(pytest.Item):
    def __init__(self, *, contract: Contract, ep: EpUnderTest, device: DeviceFacts, params: dict[str, Any], **kwargs):
        super().__init__(**kwargs)
        self.contract = contract
        self.ep = ep
        self.device = device
        self.params = params
        self.run = self.config.stash[CASES_KEY]
        for marker in ["conformance", *ids.markers(contract)]:
            self.add_marker(marker)  # -m required, -m family_copy, -m "subject_ep and not isolated"
        self._decision: tuple[Skip | None] | None = None
        self._planned: Planned | None = None

    @property
    def ihook(self):
        """pytest's hook proxy for this item's path: its file's, kept once collection is over.
        pytest builds it anew at each hook call (eleven a case) where a conftest.py of the run
        does not apply to the spec file (a checkout's, which the shipped spec files of an editable
        install bring in, for a vendor's files elsewhere; one beside some of the files named), and
        each hook called through it filters every plugin's implementations again (120 000 hook
        callers made in a 10 000-contract run, 40 with this). Kept only after collection,
        when no conftest.py is loaded any more; the proxy still sees plugins registered later
        (pluggy filters at each call)."""
        hooks = getattr(self.parent, "case_hooks", None)
        return hooks if hooks is not None else super().ihook

    def decision(self) -> Skip | None:
        """Whether the contract applies here (a pure function of the facts, so decided once)."""
        if self._decision is None:
            from conformance.rules import applicability

            self._decision = (applicability.decide(self.contract, self.ep.facts, self.device, self.ep.spec),)
        return self._decision[0]

    def planned(self) -> Planned:
        """This case as the scheduler takes it: plain data, not this item."""
        if self._planned is None:
            request = {"op": "run", "contract": self.contract.id, "device": self.device.index, "params": self.params}
            self._planned = Planned(self.nodeid, request, f"{self.contract.id} on {self.device.label}", ep=self.ep.requested,
                                    isolated=self.contract.isolated, own_process=self.contract.own_process,
                                    check=self.contract.check, direction=self.params.get("direction"))
        return self._planned

    def _result(self, reply: CaseReply) -> Result:
        return Result(
            contract=self.contract.id, ep=self.ep.facts.provider, device=self.device.label, params=self.params,
            outcome=reply.outcome, message=reply.message, spec=str(self.contract.location), severity=self.contract.severity,
            subject=reply.details.subject or self.contract.subject, nodeid=self.nodeid, duration=reply.duration, details=reply.details,
            contested=selectors.contested_rule(self.contract, self.ep.facts, self.device),
        )

    def quarantined(self) -> str:
        """Why this check is not run at all after an earlier loss on its EP device ('' if it runs)."""
        return self.run.scheduler.quarantined(self.planned())

    def setup(self) -> None:
        # What is decided before anything runs (not applicable, quarantined) is skipped here, as
        # pytest's skip marks are; the check itself runs in the call (runtest), so that a crash
        # or a timeout is an error of the call and --durations shows the check's own time.
        skip = self.decision()
        if skip:
            result = self._finish(self._result(CaseReply(skip.outcome, skip.reason)))
        elif self.quarantined():
            result = self._finish(self._result(CaseReply(Outcome.NOT_RUN, f"not run: {self.quarantined()}")))
        else:
            return
        if not result.details.strict:
            pytest.skip(f"[{result.outcome.value}] {result.message}")

    def _run(self) -> Result:
        result = self._result(self.run.scheduler.run_case(self.planned()))
        if result.outcome in (Outcome.CRASH, Outcome.TIMEOUT):
            self.ep.quarantine(self.device.index).record(result, self.contract.check, self.params.get("direction"), self.name)
        return self._finish(result)

    def _finish(self, result: Result) -> Result:
        """`result` after the EP spec's waivers and the strict rules, kept for the reports."""
        from conformance.rules import strict as strict_rules
        from conformance.rules import waivers as waiver_rules

        result = waiver_rules.apply(result, self.ep.spec, self.ep.facts)
        if self.run.strict:
            result = strict_rules.mark(result, self.contract, self.ep.spec)
        self.stash[RESULT_KEY] = result
        self.user_properties.extend(result.case_properties())
        return result

    def runtest(self) -> None:
        result = self.stash.get(RESULT_KEY, None) or self._run()
        if result.details.strict:
            pytest.fail(f"[{result.outcome.value}] strict run: {result.details.strict}", pytrace=False)
        if result.is_finding and not result.against_ep:
            prefix = "" if result.outcome is Outcome.FAIL else f"[{result.outcome.value}] "
            whose = "the onnxruntime package" if result.subject == "package" else "onnxruntime"
            pytest.xfail(f"finding against {whose}, not the EP: {prefix}{result.message}")
        if result.outcome in (Outcome.FAIL, Outcome.FLAKY) or result.outcome in PYTEST_ERRORS:  # flaky: a failure, with its tries
            raise ContractFailure(result, self.contract)  # an error's report is marked one (see pytest_report_teststatus)
        if result.outcome is not Outcome.PASS:
            pytest.skip(f"[{result.outcome.value}] {result.message}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ContractFailure):
            return terminal.failure_repr(excinfo.value.result, self.contract, self.config.getoption("tbstyle", "auto"), self.run.report_dir)
        if isinstance(excinfo.value, pytest.xfail.Exception):
            return str(excinfo.value)  # its reason says it all; a traceback of the plugin would not
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        # The headline of the case's failure in pytest's FAILURES section: the case with its parameters.
        return self.path, self.contract.location.line - 1, f"{self.name} [{self.contract.severity}]"
