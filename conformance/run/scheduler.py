"""Which worker runs each check, and when: the plans, sending ahead, collecting the replies.

Each worker is asked for its requests in run order (checks, then the copy probe, then the
isolated contracts), sent ahead in one batch so that it runs checks while pytest reports earlier
ones; a request is sent again (with what follows it) when a crash replaced its worker. It works
on plain data, as pytest-xdist's schedulers work on node ids: a case arrives as a `Planned`
request that says which EP runs it, how it is isolated and what its quarantine keys on, and
leaves as a `CaseReply`. Must not know: pytest, the plugin's items, the report.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable

from conformance.facts import DeviceFacts
from conformance.isolation.controller import WorkerLost, WorkerRefused
from conformance.outcomes import CaseReply
from conformance.run import reruns
from conformance.run.attribution import outcome_of
from conformance.run.pool import AnyWorker, EpUnderTest, WorkerPool


@dataclass(frozen=True)
class Planned:
    """A request for a worker: its id (a case's node id), the request, and what to call it. For a
    case (a probe has none of these): the EP that runs it (`ep`, the name it was requested by),
    whether it is `isolated` (a bad request, run after everything else or in a worker of its
    own) or runs in a process of its own (`own_process`), and what its quarantine keys on (its
    `check` function and copy `direction`, see quarantine.LostPattern)."""

    id: str
    request: dict[str, Any]
    what: str
    ep: str = ""
    isolated: bool = False
    own_process: bool = False
    check: str = ""
    direction: str | None = None


class Scheduler:
    """`lookahead`: this process runs the whole session in order (not an xdist worker, whose
    items arrive as the controller schedules them), so each worker's requests are planned and
    sent ahead; `probe_sizes`: the sizes the copy probe times (None: its own; [] where no check
    runs, as with --collect-only: the directions are probed but not timed); `reruns`: how often
    a failed, crashed or timed-out case is tried again in a fresh worker (conformance.run.reruns)."""

    def __init__(self, eps: list[EpUnderTest], pool: WorkerPool, *, lookahead: bool, probe_sizes: list | None = None, reruns: int = 0):
        self.eps = eps
        self.pool = pool
        self.lookahead = lookahead
        self.probe_sizes = probe_sizes
        self.reruns = reruns
        self.plans: dict[AnyWorker, list[Planned]] = {}
        self.plan_position: dict[tuple[AnyWorker, str], int] = {}

    def run_case(self, planned: Planned) -> CaseReply:
        """The case's reply, after its tries again in a fresh worker where it failed, crashed or
        timed out (reruns.settle): a crash that does not come back is flaky, not quarantined, and
        a try lost to the machine (killed, stopped or starved from outside) that the next try does not
        repeat is not counted."""
        return reruns.settle(self._run_once(planned), lambda: self._run_once(dataclasses.replace(planned, own_process=True)), self.reruns)

    def _run_once(self, planned: Planned) -> CaseReply:
        if planned.own_process:
            worker = self.pool.own(self._ep(planned), planned.request["contract"])
            try:
                return outcome_of(lambda: worker.request(self._request(worker, planned), what=planned.what)["result"])
            finally:
                worker.close()
        return outcome_of(lambda: self._collect(self.worker_for(planned), planned)["result"])

    def quarantined(self, planned: Planned) -> str:
        """Why the case is not run at all after an earlier loss on its EP device ('' if it runs)."""
        return self._ep(planned).quarantine(planned.request["device"]).reason(planned.check, planned.direction)

    def worker_for(self, planned: Planned) -> AnyWorker:
        """The EP's main worker; for an isolated contract, where the main one is not a process of
        its own (--conformance-isolation none: a bad request may abort onnxruntime, as a failed
        rebind does on the CPU EP of 1.32, and pytest itself must never die) or where requests are
        not planned ahead to run it last, the EP's worker of isolated contracts."""
        ep = self._ep(planned)
        assert ep.worker is not None, "every EP has a worker where cases run (only --collect-only has none)"
        if not planned.isolated or (self.lookahead and ep.worker.isolates):
            return ep.worker
        return self.pool.isolated(ep)

    def _ep(self, planned: Planned) -> EpUnderTest:
        return next(ep for ep in self.eps if ep.requested == planned.ep)

    # --- the copy probe ------------------------------------------------------------------------

    def probe(self, ep: EpUnderTest) -> None:
        assert ep.worker is not None, "the probe runs where cases run (only --collect-only has no worker)"
        for device in ep.facts.devices:
            try:
                ep.capabilities.append(self._collect(ep.worker, self.planned_probe(device))["capabilities"])
                continue
            except WorkerLost as exc:
                error = str(exc)
            except WorkerRefused as exc:  # the probe raised, in the worker or (--conformance-isolation none) in this process
                error = f"the copy matrix could not be computed: {exc}"
            except Exception as exc:  # anything else is the matrix's failure too, never the run's
                error = f"the copy matrix could not be computed: {type(exc).__name__}: {exc}"
            ep.capabilities.append({"ep": ep.facts.provider, "device": device.label, "error": error, "pairs": []})

    def probe_all(self) -> bool:
        """The copy matrix of every EP device; False when Ctrl-C stopped it."""
        try:
            for ep in self.eps:
                self.probe(ep)
        except KeyboardInterrupt:
            return False
        return True

    def mark_not_probed(self) -> None:
        """Each device the probe did not reach has a matrix saying so."""
        for ep in self.eps:
            ep.capabilities += [{"ep": ep.facts.provider, "device": device.label, "error": "not probed: the run was interrupted", "pairs": []}
                                for device in ep.facts.devices[len(ep.capabilities):]]

    def planned_probe(self, device: DeviceFacts) -> Planned:
        request = {"op": "probe", "device": device.index, "sizes": self.probe_sizes}
        return Planned(f"probe:{device.index}", request, "the copy probe")

    # --- planning and sending ahead --------------------------------------------------------

    def plan(self, cases: Iterable[Planned]) -> None:
        """Each worker's requests in the order it runs them: the checks, the copy probe, and
        last the isolated contracts (bad requests), so that whatever they break in the worker
        cannot leak into a check or the probe; a worker lost to one is replaced for the rest.
        `cases`: the checks that apply, in pytest's order."""
        # Contracts run in a process of their own (own_process) are not sent ahead.
        planned = [case for case in cases if not case.own_process]
        for case in planned:
            if not case.isolated:
                self.plans.setdefault(self.worker_for(case), []).append(case)
        for ep in self.eps:
            if ep.worker:
                self.plans.setdefault(ep.worker, []).extend(self.planned_probe(device) for device in ep.facts.devices)
        for case in planned:
            if case.isolated:
                self.plans.setdefault(self.worker_for(case), []).append(case)
        self.plan_position = {(worker, p.id): i for worker, plan in self.plans.items() for i, p in enumerate(plan)}

    def start_plans(self) -> None:
        """The main workers start on their plans now, not when pytest reaches the first item
        that needs them (which may be an isolated contract's)."""
        for ep in self.eps:
            if ep.worker and self.plans.get(ep.worker):
                self._send_ahead(ep.worker, self.plans[ep.worker][0])

    def _collect(self, worker: AnyWorker, planned: Planned) -> dict[str, Any]:
        """The worker's reply to `planned`, sending it (and what follows it in the plan) first
        when the worker does not have it queued, e.g. after a crash replaced the worker."""
        if planned.isolated:
            worker.stand_by()  # a bad request is likely to take the worker down
        while True:
            if not worker.outstanding(planned.id):
                self._send_ahead(worker, planned)
            reply = worker.collect(planned.id)
            if reply is not None:
                return reply

    def _send_ahead(self, worker: AnyWorker, planned: Planned) -> None:
        worker.submit([(p.id, self._request(worker, p), p.what) for p in self._ahead(worker, planned)])

    def _request(self, worker: AnyWorker, planned: Planned) -> dict[str, Any]:
        """`planned`'s request with the calls quarantined on its EP device so far (a request is
        sent again after a loss, so the ones that follow a loss know of it); without the key
        when there are none."""
        ep = next((ep for ep in self.eps if ep.init.get("ep") == worker.init["ep"]), None)
        calls = ep.quarantine(planned.request["device"]).wire() if ep else None
        return dict(planned.request, quarantined=calls) if calls else planned.request

    def _ahead(self, worker: AnyWorker, planned: Planned) -> list[Planned]:
        """`planned`, then the rest of the worker's plan that is still to run."""
        position = self.plan_position.get((worker, planned.id))
        if position is None:
            return [planned]
        rest = self.plans[worker][position + 1:]
        return [planned] + [p for p in rest if not worker.outstanding(p.id) and not (p.check and self.quarantined(p))]
