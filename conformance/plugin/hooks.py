"""The pytest plugin: `pytest --ep NAME` turns the contract catalogue into checks.

Items are contracts × EP devices present × parameters. Each item's check runs in the EP's
worker process (see conformance.isolation.controller), in the item's call; its outcome maps onto pytest as README.md
("Outcomes and verdict") says: `fail` is a failure, `crash`/`timeout`/`error` are errors of the call (conformance.plugin.terminal
says how pytest and JUnit are told), everything else is a skip with its reason (in setup when it
is decided before anything runs). A broken `runtime`-subject contract is a finding against
onnxruntime and shows as xfail, so it does not fail a conformant EP's run. Without `--ep` the
plugin does nothing.

This module holds pytest's hooks and the run's plugin object (`ConformanceRun`); the command
line is `arguments.py`'s, the catalogue as this process holds it `loading.py`'s, and the items
`items.py`'s.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from conformance.plugin import arguments, ids, loading, signals, terminal

from conformance.run import runfolder
from conformance.data import contracts_dir, read_recipes, shipped_spec_dirs
from conformance.isolation.controller import WorkerLost, WorkerRefused
from conformance.isolation.in_process import InProcessWorker
from conformance.options import emulator_of
from conformance.outcomes import Result
from conformance.plugin.items import CASES_KEY, RESULT_KEY, ContractFile, ContractItem
from conformance.run.pool import AnyWorker, EpUnderTest, WorkerPool
from conformance.safe_io import UnsafeFile
from conformance.record import EpRecord, RunRecord
from conformance.run.scheduler import Scheduler
from conformance.plugin.selection import SelectionWatch, case_key, compare
from conformance.plugin import shards

# The rest of the kit (the catalogue and its YAML, applicability, waivers, reports) is imported
# where it is first used: pytest imports this plugin in every run of an environment the kit is
# installed in, with --ep or not, and a run with --ep launches its workers before it needs them.
if TYPE_CHECKING:
    from conformance.catalogue.contracts import Catalogue, Contract
    from conformance.plugin.junit_writer import JunitFiles

RUN_KEY = pytest.StashKey["ConformanceRun"]()
SIGNALS_KEY = pytest.StashKey[dict]()  # the handlers signals.install replaced
JUNIT_KEY: pytest.StashKey[JunitFiles] = pytest.StashKey()  # the report folder's junit.xml, by the process that writes the report


def pytest_addoption(parser: pytest.Parser) -> None:
    arguments.add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from conformance.plugin import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


class ConformanceRun:
    """The run's plugin object (registered like pytest's LogXML): its options, the pytest hooks
    of the whole run, and the terminal summary. The workers are the pool's, the order of the
    checks the scheduler's, what is not tried again each EP device's quarantine."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.report_dir = Path(config.getoption("conformance_report"))
        self.isolated = config.getoption("conformance_isolation") == "worker"
        self.strict = config.getoption("conformance_strict")
        self.library = config.getoption("ep_library")
        self.options, self.wrapper = arguments.parse_options(config.getoption("ep_option")), arguments.wrapper(config)  # wrapper: see --conformance-wrapper
        self.spec_selections = arguments.spec_selections(config)  # spec files and items named on the command line
        self.spec_paths = [str(p) for p in shipped_spec_dirs()] + arguments.user_spec_files(self.spec_selections)
        self.catalogue: Catalogue  # loaded by start(), once the workers are launched
        self.contract_files: dict[Path, list[Contract]] = {}  # each spec file's contracts (_by_file)
        self.eps: list[EpUnderTest] = []
        self.results: list[Result] = []
        self.made: dict[str, Result] = {}  # by node id: a result this process made, until its report is logged
        self.collected = 0
        self.started = time.time()
        self.primary = not hasattr(config, "workerinput")  # the xdist controller, or a plain run
        self.written: list[Path] = []
        self.verdict = ""
        self.selection: dict[str, Any] | None = None  # which part of the catalogue ran (set by _record)
        self.not_computed: list[str] = []  # what the report could not compute, and why (report.json's not_computed)
        self.watch = SelectionWatch.register(config)  # what pytest deselects, how the session stops, --collect-only
        self.folder = runfolder.RunFolder(self.report_dir, self.primary)  # its lock and the journal
        self.pool = WorkerPool(self.report_dir, config.getoption("conformance_timeout"), terminal.wait_notices(config), self.wrapper)
        self.report_data: dict[str, Any] | None = None  # report.json's data, once written
        self.noting: tuple[list[int], dict[int, Any]] | None = None  # signals noted since the run was interrupted (signals.note_from_now)
        # Planned ahead only where this process runs the whole session in order (isolation none: only the isolated contracts' worker).
        self.scheduler = Scheduler(self.eps, self.pool, lookahead=self.primary, probe_sizes=arguments.probe_sizes(config, self.wrapper),
                                   reruns=config.getoption("conformance_rerun"))

    def start(self, names: list[str]) -> None:
        if self.watch.collect_only:
            return _start_listing(self, names)
        _open_folder(self)
        launched = _launch(self, names)
        # With workers, the check ids are cross-checked by them (they import the checks anyway):
        # this process then never imports numpy or onnx, and its start-up does not slow theirs.
        self.catalogue = loading.load(self.spec_paths, check_ids=not self.isolated)
        self.contract_files = loading.by_file(self.catalogue)
        # The workers read no YAML: they are handed what this process has read and validated,
        # by the time they have imported onnxruntime (a fifth of a worker's start otherwise).
        self.pool.hand_over(self.catalogue, read_recipes())
        if launched:
            # This process waits for the workers' facts now: it imports the report's modules
            # (6 ms) and asks what the report says of the machine (6 ms) meanwhile, which would
            # otherwise happen when the report is written, after the last check.
            from conformance.report import html, machine, markdown  # noqa: F401

            machine()
        launched = launched or {name: _in_process(self, name) for name in names}  # --conformance-isolation none
        for name in names:
            ep = self._ready(name, launched[name])
            loading.refuse_twice(self.eps, ep)
            ep.spec = self.catalogue.ep_spec(ep.label) if ep.facts.declared else None
            self.eps.append(ep)
        self.folder.journal.eps([ep.facts for ep in self.eps], self.catalogue.digest, _machine())
        if self.primary:
            arguments.warn_of_unknown_options(self.config, self.options, [ep.facts for ep in self.eps])

    def worker_init(self, name: str) -> dict[str, Any]:
        # This process reads and validates the spec files; its workers are handed them (see start).
        return {"ep": name, "specs": self.spec_paths, "library": self.library, "options": self.options,
                "models_dir": str(self.report_dir / "models"), "models_record": str(self.report_dir / runfolder.MODELS_USED), "handover": True,
                "soak": self.config.getoption("conformance_soak")}

    def _ready(self, name: str, worker: AnyWorker) -> EpUnderTest:
        try:
            facts = worker.ready()
        except WorkerRefused as exc:
            if exc.errors:
                raise loading.invalid_specs(exc.errors) from None
            raise pytest.UsageError(str(exc)) from None
        except WorkerLost as exc:
            raise pytest.UsageError(f"EP '{name}' could not be loaded{_under(self.wrapper)}: {exc}") from None
        # Where checks are planned ahead, isolated contracts run last in the main worker (see
        # Scheduler.plan); elsewhere in a worker of their own, launched now (with
        # --conformance-isolation none, when first needed).
        wanted = worker.isolates and not self.scheduler.lookahead and any(c.isolated for c in self.catalogue.contracts)
        isolated = self.pool.launch_isolated(self.worker_init(name), name) if wanted else None
        return EpUnderTest(name, facts, worker, init=self.worker_init(name), isolated_worker=isolated)

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if self.scheduler.lookahead:
            # pytest reports the items in the order their worker runs them, isolated contracts
            # last (see Scheduler.plan): it then takes each answer as it comes, instead of
            # waiting at the first bad request for every check the worker runs before it.
            items[:] = [i for i in items if not _isolated(i)] + [i for i in items if _isolated(i)]

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = len(session.items)
        self.folder.journal.collected(self.collected)
        # The catalogue, the items and every module loaded live until the end of the run: moved
        # out of the cyclic collector's reach, they are not traversed again by each collection
        # during the run, by pytest's at unconfigure and by the interpreter's at exit (a tenth
        # of a CPU run's wall time). Memory freed by reference counting is still freed.
        gc.freeze()
        for spec_file in {item.parent for item in session.items if isinstance(item, ContractItem)}:
            if isinstance(spec_file, ContractFile):
                spec_file.case_hooks = session.gethookproxy(spec_file.path)  # see ContractItem.ihook
        if self.scheduler.lookahead and not self.watch.collect_only:
            self.scheduler.plan(item.planned() for item in session.items if isinstance(item, ContractItem) and item.decision() is None)
            self.scheduler.start_plans()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport):
        data = getattr(report, "conformance_result", None)
        if data is not None and self.primary:
            self.folder.journal.result(data)  # first: a plugin after this one may take the process down
            # The result made in this process (self.made), or read from the dict an xdist worker sent.
            self.results.append(result := self.made.pop(report.nodeid, None) or Result.from_dict(data))
            self.config.hook.pytest_conformance_result(result=result, config=self.config)
        outcome = yield
        if terminal.is_error(report):  # once JUnit's writer has seen it (see terminal.as_junit_error)
            terminal.as_junit_error(self.config, report)
        return outcome

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        # The run is ending: from now on a second Ctrl-C (or a SIGTERM) is noted, not raised,
        # until the report set is written (pytest calls this before the session's end).
        if self.primary and self.noting is None:
            self.noting = signals.note_from_now()

    @pytest.hookimpl(trylast=True)  # after pytest's JUnit writers, whose file joins the report set
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.primary or self.watch.collect_only:
            return  # --collect-only ran nothing: it leaves the last run's report as it was
        try:
            _end_session(self, session, exitstatus)
        except KeyboardInterrupt:  # where signals could not be held (not the main thread): one line, the way back
            sys.stderr.write(f"ERROR: interrupted again before the conformance report was written: `ort-conformance rebuild "
                             f"{self.report_dir}` writes it from the journal\n")
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        finally:
            noting, self.noting = self.noting, None
            signals.restore(noting[1] if noting is not None else {})

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.primary and self.written:
            _terminal_summary(self, terminalreporter)

    def close(self) -> None:
        self.pool.close()
        self.folder.close()


