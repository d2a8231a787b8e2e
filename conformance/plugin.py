"""The pytest plugin: `pytest --ep NAME` turns the contract catalogue into checks.

Items are contracts × EP devices present × parameters. Each item's check runs in the EP's
worker process (see isolation.py); its outcome maps onto pytest as DESIGN.md says: `fail` is a
failure, `crash`/`timeout`/`error` are errors (raised in setup), everything else is a skip with
its reason. A broken `runtime`-subject contract is a finding against onnxruntime and shows as
xfail, so it does not fail a conformant EP's run. Without `--ep` the plugin does nothing.
"""

from __future__ import annotations

import gc
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from conformance.attribution import outcome_of
from conformance.calls import Call
from conformance.data import contracts_dir, read_recipes, shipped_spec_dirs
from conformance.forkserver import ForkServer
from conformance.isolation import Worker, WorkerLost, WorkerRefused, handover
from conformance.options import ep_options, reason_of, seconds
from conformance.outcomes import PYTEST_ERRORS, Outcome, Result

# The rest of the kit (the catalogue and its YAML, applicability, waivers, reports) is imported
# where it is first used: pytest imports this plugin in every run of an environment the kit is
# installed in, with --ep or not, and a run with --ep launches its workers before it needs them.
if TYPE_CHECKING:
    from conformance.applicability import Skip
    from conformance.contracts import Catalogue, Contract

RUN_KEY = pytest.StashKey["ConformanceRun"]()
# Quarantine. A check lost to a crash or hang names the onnxruntime call it was making (the
# worker announces each risky call before making it): that call is not made again on that EP
# device after its first loss, and later checks stop before it as not_run, naming the call and
# the lost check; every other check still runs. After one loss, not several: the same call on
# the same device with the same kind of request fails the same way in practice, and each loss
# costs a worker restart and, for a hang, the whole timeout. A loss with no call announced
# (the kit lost in its own code, or an EP crashing outside any announced call) quarantines the
# check's own call pattern, and after this many such losses the device's remaining checks.
LOST_CHECKS_PER_DEVICE = 3
RESULT_KEY = pytest.StashKey[Result]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "ONNX Runtime EP conformance (ort-ep-conformance)")
    group.addoption("--ep", action="append", default=[], metavar="NAME",
                    help="EP to check: an alias from the EP specs (cpu, webgpu, refdev, ...) or the provider's own name "
                         "(e.g. CUDAExecutionProvider); repeatable. "
                         "Without --ep the plugin collects nothing. Spec files named on the command line "
                         "(myep.yaml) are checked with the shipped catalogue; one declaring a shipped EP replaces its shipped spec. "
                         "Examples: pytest --ep=cpu; pytest --ep=cpu --junitxml=reports/junit.xml -n 2")
    group.addoption("--ep-library", metavar="PATH",
                    help="register this plugin EP library first; --ep names the EP it provides "
                         "(e.g. pytest --ep-library ./libmy_ep.so --ep MyEp)")
    group.addoption("--ep-option", action="append", default=[], metavar="KEY=VALUE",
                    help="provider option for the EP (keys starting with 'session.' become session config entries); "
                         "repeatable (e.g. --ep-option device_id=1)")
    group.addoption("--conformance-report", metavar="DIR", default="reports",
                    help="folder for report.json, report.md, report.html and the models used (default: reports/)")
    group.addoption("--conformance-timeout", metavar="SECONDS", type=seconds, default=60.0,
                    help="time one check may take before its worker is killed and the check recorded as timeout (default: 60)")
    group.addoption("--conformance-isolation", choices=("worker", "none"), default="worker",
                    help="worker (default): checks run in a child process per EP; none: in the pytest process (for measurements "
                         "only), except contracts marked isolated or own_process (bad requests, the library's lifecycle), which "
                         "always run in a worker: they can take the process down")
    group.addoption("--conformance-strict", action="store_true", default=False,
                    help="certification mode: a required contract that could not run on an EP device (or declared not applicable "
                         "by the EP spec), or an incomplete run, fails the run (exit 1 unless conformant); the report says it was a strict run")


