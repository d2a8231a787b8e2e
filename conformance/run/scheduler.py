"""Which worker runs each check, and when: the plans, sending ahead, collecting the replies.

Each worker is asked for its requests in run order (checks, then the copy probe, then the
isolated contracts), sent ahead in one batch so that it runs checks while pytest reports earlier
ones; a request is sent again (with what follows it) when a crash replaced its worker. Must not
know: pytest's hooks, the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from conformance.run.attribution import outcome_of
from conformance.isolation.controller import Worker, WorkerLost, WorkerRefused
from conformance.run.pool import EpUnderTest, WorkerPool

if TYPE_CHECKING:
    from conformance.outcomes import Outcome
    from conformance.plugin.hooks import ContractItem


@dataclass(frozen=True)
class Planned:
    """A request for a worker: its id (the item's node id), the request, and what to call it."""

    id: str
    request: dict[str, Any]
    what: str
    item: "ContractItem | None" = None


class Scheduler:
    """`lookahead`: this process runs the whole session in order (not an xdist worker, whose
    items arrive as the controller schedules them), so each worker's requests are planned and
    sent ahead; `probe_sizes`: the sizes the copy probe times (None: its own; [] where no check
    runs, as with --collect-only: the directions are probed but not timed)."""

    def __init__(self, eps: list[EpUnderTest], pool: WorkerPool, *, lookahead: bool, probe_sizes: list | None = None):
        self.eps = eps
        self.pool = pool
        self.lookahead = lookahead
        self.probe_sizes = probe_sizes
        self.plans: dict[Worker, list[Planned]] = {}
        self.plan_position: dict[tuple[Worker, str], int] = {}

    def run_case(self, item: "ContractItem") -> "tuple[Outcome, str, dict, float]":
        if item.contract.own_process:
            worker = self.pool.own(item.ep)
            try:
                return outcome_of(lambda: worker.request(self._request(worker, item.planned()), what=item.planned().what)["result"])
            finally:
                worker.close()
        if not self.runs_in_worker(item):
            return outcome_of(lambda: item.ep.runner.run(item.contract.id, item.device["index"], item.params))
        return outcome_of(lambda: self._collect(self.worker_for(item), item.planned())["result"])

    def worker_for(self, item: "ContractItem") -> Worker:
        if not item.contract.isolated or (self.lookahead and item.ep.worker):
            assert item.ep.worker is not None, "run_case sends a contract that is not isolated to the EP's worker only under worker isolation"
            return item.ep.worker
        return self.pool.isolated(item.ep)

    @staticmethod
    def runs_in_worker(item: "ContractItem") -> bool:
        """Isolated contracts run in a worker even with --conformance-isolation none: a bad
        request may abort onnxruntime (as a failed rebind does on the CPU EP of 1.32), and
        pytest itself must never die. Own-process contracts are not planned (see run_case)."""
        return not item.contract.own_process and (item.contract.isolated or item.ep.worker is not None)

    # --- the copy probe ------------------------------------------------------------------------

    def probe(self, ep: EpUnderTest) -> None:
        for device in ep.facts["devices"]:
            planned = self.planned_probe(device)
            try:
                if ep.worker:
                    ep.capabilities.append(self._collect(ep.worker, planned)["capabilities"])
                else:
                    from conformance.engine.capabilities import capability_matrix

                    ep.capabilities.append(capability_matrix(ep.runner.context(device["index"]), planned.request["sizes"]))
            except (WorkerLost, WorkerRefused) as exc:
                ep.capabilities.append({"ep": ep.facts["provider"], "device": device["label"], "error": str(exc), "pairs": []})
            except Exception as exc:  # in this process (--conformance-isolation none): a failure is the matrix's, never the run's
                ep.capabilities.append({"ep": ep.facts["provider"], "device": device["label"], "pairs": [],
                                        "error": f"the copy matrix could not be computed: {type(exc).__name__}: {exc}"})

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
            ep.capabilities += [{"ep": ep.facts["provider"], "device": device["label"], "error": "not probed: the run was interrupted", "pairs": []}
                                for device in ep.facts["devices"][len(ep.capabilities):]]

    def planned_probe(self, device: dict[str, Any]) -> Planned:
        request = {"op": "probe", "device": device["index"], "sizes": self.probe_sizes}
        return Planned(f"probe:{device['index']}", request, "the copy probe")

    # --- planning and sending ahead --------------------------------------------------------

    def plan(self, items: Iterable["ContractItem"]) -> None:
        """Each worker's requests in the order it runs them: the checks, the copy probe, and
        last the isolated contracts (bad requests), so that whatever they break in the worker
        cannot leak into a check or the probe; a worker lost to one is replaced for the rest.
        `items`: the checks that apply, in pytest's order."""
        # Contracts run in a process of their own (own_process) are not sent ahead.
        planned = [item for item in items if self.runs_in_worker(item)]
        for item in planned:
            if not item.contract.isolated:
                self.plans.setdefault(self.worker_for(item), []).append(item.planned())
        for ep in self.eps:
            if ep.worker:
                self.plans.setdefault(ep.worker, []).extend(self.planned_probe(device) for device in ep.facts["devices"])
        for item in planned:
            if item.contract.isolated:
                self.plans.setdefault(self.worker_for(item), []).append(item.planned())
        self.plan_position = {(worker, p.id): i for worker, plan in self.plans.items() for i, p in enumerate(plan)}

    def start_plans(self) -> None:
        """The main workers start on their plans now, not when pytest reaches the first item
        that needs them (which may be an isolated contract's)."""
        for ep in self.eps:
            if ep.worker and self.plans.get(ep.worker):
                self._send_ahead(ep.worker, self.plans[ep.worker][0])

    def _collect(self, worker: Worker, planned: Planned) -> dict[str, Any]:
        """The worker's reply to `planned`, sending it (and what follows it in the plan) first
        when the worker does not have it queued, e.g. after a crash replaced the worker."""
        if planned.item and planned.item.contract.isolated:
            worker.stand_by()  # a bad request is likely to take the worker down
        while True:
            if not worker.outstanding(planned.id):
                self._send_ahead(worker, planned)
            reply = worker.collect(planned.id)
            if reply is not None:
                return reply

    def _send_ahead(self, worker: Worker, planned: Planned) -> None:
        worker.submit([(p.id, self._request(worker, p), p.what) for p in self._ahead(worker, planned)])

    def _request(self, worker: Worker, planned: Planned) -> dict[str, Any]:
        """`planned`'s request with the calls quarantined on its EP device so far (a request is
        sent again after a loss, so the ones that follow a loss know of it); without the key
        when there are none."""
        ep = next((ep for ep in self.eps if ep.init.get("ep") == worker.init["ep"]), None)
        calls = ep.quarantine(planned.request["device"]).wire() if ep else None
        return dict(planned.request, quarantined=calls) if calls else planned.request

    def _ahead(self, worker: Worker, planned: Planned) -> list[Planned]:
        """`planned`, then the rest of the worker's plan that is still to run."""
        position = self.plan_position.get((worker, planned.id))
        if position is None:
            return [planned]
        rest = self.plans[worker][position + 1:]
        return [planned] + [p for p in rest if not worker.outstanding(p.id) and not (p.item and p.item.quarantined())]
