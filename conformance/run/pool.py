"""The EPs under test and the workers that run their checks: launching, the fork server, closing.

Must not know: pytest, the order of checks (scheduler.py), the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from conformance.facts import EpFacts
from conformance.isolation.fork_client import ForkServer
from conformance.isolation.controller import Waiting, Worker, handover
from conformance.isolation.in_process import InProcessWorker
from conformance.run.quarantine import Quarantine

if TYPE_CHECKING:
    from conformance.catalogue.contracts import Catalogue


# The EP's main worker: a process of its own, or this process with --conformance-isolation none.
AnyWorker = Worker | InProcessWorker


@dataclass
class EpUnderTest:
    requested: str
    facts: EpFacts
    worker: AnyWorker | None  # None only where nothing runs (--collect-only)
    capabilities: list[dict[str, Any]] = field(default_factory=list)
    quarantines: dict[int, Quarantine] = field(default_factory=dict)  # device index -> its quarantine
    # A second worker for contracts marked `isolated` (bad requests that may corrupt memory),
    # where they cannot simply run after every other check of the main worker: under xdist
    # (items arrive as the controller schedules them) and with --conformance-isolation none.
    isolated_worker: Worker | None = None
    init: dict[str, Any] = field(default_factory=dict)  # what starts a worker for this EP
    spec: Any = None  # its declaration in the catalogue (contracts.EpSpec), where it has one

    @property
    def label(self) -> str:
        return self.facts.label

    def quarantine(self, device: int) -> Quarantine:
        """What is not tried again on EP device `device` (an index into facts.devices)."""
        if device not in self.quarantines:
            self.quarantines[device] = Quarantine(device)
        return self.quarantines[device]


class WorkerPool:
    """Every worker of the run: made, launched (the first hosting the fork server, which forks
    every other: replacements after a crash or hang, and the workers of isolated and
    own-process contracts; see forkserver.py), and closed at the end."""

    def __init__(self, report_dir: Path, timeout: float, on_wait: Callable[[Waiting], None] | None = None, wrapper: tuple[str, ...] = ()):
        self.report_dir = report_dir
        self.wrapper = wrapper  # the command every worker runs under (--conformance-wrapper)
        self.timeout = timeout
        self.workers: list[Worker] = []  # every worker launched, to close them all
        self.fork_server: ForkServer | None = None
        self.handover: dict[str, Any] | None = None  # the catalogue and recipes, for every worker (isolation.handover)
        self.handed: tuple[Catalogue, dict[str, Any]] | None = None  # what `handover` holds, for a worker of one contract
        self.on_wait = on_wait  # every worker's: hears a slow reply (see isolation.Waiting)

    def serve_forks(self) -> None:
        if ForkServer.supported():
            self.fork_server = ForkServer()

    def hand_over(self, catalogue: Catalogue, recipes: dict[str, Any]) -> None:
        """What every worker is handed (the catalogue and the recipes this process has read and
        validated), those launched already and those to come."""
        self.handed = catalogue, recipes
        self.handover = handover(catalogue, recipes)
        for worker in self.workers:
            worker.hand_over(self.handover)

    def new(self, init: dict[str, Any], name: str, role: str = "", warm_up: bool = False, handed: dict[str, Any] | None = None) -> Worker:
        """A worker for EP `name`, not started, logging to reports/worker-NAME[-ROLE].log; the
        run's fork server forks its processes once it serves. `warm_up`: it is started before
        collection, and may prepare for its checks meanwhile. `handed`: its handover, where it
        is not the whole catalogue's."""
        log = self.report_dir / f"worker-{_safe(name)}{f'-{role}' if role else ''}.log"
        worker = Worker(init, timeout=self.timeout, log=log, warm_up=warm_up, on_wait=self.on_wait, wrapper=self.wrapper)
        worker.fork_server = self.fork_server
        if handed or self.handover:
            worker.hand_over(handed or self.handover)
        return worker

    def launch(self, worker: Worker) -> Worker:
        if self.fork_server and not self.workers:
            worker.hosts = self.fork_server
        worker.launch()
        self.workers.append(worker)
        return worker

    def own(self, ep: EpUnderTest, contract_id: str) -> Worker:
        """A worker for one case of contract `contract_id` alone (closed after it), even with
        --conformance-isolation none: such a check changes the state of the process it runs in.
        It is handed that contract alone, with every EP declaration: a vendor's catalogue of
        10 000 contracts took 0.4 s to unpickle in each of these workers, while the parent waited."""
        if self.handed is None:
            return self.new(ep.init, ep.requested, "own")
        catalogue, recipes = self.handed
        return self.new(ep.init, ep.requested, "own", handed=handover(catalogue.only(contract_id), recipes))

    def isolated(self, ep: EpUnderTest) -> Worker:
        """The worker of `ep`'s isolated contracts, launched when first needed."""
        if ep.isolated_worker is None:
            ep.isolated_worker = self.launch_isolated(ep.init, ep.requested)
        return ep.isolated_worker

    def launch_isolated(self, init: dict[str, Any], name: str) -> Worker:
        return self.launch(self.new(init, name, "isolated"))

    def ask_to_exit(self) -> None:
        """Nothing more is asked of the workers: they end meanwhile, and close() finds them ended."""
        for worker in self.workers:
            worker.ask_to_exit()

    def close(self) -> None:
        self.ask_to_exit()
        for worker in self.workers:
            worker.close()
        if self.fork_server:
            self.fork_server.close()


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
