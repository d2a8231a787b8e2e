"""The EPs under test and the workers that run their checks: launching, the fork server, closing.

Must not know: pytest, the order of checks (scheduler.py), the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from conformance.facts import EpFacts
from conformance.isolation.fork_client import ForkServer
from conformance.isolation.controller import Waiting, Worker
from conformance.isolation.in_process import InProcessWorker
from conformance.run.quarantine import Quarantine


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
        self.on_wait = on_wait  # every worker's: hears a slow reply (see isolation.Waiting)

    def serve_forks(self) -> None:
        if ForkServer.supported():
            self.fork_server = ForkServer()

    def hand_over(self, handover: dict[str, Any]) -> None:
        """What every worker is handed, those launched already and those to come."""
        self.handover = handover
        for worker in self.workers:
            worker.hand_over(handover)

    def new(self, init: dict[str, Any], name: str, role: str = "", warm_up: bool = False) -> Worker:
        """A worker for EP `name`, not started, logging to reports/worker-NAME[-ROLE].log; the
        run's fork server forks its processes once it serves. `warm_up`: it is started before
        collection, and may prepare for its checks meanwhile."""
        log = self.report_dir / f"worker-{_safe(name)}{f'-{role}' if role else ''}.log"
        worker = Worker(init, timeout=self.timeout, log=log, warm_up=warm_up, on_wait=self.on_wait, wrapper=self.wrapper)
        worker.fork_server = self.fork_server
        if self.handover:
            worker.hand_over(self.handover)
        return worker

    def launch(self, worker: Worker) -> Worker:
        if self.fork_server and not self.workers:
            worker.hosts = self.fork_server
        worker.launch()
        self.workers.append(worker)
        return worker

    def own(self, ep: EpUnderTest) -> Worker:
        """A worker for one case alone (closed after it), even with --conformance-isolation none:
        such a check changes the state of the process it runs in."""
        return self.new(ep.init, ep.requested, "own")

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