def _end_session(run: ConformanceRun, session: pytest.Session, exitstatus: int) -> None:
    """The session's end for the run: the last probe unless interrupted, the workers let go,
    the report set written, the strict run's answer."""
    from conformance.catalogue.spec import collector_paused

    # Under xdist the controller collects nothing itself; pytest-xdist counts for it.
    run.collected = max(run.collected, session.testscollected)
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop) or bool(session.shouldfail)
    # An interrupted run writes its report at once, not after a probe that may wait for a
    # hung worker (up to twice --conformance-timeout); Ctrl-C during the probe stops the
    # probe alone, never the report.
    if not interrupted and not run.scheduler.probe_all():
        interrupted = True
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
    # A second Ctrl-C (or a SIGTERM) from now is noted: the workers are let go and the report set written whole.
    with signals.held():
        run.scheduler.mark_not_probed()
        # Nothing more is asked of the workers: they end while the report is written (a worker
        # with onnxruntime loaded takes 5-8 ms to exit), and close() finds them ended.
        run.pool.ask_to_exit()
        # The report set's objects (several a result) are freed as each writer ends: collections
        # meanwhile traversed them all (0.4 s of a 10 000-contract run's 1.2 s report, loaded).
        with collector_paused():
            data = _write_report(run, session, interrupted)
    run.report_data = data
    if data is not None:
        run.config.hook.pytest_conformance_report(report=data, folder=run.report_dir, config=run.config)
    if run.strict and run.verdict != "conformant" and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a strict run is a yes/no answer
    # What the run made since collection (pytest's reports of every item, the results) lives
    # until the process ends: out of the cyclic collector's reach too, as at collection.
    gc.freeze()