@dataclass
class EpUnderTest:
    requested: str
    facts: dict[str, Any]
    worker: Worker | None
    runner: Any  # conformance.runner.Runner when isolation is off (imported only then: it imports onnx)
    capabilities: list[dict[str, Any]] = field(default_factory=list)
    quarantine: dict[tuple, str] = field(default_factory=dict)
    lost: dict[int, int] = field(default_factory=dict)  # device index -> checks lost with no call announced
    # device index -> call -> why it is not made again (a check lost while making it)
    quarantined_calls: dict[int, dict[str, str]] = field(default_factory=dict)
    # A second worker for contracts marked `isolated` (bad requests that may corrupt memory),
    # where they cannot simply run after every other check of the main worker: under xdist
    # (items arrive as the controller schedules them) and with --conformance-isolation none.
    isolated_worker: Worker | None = None
    init: dict[str, Any] = field(default_factory=dict)  # what starts a worker for this EP
    spec: Any = None  # its declaration in the catalogue (contracts.EpSpec), where it has one

    @property
    def label(self) -> str:
        return self.facts["label"]


class ConformanceRun:
    def __init__(self, config: pytest.Config):
        self.config = config
        self.report_dir = Path(config.getoption("conformance_report"))
        self.timeout = config.getoption("conformance_timeout")
        self.isolated = config.getoption("conformance_isolation") == "worker"
        self.strict = config.getoption("conformance_strict")
        self.library = config.getoption("ep_library")
        self.options = _parse_options(config.getoption("ep_option"))
        self.spec_selections = _spec_selections(config)  # spec files and items named on the command line
        self.spec_paths = [str(p) for p in shipped_spec_dirs()] + _user_spec_files(self.spec_selections)
        self.catalogue: Catalogue | None = None  # loaded by start(), once the workers are launched
        self.handover: dict[str, Any] | None = None  # the catalogue and recipes, for every worker (isolation.handover)
        self.contract_files: set[Path] = set()
        self.workers: list[Worker] = []  # every worker launched, to close them all
        # Forks every worker but the first, which hosts it: replacements after a crash or hang,
        # and the workers of isolated and own-process contracts (see forkserver.py).
        self.fork_server: ForkServer | None = None
        self.eps: list[EpUnderTest] = []
        self.results: list[Result] = []
        self.collected = 0
        self.started = time.time()
        self.primary = not hasattr(config, "workerinput")  # the xdist controller, or a plain run
        self.written: list[Path] = []
        self.verdict = ""
        # Requests each worker will be asked for, in run order (checks, then the copy probe):
        # sent ahead in one batch so that the worker runs checks while pytest reports earlier
        # ones. Only where this process runs the whole session in order (not an xdist worker,
        # whose items arrive as the controller schedules them). With --conformance-isolation
        # none only the worker of the isolated contracts has a plan.
        self.lookahead = self.primary
        self.plans: dict[Worker, list[Planned]] = {}
        self.plan_position: dict[tuple[Worker, str], int] = {}

    def start(self, names: list[str]) -> None:
        _check_writable(self.report_dir)
        # Workers import onnxruntime and load their EP while this process loads the catalogue;
        # the first forks the fork server off itself before it imports onnxruntime.
        if self.isolated and ForkServer.supported():
            self.fork_server = ForkServer()
        launched = {name: self._launch(self._new_worker(self._init(name), name, warm_up=True)) for name in names} if self.isolated else {}
        # With workers, the check ids are cross-checked by them (they import the checks anyway):
        # this process then never imports numpy or onnx, and its start-up does not slow theirs.
        self.catalogue = _load(self.spec_paths, check_ids=not self.isolated)
        self.contract_files = {Path(f).resolve() for f in self.catalogue.files}
        # The workers read no YAML: they are handed what this process has read and validated,
        # by the time they have imported onnxruntime (a fifth of a worker's start otherwise).
        self.handover = handover(self.catalogue, read_recipes())
        for worker in launched.values():
            worker.hand_over(self.handover)
        if launched:
            # This process waits for the workers' facts now: it imports the report's modules
            # (6 ms) and asks what the report says of the machine (6 ms) meanwhile, which would
            # otherwise happen when the report is written, after the last check.
            from conformance.report import html, machine, markdown  # noqa: F401

            machine()
        for name in names:
            if self.isolated:
                ep = self._ready(name, launched[name])
            else:
                from conformance.eps import EpUnavailable
                from conformance.runner import Runner

                try:
                    runner = Runner(name, specs=self.spec_paths, library=self.library, options=self.options, models_dir=self._init(name)["models_dir"],
                                    handed=lambda: (self.catalogue, read_recipes()))
                except EpUnavailable as exc:
                    raise pytest.UsageError(str(exc)) from None
                ep = EpUnderTest(name, runner.facts, None, runner, init=self._init(name))
            self._refuse_twice(ep)
            ep.spec = self.catalogue.ep_spec(ep.label) if ep.facts["declared"] else None
            self.eps.append(ep)

    def _refuse_twice(self, ep: EpUnderTest) -> None:
        same = next((other for other in self.eps if other.facts["provider"] == ep.facts["provider"]), None)
        if same:
            raise pytest.UsageError(f"--ep {same.requested} and --ep {ep.requested} name the same EP ({ep.facts['provider']}): give it once")

    def _init(self, name: str) -> dict[str, Any]:
        # This process reads and validates the spec files; its workers are handed them (see start).
        return {"ep": name, "specs": self.spec_paths, "library": self.library, "options": self.options,
                "models_dir": str(self.report_dir / "models"), "handover": True}

    def _new_worker(self, init: dict[str, Any], name: str, role: str = "", warm_up: bool = False) -> Worker:
        """A worker for EP `name`, not started, logging to reports/worker-NAME[-ROLE].log; the
        run's fork server forks its processes once it serves. `warm_up`: it is started before
        collection, and may prepare for its checks meanwhile."""
        log = self.report_dir / f"worker-{_safe(name)}{f'-{role}' if role else ''}.log"
        worker = Worker(init, timeout=self.timeout, log=log, warm_up=warm_up)
        worker.fork_server = self.fork_server
        if self.handover:
            worker.hand_over(self.handover)
        return worker

    def _launch(self, worker: Worker) -> Worker:
        if self.fork_server and not self.workers:
            worker.hosts = self.fork_server
        worker.launch()
        self.workers.append(worker)
        return worker

    def _ready(self, name: str, worker: Worker) -> EpUnderTest:
        try:
            facts = worker.ready()
        except WorkerRefused as exc:
            if exc.kind == "SpecErrors":
                raise _invalid_specs(str(exc).splitlines()) from None
            raise pytest.UsageError(str(exc)) from None
        except WorkerLost as exc:
            raise pytest.UsageError(f"EP '{name}' could not be loaded: {exc}") from None
        # Where checks are planned ahead, isolated contracts run last in the main worker (see
        # _plan); elsewhere in a worker of their own, launched now.
        wanted = not self.lookahead and any(c.isolated for c in self.catalogue.contracts)
        isolated = self._launch_isolated(self._init(name), name) if wanted else None
        return EpUnderTest(name, facts, worker, None, init=self._init(name), isolated_worker=isolated)

    def _probe(self, ep: EpUnderTest) -> None:
        for device in ep.facts["devices"]:
            planned = self._planned_probe(device)
            try:
                if ep.worker:
                    ep.capabilities.append(self._collect(ep.worker, planned)["capabilities"])
                else:
                    from conformance.capabilities import capability_matrix

                    ep.capabilities.append(capability_matrix(ep.runner.context(device["index"]), planned.request["sizes"]))
            except (WorkerLost, WorkerRefused) as exc:
                ep.capabilities.append({"ep": ep.facts["provider"], "device": device["label"], "error": str(exc), "pairs": []})

    def _probe_all(self) -> bool:
        """The copy matrix of every EP device; False when Ctrl-C stopped it."""
        try:
            for ep in self.eps:
                self._probe(ep)
        except KeyboardInterrupt:
            return False
        return True

    def _mark_not_probed(self) -> None:
        for ep in self.eps:
            ep.capabilities += [{"ep": ep.facts["provider"], "device": device["label"], "error": "not probed: the run was interrupted", "pairs": []}
                                for device in ep.facts["devices"][len(ep.capabilities):]]

    def run_case(self, item: "ContractItem") -> tuple[Outcome, str, dict, float]:
        if item.contract.own_process:
            worker = self._own_worker(item.ep)
            try:
                return outcome_of(lambda: worker.request(self._request(worker, item.planned()), what=item.planned().what)["result"])
            finally:
                worker.close()
        if not self._runs_in_worker(item):
            return outcome_of(lambda: item.ep.runner.run(item.contract.id, item.device["index"], item.params))
        return outcome_of(lambda: self._collect(self._worker_for(item), item.planned())["result"])

    def _worker_for(self, item: "ContractItem") -> Worker:
        if not item.contract.isolated or (self.lookahead and item.ep.worker):
            return item.ep.worker
        return self._isolated_worker(item.ep)

    def _runs_in_worker(self, item: "ContractItem") -> bool:
        """Isolated contracts run in a worker even with --conformance-isolation none: a bad
        request may abort onnxruntime (as a failed rebind does on the CPU EP of 1.32), and
        pytest itself must never die. Own-process contracts are not planned (see run_case)."""
        return not item.contract.own_process and (item.contract.isolated or item.ep.worker is not None)

    def _own_worker(self, ep: EpUnderTest) -> Worker:
        """A worker for one case alone (closed after it), even with --conformance-isolation none:
        such a check changes the state of the process it runs in."""
        return self._new_worker(ep.init, ep.requested, "own")

    def _isolated_worker(self, ep: EpUnderTest) -> Worker:
        if ep.isolated_worker is None:
            ep.isolated_worker = self._launch_isolated(ep.init, ep.requested)
        return ep.isolated_worker

    def _launch_isolated(self, init: dict[str, Any], name: str) -> Worker:
        return self._launch(self._new_worker(init, name, "isolated"))

    def _collect(self, worker: Worker, planned: "Planned") -> dict[str, Any]:
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

    def _send_ahead(self, worker: Worker, planned: "Planned") -> None:
        worker.submit([(p.id, self._request(worker, p), p.what) for p in self._ahead(worker, planned)])

    def _request(self, worker: Worker, planned: "Planned") -> dict[str, Any]:
        """`planned`'s request with the calls quarantined on its EP device so far (a request is
        sent again after a loss, so the ones that follow a loss know of it)."""
        ep = next((ep for ep in self.eps if ep.init.get("ep") == worker.init["ep"]), None)
        calls = ep.quarantined_calls.get(planned.request["device"]) if ep else None
        return dict(planned.request, quarantined=calls) if calls else planned.request

    def _ahead(self, worker: Worker, planned: "Planned") -> list["Planned"]:
        """`planned`, then the rest of the worker's plan that is still to run."""
        position = self.plan_position.get((worker, planned.id))
        if position is None:
            return [planned]
        rest = self.plans[worker][position + 1:]
        return [planned] + [p for p in rest if not worker.outstanding(p.id) and not (p.item and p.item.quarantined())]

    def _plan(self, items: list[pytest.Item]) -> None:
        """Each worker's requests in the order it runs them: the checks, the copy probe, and
        last the isolated contracts (bad requests), so that whatever they break in the worker
        cannot leak into a check or the probe; a worker lost to one is replaced for the rest."""
        # Contracts run in a process of their own (own_process) are not sent ahead.
        planned = [item for item in items if isinstance(item, ContractItem) and self._runs_in_worker(item) and item.decision() is None]
        for item in planned:
            if not item.contract.isolated:
                self.plans.setdefault(self._worker_for(item), []).append(item.planned())
        for ep in self.eps:
            if ep.worker:
                self.plans.setdefault(ep.worker, []).extend(self._planned_probe(device) for device in ep.facts["devices"])
        for item in planned:
            if item.contract.isolated:
                self.plans.setdefault(self._worker_for(item), []).append(item.planned())
        self.plan_position = {(worker, p.id): i for worker, plan in self.plans.items() for i, p in enumerate(plan)}

    def _planned_probe(self, device: dict[str, Any]) -> "Planned":
        # Where no check runs (--collect-only), the directions are probed but not timed.
        request = {"op": "probe", "device": device["index"], "sizes": [] if self.config.option.collectonly else None}
        return Planned(f"probe:{device['index']}", request, "the copy probe")

    # --- hooks of the run (registered as a plugin object, like pytest's LogXML) -------------

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if self.lookahead:
            # pytest reports the items in the order their worker runs them, isolated contracts
            # last (see _plan): it then takes each answer as it comes, instead of waiting at the
            # first bad request for every check the worker runs before it.
            items[:] = [i for i in items if not _isolated(i)] + [i for i in items if _isolated(i)]

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = len(session.items)
        # The catalogue, the items and every module loaded live until the end of the run: moved
        # out of the cyclic collector's reach, they are not traversed again by each collection
        # during the run, by pytest's at unconfigure and by the interpreter's at exit (a tenth
        # of a CPU run's wall time). Memory freed by reference counting is still freed.
        gc.freeze()
        if self.lookahead:
            self._plan(session.items)
        if self.lookahead and not self.config.option.collectonly:
            # The main workers are ready: they start on their plans now, not when pytest
            # reaches the first item that needs them (which may be an isolated contract's).
            for ep in self.eps:
                if self.plans.get(ep.worker):
                    self._send_ahead(ep.worker, self.plans[ep.worker][0])

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "conformance_result", None)
        if data is not None and self.primary:
            self.results.append(Result.from_dict(data))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.primary:
            return
        # Under xdist the controller collects nothing itself; pytest-xdist counts for it.
        self.collected = max(self.collected, session.testscollected)
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop) or bool(session.shouldfail)
        # An interrupted run writes its report at once, not after a probe that may wait for a
        # hung worker (up to twice --conformance-timeout); Ctrl-C during the probe stops the
        # probe alone, never the report.
        if not interrupted and not self._probe_all():
            interrupted = True
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.INTERRUPTED
        self._mark_not_probed()
        # Nothing more is asked of the workers: they end while the report is written (a worker
        # with onnxruntime loaded takes 5-8 ms to exit), and close() finds them ended.
        for worker in self.workers:
            worker.ask_to_exit()
        from conformance import report

        data = report.build(self, interrupted=interrupted)
        self.written = report.write_all(data, self.report_dir)
        self.verdict = data["verdict"]
        if self.strict and self.verdict != "conformant" and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a strict run is a yes/no answer
        # What the run made since collection (pytest's reports of every item, the results) lives
        # until the process ends: out of the cyclic collector's reach too, as at collection.
        gc.freeze()

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.primary or not self.written:
            return
        terminalreporter.section("conformance")
        colour = {"conformant": {"green": True}, "non_conformant": {"red": True}}.get(self.verdict, {"yellow": True})
        terminalreporter.write_line(f"verdict: {self.verdict}" + (" (strict run)" if self.strict else ""), bold=True, **colour)
        for ep in self.eps:
            if ep.facts.get("unusable"):
                terminalreporter.write_line(f"{ep.label}: nothing ran: {ep.facts['unusable']}", yellow=True)
            if ep.facts.get("spec") and "overrides the shipped" in ep.facts["spec"]:
                terminalreporter.write_line(f"{ep.label}: EP spec {ep.facts['spec']}")
        for path in self.written:
            terminalreporter.write_line(f"report: {path}")

    def close(self) -> None:
        for worker in self.workers:
            worker.ask_to_exit()
        for worker in self.workers:
            worker.close()
        if self.fork_server:
            self.fork_server.close()


