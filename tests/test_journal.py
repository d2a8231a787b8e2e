"""The results journal (conformance/run/journal.py), `ort-conformance rebuild`, the signals that end
a run (conformance/plugin/signals.py) and the report folder's lock (conformance/run/runfolder.py).

The runs killed here are pytest processes of their own, on the reference EP in its `hang` fault
mode: the first copy never returns, so the run is stopped mid-check, as CI's cancel or the OOM
killer stops one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conformance.facts import DeviceFacts, EpFacts
from conformance.run import journal, runfolder

from conformance.plugin import signals
from conformance.cli import main as cli
from conformance.outcomes import Outcome, Result
from processes import assert_none_outlive, hung_run, processes_in, results_in


def test_after_sigkill_every_result_is_in_the_journal_and_rebuild_writes_the_report(refdev_library, tmp_path, capsys):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "report.json").write_text('{"verdict": "conformant"}')  # the last run's, to be replaced
    process = hung_run(refdev_library, tmp_path)
    workers = processes_in(tmp_path) - {process.pid}
    assert workers, "the run has no workers to outlive it"
    before = results_in(reports)
    process.kill()
    process.wait()
    assert_none_outlive(workers)  # a worker hung in CopyTensors too
    contents = journal.read(reports)
    assert contents.finished is None and len(contents.results) >= before >= 3
    assert contents.eps and contents.eps[0].label == "refdev"
    # No older verdict stands beside the killed run's journal: the last run's set was moved
    # aside when the run started, and the folder says the run did not finish.
    assert not (reports / "report.json").exists()
    assert json.loads((reports / "previous" / "report.json").read_text()) == {"verdict": "conformant"}
    assert "ort-conformance rebuild" in (reports / runfolder.UNFINISHED).read_text()
    assert cli(["rebuild", str(reports)]) == 0
    assert not (reports / runfolder.UNFINISHED).exists()
    assert "did not finish (interrupted)" in capsys.readouterr().out
    report = json.loads((reports / "report.json").read_text())
    assert report["run"]["interrupted"] is True and report["verdict"] in ("incomplete", "non_conformant")
    assert len(report["results"]) == len(contents.results)
    assert {r["nodeid"] for r in report["results"]} == {r.nodeid for r in contents.results}
    assert (reports / "report.md").exists() and (reports / "report.html").exists()


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_end_the_run_as_ctrl_c_does_with_its_report(refdev_library, tmp_path, sent):
    process = hung_run(refdev_library, tmp_path)
    workers = processes_in(tmp_path) - {process.pid}
    process.send_signal(sent)
    output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    report = json.loads((tmp_path / "reports" / "report.json").read_text())
    assert report["run"]["interrupted"] is True and report["verdict"] != "conformant"
    assert journal.read(tmp_path / "reports").finished["interrupted"] is True
    assert_none_outlive(workers)


def test_a_journal_cut_short_by_a_kill_is_read_up_to_its_last_whole_line(tmp_path):
    written = journal.Journal(tmp_path, {"started": 1.0, "specs": []})
    written.eps([EpFacts("cpu", "CPUExecutionProvider", "cpu")], "d1", "Linux")
    result = Result(contract="c.x", ep="CPUExecutionProvider", device="cpu", params={}, outcome=Outcome.PASS, message="ok",
                    spec="x.yaml:1", severity="required", subject="ep", nodeid="x.yaml::c.x[cpu]")
    written.result(result.to_dict())
    written.close()
    with open(tmp_path / journal.NAME, "a") as file:
        file.write('{"kind": "result", "resu')  # the line being written when the process was killed
    contents = journal.read(tmp_path)
    assert contents.cut_short and contents.finished is None and contents.digest == "d1"
    assert [r.nodeid for r in contents.results] == ["x.yaml::c.x[cpu]"]


def test_the_eps_of_a_journal_read_back_as_written_and_what_is_no_eps_facts_is_skipped(tmp_path):
    ep = EpFacts("cpu", "CPUExecutionProvider", "cpu", devices=(DeviceFacts(0, "cpu", "CPUExecutionProvider"),))
    written = journal.Journal(tmp_path, {"started": 1.0, "specs": []})
    written.eps([ep], "d1", "Linux")
    written.close()
    assert journal.read(tmp_path).eps == [ep]
    lines = (tmp_path / journal.NAME).read_text().splitlines()
    eps_line = json.loads(lines[1])
    eps_line["eps"] = ["not an EP", *eps_line["eps"]]
    (tmp_path / journal.NAME).write_text("\n".join([lines[0], json.dumps(eps_line), *lines[2:]]) + "\n")
    assert journal.read(tmp_path).eps == [ep]


def test_a_file_that_is_not_a_journal_is_one_clear_error(tmp_path, capsys):
    (tmp_path / journal.NAME).write_text('{"kind": "result"}\n')
    assert cli(["rebuild", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().endswith("journal.jsonl:1: not a journal of this kit (expected its first line to be the run's, "
                                                    f"{journal.SCHEMA})")
    (tmp_path / journal.NAME).unlink()
    assert cli(["rebuild", str(tmp_path)]) == 2
    assert "no journal there" in capsys.readouterr().err


def test_rebuild_refuses_a_journal_whose_spec_files_changed(tmp_path, capsys):
    written = journal.Journal(tmp_path, {"started": 1.0, "specs": None})
    written.eps([], "0" * 64, "Linux")
    written.close()
    assert cli(["rebuild", str(tmp_path)]) == 2
    assert "spec files changed since it ran" in capsys.readouterr().err


def test_a_journal_that_cannot_be_written_stops_without_stopping_the_run(tmp_path):
    written = journal.Journal(tmp_path, {"started": 1.0})

    class Full:
        def write(self, text):
            raise OSError(28, "No space left on device")

        def close(self):
            pass

    written._file = Full()
    written.collected(3)
    written.collected(4)  # no second error
    assert "No space left on device" in written.broken


def test_a_symlink_planted_as_the_journal_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("precious\n")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / journal.NAME).symlink_to(target)
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ep=cpu", "--conformance-report", "reports"],
                               cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert completed.returncode == pytest.ExitCode.USAGE_ERROR
    assert "journal.jsonl: is a symlink: refusing to write through it" in completed.stderr
    assert "Traceback" not in completed.stderr and target.read_text() == "precious\n"


def test_a_second_run_into_the_same_folder_is_refused_naming_it(tmp_path):
    lock = runfolder.claim(tmp_path / "reports")  # as the first run holds it
    try:
        completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ep=cpu", "--conformance-report", "reports"],
                                   cwd=tmp_path, capture_output=True, text=True, timeout=180)
        assert completed.returncode == pytest.ExitCode.USAGE_ERROR
        assert completed.stderr.strip() == (f"ERROR: --conformance-report reports: another run (pid {os.getpid()}) is writing into this folder; "
                                            "wait for it to end, or give this run a folder of its own")
        assert not (tmp_path / "reports" / journal.NAME).exists()  # it wrote nothing there
    finally:
        lock.close()
    with pytest.raises(runfolder.FolderRefused):  # the lock, not the file, refuses: a second claim in-process too
        with runfolder.claim(tmp_path / "reports"):
            runfolder.claim(tmp_path / "reports")


def test_signals_during_the_report_are_noted_not_acted_on():
    before = signal.getsignal(signal.SIGINT)  # pytest's, or SIG_IGN where the tests run as a background job
    with signals.held() as received:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
    assert received == [signal.SIGINT, signal.SIGTERM]
    assert signal.getsignal(signal.SIGINT) is before  # back as it was


def test_sigterm_raises_keyboard_interrupt_once_installed():
    # SIGTERM at its default, as a terminal starts a run (install keeps a disposition its caller set).
    inherited = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        replaced = signals.install()
        try:
            with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)
        finally:
            signals.restore(replaced)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, inherited)


def test_with_isolation_none_a_crash_of_pytest_itself_loses_only_the_check_it_was_in(tmp_path, capsys):
    """--conformance-isolation none runs checks in pytest's process: an EP that aborts there
    takes pytest down (README, "Isolation"). What was decided before is in the journal; here
    the process aborts once 20 results are in, as an abort in the 21st check's copy would."""
    (tmp_path / "abort_after.py").write_text(textwrap.dedent("""
        import os
        import pytest

        seen = []

        @pytest.hookimpl(trylast=True)
        def pytest_runtest_logreport(report):
            if report.when == "teardown" and getattr(report, "conformance_result", None):
                seen.append(report.nodeid)
                if len(seen) == 20:
                    os.abort()
    """))
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "abort_after", "--ep=cpu",
                                "--conformance-isolation", "none", "--conformance-report", "reports"],
                               cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(tmp_path)), capture_output=True, text=True, timeout=180)
    assert completed.returncode == -signal.SIGABRT, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert not (tmp_path / "reports" / "report.json").exists()
    contents = journal.read(tmp_path / "reports")
    assert len(contents.results) == 20 and contents.finished is None and contents.run["isolation"] == "none"
    assert cli(["rebuild", str(tmp_path / "reports")]) == 0
    report = json.loads((tmp_path / "reports" / "report.json").read_text())
    assert len(report["results"]) == 20 and report["run"]["interrupted"] and report["run"]["isolation"] == "none"
    assert report["verdict"] != "conformant"


def test_rebuild_waits_for_no_run_it_refuses_a_folder_a_run_holds(tmp_path, capsys):
    written = journal.Journal(tmp_path, {"started": 1.0, "specs": None})
    written.close()
    lock = runfolder.claim(tmp_path)
    try:
        assert cli(["rebuild", str(tmp_path)]) == 2
        assert "another run (pid" in capsys.readouterr().err
    finally:
        lock.close()
    assert not (tmp_path / "report.json").exists()