def _terminal_summary(run: ConformanceRun, terminalreporter) -> None:
    """The verdict, its reasons and the EP's counts (as summary.md gives them), and where the report is."""
    from conformance.report import summary

    terminalreporter.section("conformance")
    colour = {"conformant": {"green": True}, "non_conformant": {"red": True}}.get(run.verdict, {"yellow": True})
    verdict = run.report_data.get("verdict_text", run.verdict) if run.report_data is not None else run.verdict
    terminalreporter.write_line(f"verdict: {verdict}" + terminal.verdict_label(run.strict, run.selection), bold=True, **colour)
    for line in summary.terminal(run.report_data) if run.report_data is not None else []:
        terminalreporter.write_line(line)
    for line, markup in terminal.ep_lines(run.eps):
        terminalreporter.write_line(line, **markup)
    for line in terminal.written_lines(run.written, run.report_dir):
        terminalreporter.write_line(line)



def _open_folder(run: ConformanceRun) -> None:
    """The report folder checked (and, by the primary, locked) before any worker starts, and
    the primary's journal opened in it, beginning with what the run is."""
    try:
        run.folder.open({"started": run.started, "specs": run.spec_paths, "strict": bool(run.strict),
                         "isolation": "worker" if run.isolated else "none", "command": " ".join(sys.argv),
                         "wrapper": " ".join(run.wrapper), "emulated": emulator_of(run.wrapper) or "",
                         "python": sys.version.split()[0], "shard": shards.as_dict(run.config)})
    except runfolder.FolderRefused as exc:
        raise pytest.UsageError(str(exc)) from None
    if run.primary:
        from conformance.plugin.junit_writer import JunitFiles

        run.config.stash[JUNIT_KEY] = JunitFiles(run.config, run.report_dir, list(dict.fromkeys(run.config.getoption("ep"))))