def _isolated(item: pytest.Item) -> bool:
    return isinstance(item, ContractItem) and item.contract.isolated


@dataclass(frozen=True)
class Planned:
    """A request for a worker: its id (the item's node id), the request, and what to call it."""

    id: str
    request: dict[str, Any]
    what: str
    item: "ContractItem | None" = None


def _check_writable(folder: Path) -> None:
    """Refuses, before any check runs, a report folder whose report could not be written at the end."""
    if folder.exists() and not folder.is_dir():
        raise pytest.UsageError(f"--conformance-report {folder}: is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as exc:
        raise pytest.UsageError(f"--conformance-report {folder}: cannot be written: {reason_of(exc)}") from None


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _parse_options(pairs: list[str]) -> dict[str, str]:
    try:
        return ep_options(pairs)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _user_spec_args(config: pytest.Config) -> list[str]:
    """Spec files named on the command line, or items of them (`copy.yaml::copy.roundtrip-exact[...]`)."""
    return [arg for arg in config.args if Path(arg.split("::")[0]).suffix in (".yaml", ".yml")]


def _spec_selections(config: pytest.Config) -> list[str]:
    """Those arguments, with a checkout's copy of a shipped spec file named as the shipped file."""
    selections = []
    for arg in _user_spec_args(config):
        file, separator, item = arg.partition("::")
        selections.append(_shipped_copy_of(file) + separator + item)
    return selections


def _shipped_copy_of(file: str) -> str:
    """The shipped spec file that `file` is, or `file` itself. A checkout's `specs/contracts/x.yaml`
    is the shipped file when the kit was installed from that checkout (not editable): the
    installed package carries a copy, which is the one the catalogue holds."""
    path = Path(file)
    for folder in shipped_spec_dirs():
        if _inside(file, folder):
            return file
        shipped = folder / path.name
        if path.parent.name == folder.name and shipped.is_file() and path.is_file() and shipped.read_bytes() == path.read_bytes():
            return str(shipped)
    return file


def _user_spec_files(selections: list[str]) -> list[str]:
    """The files of those selections that the shipped specs do not already hold, each once."""
    files = dict.fromkeys(arg.split("::")[0] for arg in selections)
    return [file for file in files if not any(_inside(file, folder) for folder in shipped_spec_dirs())]


def _inside(file: str, folder: Path) -> bool:
    return Path(file).resolve().is_relative_to(folder.resolve())


def _refuse_other_args(config: pytest.Config) -> None:
    """With --ep only spec files are collected: a test file or folder named on the command line
    would be dropped without a word, so it is a usage error."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return  # testpaths or the current folder, not the user's choice
    specs = _user_spec_args(config)
    others = [arg for arg in config.args if arg not in specs]
    if others:
        raise pytest.UsageError(f"with --ep, pytest collects the contract catalogue and the spec files (*.yaml) named on the "
                                f"command line; not {', '.join(others)}")


def _load(paths: list[str], *, check_ids: bool = True) -> Catalogue:
    """The catalogue, validated; `check_ids`: also that every contract names a known check
    (which imports the checks, and with them numpy and onnx)."""
    from conformance.checks import CHECKS, load_all
    from conformance.spec import SpecErrors, load_catalogue

    if check_ids:
        load_all()
    try:
        return load_catalogue(paths, known_checks=CHECKS if check_ids else ())
    except SpecErrors as exc:
        raise _invalid_specs([str(e) for e in exc.errors]) from None


def _invalid_specs(errors: list[str]) -> pytest.UsageError:
    return pytest.UsageError(f"invalid spec files ({len(errors)} error{'s' if len(errors) != 1 else ''}):\n" + "\n".join(f"  {e}" for e in errors))


# --- hooks -----------------------------------------------------------------------------------


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    names = list(dict.fromkeys(config.getoption("ep")))  # an EP named twice is checked once
    if not names:
        given = [option for option, value in (("--ep-library", config.getoption("ep_library")), ("--ep-option", config.getoption("ep_option"))) if value]
        if given:
            raise pytest.UsageError(f"{' and '.join(given)} without --ep: name the EP to check (--ep NAME)")
        return
    _refuse_other_args(config)
    config.addinivalue_line("markers", "conformance: a contract check generated by ort-ep-conformance")
    run = ConformanceRun(config)
    config.stash[RUN_KEY] = run
    config.pluginmanager.register(run, "conformance-run")
    try:
        run.start(names)
    except BaseException:
        run.close()
        raise
    # Collect the shipped catalogue (and any spec files named on the command line), not the
    # test files of whatever folder pytest was started in.
    user_specs = run.spec_selections
    contracts = contracts_dir()
    # Items (file::id) and shipped contract files named on the command line select those; other
    # spec files (an EP declaration, a vendor's contracts) add to the whole catalogue.
    selected = any("::" in arg or _inside(arg, contracts) for arg in user_specs)
    config.args[:] = user_specs + ([] if selected else [str(contracts)])


def pytest_unconfigure(config: pytest.Config) -> None:
    run = config.stash.get(RUN_KEY, None)
    if run:
        run.close()


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    run = parent.config.stash.get(RUN_KEY, None)
    if run is None or file_path.resolve() not in run.contract_files:
        return None
    return ContractFile.from_parent(parent, path=file_path)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config):
    # With --ep, only spec files are collected: never the Python tests of the folder.
    if config.stash.get(RUN_KEY, None) is not None and collection_path.is_file() and collection_path.suffix == ".py":
        return True
    return None


class ContractFile(pytest.File):
    def collect(self):
        run: ConformanceRun = self.config.stash[RUN_KEY]
        here = self.path.resolve()
        for contract in run.catalogue.contracts:
            if Path(contract.file) != here:
                continue
            for ep in run.eps:
                for device in ep.facts["devices"]:
                    for params in contract.cases():
                        label = "-".join([device["label"], *map(str, params.values())])
                        yield ContractItem.from_parent(self, name=f"{contract.id}[{label}]", contract=contract, ep=ep, device=device, params=params)


class ContractFailure(Exception):
    def __init__(self, result: Result, contract: Contract):
        super().__init__(result.message)
        self.result = result
        self.contract = contract


class ContractItem(pytest.Item):
    def __init__(self, *, contract: Contract, ep: EpUnderTest, device: dict[str, Any], params: dict[str, Any], **kwargs):
        super().__init__(**kwargs)
        self.contract = contract
        self.ep = ep
        self.device = device
        self.params = params
        self.run: ConformanceRun = self.config.stash[RUN_KEY]
        self.add_marker(pytest.mark.conformance)
        self._decision: tuple[Skip | None] | None = None

    def decision(self) -> Skip | None:
        """Whether the contract applies here (a pure function of the facts, so decided once)."""
        if self._decision is None:
            from conformance import applicability

            self._decision = (applicability.decide(self.contract, self.ep.facts, self.device, self.ep.spec),)
        return self._decision[0]

    def planned(self) -> Planned:
        request = {"op": "run", "contract": self.contract.id, "device": self.device["index"], "params": self.params}
        return Planned(self.nodeid, request, f"{self.contract.id} on {self.device['label']}", self)

    def _result(self, outcome: Outcome, message: str, details: dict | None = None, duration: float = 0.0) -> Result:
        return Result(
            contract=self.contract.id, ep=self.ep.facts["provider"], device=self.device["label"], params=self.params,
            outcome=outcome, message=message, spec=str(self.contract.location), severity=self.contract.severity,
            subject=(details or {}).get("subject", self.contract.subject), nodeid=self.nodeid, duration=duration, details=details or {},
        )

    def quarantined(self) -> str:
        if self._crash_key() in self.ep.quarantine:
            return self.ep.quarantine[self._crash_key()]
        lost = self.ep.lost.get(self.device["index"], 0)
        if lost >= LOST_CHECKS_PER_DEVICE:
            return f"the EP device crashed or hung outside any announced call in {lost} checks; its remaining checks are not run"
        return ""

    def _quarantine(self, lost: Result) -> None:
        call = lost.details.get("call")
        if call:
            calls = self.ep.quarantined_calls.setdefault(self.device["index"], {})
            calls[str(Call.from_wire(call))] = f"that call ended in {lost.outcome.value} in the earlier check {self.name}, so it is not made again on this EP device"
            return
        self.ep.quarantine[self._crash_key()] = f"an earlier check making the same call ({self.name}) ended in {lost.outcome.value}"
        if lost.subject == "ep":  # onnxruntime's own crash says nothing about the EP device
            self.ep.lost[self.device["index"]] = self.ep.lost.get(self.device["index"], 0) + 1

    def _crash_key(self) -> tuple:
        """Checks that make the same call on the same EP device share one crash."""
        return (self.contract.check, self.device["index"], self.params.get("direction"))

    def setup(self) -> None:
        skip = self.decision()
        if skip:
            result = self._result(skip.outcome, skip.reason)
        elif self.quarantined():
            result = self._result(Outcome.NOT_RUN, f"not run: {self.quarantined()}")
        else:
            result = self._result(*self.run.run_case(self))
            if result.outcome in (Outcome.CRASH, Outcome.TIMEOUT):
                self._quarantine(result)
        from conformance import strict as strict_rules
        from conformance import waivers as waiver_rules

        result = waiver_rules.apply(result, self.ep.spec, self.ep.facts)
        if self.run.strict:
            result = strict_rules.mark(result, self.contract, self.ep.spec)
        self.stash[RESULT_KEY] = result
        self.user_properties.extend(result.case_properties())
        if result.is_finding:
            return  # a fail, crash or timeout of onnxruntime's own promise: xfail in runtest
        if result.outcome in PYTEST_ERRORS:
            pytest.fail(f"[{result.outcome.value}] {result.message}", pytrace=False)
        if result.outcome not in (Outcome.PASS, Outcome.FAIL) and not result.details.get("strict"):
            pytest.skip(f"[{result.outcome.value}] {result.message}")

    def runtest(self) -> None:
        result = self.stash[RESULT_KEY]
        if result.details.get("strict"):
            pytest.fail(f"[{result.outcome.value}] strict run: {result.details['strict']}", pytrace=False)
        if result.is_finding:
            prefix = "" if result.outcome is Outcome.FAIL else f"[{result.outcome.value}] "
            pytest.xfail(f"finding against onnxruntime, not the EP: {prefix}{result.message}")
        if result.outcome is Outcome.FAIL:
            raise ContractFailure(result, self.contract)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ContractFailure):
            from conformance import report

            return report.describe_failure(excinfo.value.result, self.contract)
        if isinstance(excinfo.value, pytest.xfail.Exception):
            return str(excinfo.value)  # its reason says it all; a traceback of the plugin would not
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, self.contract.location.line - 1, f"{self.contract.id} [{self.contract.severity}]: {self.contract.statement}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    result = item.stash.get(RESULT_KEY, None) if isinstance(item, ContractItem) else None
    if result is not None and call.when == "teardown":
        # Carried on the report so that it reaches the xdist controller too.
        outcome.get_result().conformance_result = result.to_dict()