def _write_report(run: ConformanceRun, session: pytest.Session, interrupted: bool) -> dict[str, Any] | None:
    """The report set written (report.write_all), and the journal told; on a write that fails
    (a full disk, a symlink planted at a report's name), one line saying so, the previous set
    left as it was, and exit status 3. The journal keeps every result then: `ort-conformance
    rebuild` writes the report from it once there is room."""
    from conformance.report import repro_files as repro
    from conformance import report

    for ep in run.eps:
        run.folder.journal.capabilities(ep.label, ep.capabilities)
    record = _record(run, interrupted)
    data = report.build_or_essentials(record)
    data["not_computed"] = [*run.not_computed, *data.get("not_computed", [])]
    junit = _junit(run, data)
    try:
        run.written = report.write_all(data, run.report_dir, {"junit.xml": junit} if junit else {})  # junit.xml with the rest of the set
    except UnsafeFile as exc:
        sys.stderr.write(f"ERROR: the conformance report was not written: {exc}; "
                         f"`ort-conformance rebuild {run.report_dir}` writes it from the journal once that is mended\n")
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        return None
    try:
        run.written += repro.write(data, run.report_dir)  # repro/: failing cases' scripts
    except Exception as exc:  # the report set is written: the scripts alone are missing, and said to be, with what was written
        sys.stderr.write(f"ERROR: the reproducers (repro/) were not written: {run.report_dir / repro.FOLDER}: {type(exc).__name__}: {exc}; "
                         f"the report was: {', '.join(path.name for path in run.written)}\n")
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
    run.verdict = data["verdict"]
    run.folder.journal.finished(run.verdict, interrupted, record.finished, runfolder.run_files(run.report_dir))
    runfolder.mark_finished(run.report_dir)
    return data


def _junit(run: ConformanceRun, data: dict[str, Any]) -> bytes | None:
    """The report folder's junit.xml, or None (named in report.json's `not_computed`) where
    writing it raised: the rest of the set is written without it."""
    try:
        return run.config.stash[JUNIT_KEY].contents() if JUNIT_KEY in run.config.stash else None
    except Exception as exc:
        data["not_computed"] = [*data.get("not_computed", []), f"junit.xml: {type(exc).__name__}: {exc}"]
        return None


def _machine() -> str:
    from conformance.report import machine  # asked already, while the workers started (see start)

    return machine()


def _selection(run: ConformanceRun) -> dict[str, Any]:
    """Which part of the catalogue ran: its checks for these EP devices against the results
    (conformance.plugin.selection says why by comparison, not by the options)."""
    expected = (case_key(ep.facts.provider, contract.id, device.label, params) for contract in run.catalogue.contracts
                for ep in run.eps for device in ep.facts.devices for params in contract.cases())
    ran = (case_key(r.ep, r.contract, r.device, r.params) for r in run.results)
    # Named as the user wrote them, not as the shipped copy they stand for (see _spec_selections).
    given = [arg for arg in run.config.invocation_params.args if arguments.names_specs(arg)]
    given = given if len(given) == len(run.spec_selections) else run.spec_selections
    chosen = [as_given for as_given, arg in zip(given, run.spec_selections, strict=True) if "::" in arg or arguments.inside(arg, contracts_dir())]
    return compare(expected, ran, shards.named(run.config) + run.watch.how(chosen)).to_dict()


def _record(run: ConformanceRun, interrupted: bool) -> RunRecord:
    """What the report reads of the run, once every check and the probe are done."""
    from conformance.report import cpu_vendor, machine

    try:
        run.selection = _selection(run)
    except Exception as exc:  # the report says the run's part of the catalogue is not known, and why
        run.selection = None
        run.not_computed.append(f"which part of the catalogue ran: {type(exc).__name__}: {exc}")
    return RunRecord(
        results=tuple(run.results), eps=tuple(EpRecord(ep.facts, ep.spec, tuple(ep.capabilities)) for ep in run.eps),
        contracts=tuple(run.catalogue.contracts), spec_digest=run.catalogue.digest, collected=run.collected,
        started=run.started, finished=time.time(), interrupted=interrupted, strict=bool(run.strict),
        isolation="worker" if run.isolated else "none", python=sys.version.split()[0], platform=machine(), command=" ".join(sys.argv),
        selection=run.selection, wrapper=" ".join(run.wrapper), emulated=emulator_of(run.wrapper) or "", cpu=cpu_vendor(),
        shard=shards.as_dict(run.config),
    )


def _launch(run: ConformanceRun, names: list[str]) -> dict[str, AnyWorker]:
    """Each EP's worker process, launched (none with --conformance-isolation none): they import
    onnxruntime and load their EP while this process loads the catalogue; the first forks the
    fork server off itself before it imports onnxruntime."""
    if not run.isolated:
        return {}
    run.pool.serve_forks()
    return {name: run.pool.launch(run.pool.new(run.worker_init(name), name, warm_up=True)) for name in names}


def _in_process(run: ConformanceRun, name: str) -> InProcessWorker:
    """The worker of EP `name` in this process (--conformance-isolation none): the worker
    process's own request handler, handed the catalogue this process has read."""
    from conformance.engine.serve import Handler

    return InProcessWorker(run.worker_init(name), Handler(handed=lambda: (run.catalogue, read_recipes())).handle)


def _start_listing(run: ConformanceRun, names: list[str]) -> None:
    """--collect-only: the items are listed from the catalogue alone, without a worker, the EP's
    library or a device (and without a report); each EP is taken as one device named by its label."""
    run.catalogue = loading.load(run.spec_paths, check_ids=False)
    run.contract_files = loading.by_file(run.catalogue)
    for name in names:
        ep = loading.unprobed(run.catalogue, name)
        loading.refuse_twice(run.eps, ep)
        ep.spec = run.catalogue.ep_spec(ep.label) if ep.facts.declared else None
        run.eps.append(ep)


def _isolated(item: pytest.Item) -> bool:
    return isinstance(item, ContractItem) and item.contract.isolated


def _under(wrapper: tuple[str, ...]) -> str:
    return f" under the wrapper {' '.join(wrapper)!r}" if wrapper else ""


# --- hooks -----------------------------------------------------------------------------------


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # The markers are listed by `pytest --markers` with --ep or not: the shipped families are
    # their files' names (test_every_shipped_family_is_its_files_name), read without the YAML.
    shipped = [path.stem for path in sorted(contracts_dir().glob("*.yaml"))]
    for line in ids.marker_lines() + ids.family_lines(shipped):
        config.addinivalue_line("markers", line)
    names = list(dict.fromkeys(config.getoption("ep")))  # an EP named twice is checked once
    if not names:
        given = [option for option, value in (("--ep-library", config.getoption("ep_library")), ("--ep-option", config.getoption("ep_option"))) if value]
        if given:
            raise pytest.UsageError(f"{' and '.join(given)} without --ep: name the EP to check (--ep NAME)")
        return
    arguments.refuse_other_args(config)
    run = ConformanceRun(config)
    config.stash[RUN_KEY] = run
    config.stash[CASES_KEY] = run  # what the items read of it (items.CaseSource)
    config.pluginmanager.register(run, "conformance-run")
    shards.register(config)  # --conformance-shard: deselects the other shards' cases at collection
    if run.primary:
        # SIGTERM (CI's cancel) and SIGHUP end the run as Ctrl-C does: with a report of what ran.
        config.stash[SIGNALS_KEY] = signals.install()
    else:
        from conformance import orphans

        orphans.die_with_parent()  # an xdist worker whose controller is killed ends too, and its workers with it
    try:
        run.start(names)
    except UnsafeFile as exc:  # a symlink planted as a worker's log
        run.close()
        raise pytest.UsageError(f"--conformance-report {run.report_dir}: {exc}") from None
    except WorkerLost as exc:  # a worker that could not even be started (its wrapper or interpreter cannot be executed)
        run.close()
        raise pytest.UsageError(str(exc)) from None
    except BaseException:
        run.close()
        raise
    for line in ids.family_lines([c.family for c in run.catalogue.contracts if c.family not in shipped]):
        config.addinivalue_line("markers", line)  # a vendor's own families
    # Collect the shipped catalogue (and any spec files named on the command line), not the
    # test files of whatever folder pytest was started in.
    user_specs = run.spec_selections
    contracts = contracts_dir()
    # Items (file::id) and shipped contract files named on the command line select those; other
    # spec files (an EP declaration, a vendor's contracts) add to the whole catalogue.
    selected = any("::" in arg or arguments.inside(arg, contracts) for arg in user_specs)
    config.args[:] = user_specs + ([] if selected else [str(contracts)])


def pytest_unconfigure(config: pytest.Config) -> None:
    run = config.stash.get(RUN_KEY, None)
    if run:
        run.close()
        signals.restore(config.stash.get(SIGNALS_KEY, {}))
    junit = config.stash.get(JUNIT_KEY, None)
    if junit:
        junit.close()


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    run = parent.config.stash.get(RUN_KEY, None)
    if run is None or file_path.resolve() not in run.contract_files:
        return None
    if arguments.inside(str(file_path), contracts_dir()):
        # A shipped family's file has the id of its family, not of the folder the kit is installed in (see ids.py).
        family = next(c.family for c in run.catalogue.contracts if Path(c.file) == file_path.resolve())
        return ContractFile.from_parent(parent, path=file_path, nodeid=ids.file_id(family))
    return ContractFile.from_parent(parent, path=file_path)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config):
    # With --ep, only spec files are collected: never the Python tests of the folder.
    if config.stash.get(RUN_KEY, None) is not None and collection_path.is_file() and collection_path.suffix == ".py":
        return True
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    result = item.stash.get(RESULT_KEY, None) if isinstance(item, ContractItem) else None
    if result is not None and call.when == "teardown":
        # Carried on the report so that it reaches the xdist controller too.
        outcome.get_result().conformance_result = result.to_dict()
        if (run := item.config.stash.get(RUN_KEY, None)) is not None and run.primary:
            run.made[item.nodeid] = result
    if result is not None and call.when == "call":
        report = outcome.get_result()
        terminal.mark_outcome(report, result)
        report.duration = terminal.duration(result, report.duration)


def pytest_report_teststatus(report: pytest.TestReport):
    return terminal.teststatus(report)
