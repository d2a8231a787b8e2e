"""--conformance-wrapper: every process the kit starts that loads an EP runs under the command
given (an emulator, taskset, valgrind), from the option, the environment or the ini file; a
wrapper that is not there or fails at start is one clear error. The wrapper here is a script
that records its arguments and executes them, so no emulator is needed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import conformance_run

from conformance.catalogue.spec import load_catalogue, shipped_spec_dirs
from conformance.isolation.controller import Worker
from conformance.isolation.fork_client import ForkServer
from conformance.isolation.launcher import parent_variable, spawn_command
from conformance.options import WRAPPER_VARIABLE, emulator_of, wrapper_command
from conformance.orphans import PARENT
from conformance.tools import found

ROUNDTRIP = "ort-conformance/copy::copy.roundtrip-exact"


@pytest.fixture
def recording_wrapper(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """(the wrapper script, the file where it writes one line per process it started)."""
    log = tmp_path / "wrapped.log"
    script = tmp_path / "record-and-run"
    script.write_text('#!/bin/sh\nprintf "%s\\n" "$*" >> "$WRAPPER_LOG"\nexec "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("WRAPPER_LOG", str(log))
    monkeypatch.delenv(WRAPPER_VARIABLE, raising=False)
    return script, log


def started(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


# --- the option's value ----------------------------------------------------------------------


def test_a_wrapper_is_split_as_a_shell_splits_it_and_its_program_must_be_here():
    assert wrapper_command("") == wrapper_command(None) == wrapper_command("  ") == ()
    assert wrapper_command("taskset -c '0 '") == ("taskset", "-c", "0 ")
    with pytest.raises(ValueError, match="nosuch-emulator is not an executable program here"):
        wrapper_command("nosuch-emulator -cpu Skylake-Client-v4")
    with pytest.raises(ValueError, match="cannot be split"):
        wrapper_command("taskset 'unclosed")


def test_only_a_qemu_user_emulator_is_taken_for_an_emulated_cpu():
    assert emulator_of(("qemu-x86_64", "-cpu", "Skylake-Client-v4")) == "qemu-x86_64 -cpu Skylake-Client-v4"
    assert emulator_of(("/usr/bin/qemu-x86_64",)) == "/usr/bin/qemu-x86_64"
    assert emulator_of(("taskset", "-c", "0")) is None and emulator_of(()) is None


def test_a_spawned_process_runs_under_the_wrapper_and_is_not_told_a_parent_it_may_not_have():
    assert spawn_command(("taskset", "-c", "0"), "-m", "x") == ["taskset", "-c", "0", sys.executable, "-m", "x"]
    assert spawn_command((), "-m", "x") == [sys.executable, "-m", "x"]
    # A wrapper that does not exec (strace, a shell script) is the worker's parent: told
    # pytest's pid, the worker would take itself for an orphan and end.
    assert parent_variable(("strace", "-f")) == {} and parent_variable(()) == {PARENT: str(os.getpid())}


# --- the processes the kit starts -------------------------------------------------------------


def test_a_worker_starts_under_the_wrapper(recording_wrapper, cpu_init):
    script, log = recording_wrapper
    worker = Worker(cpu_init, timeout=60, wrapper=(str(script),))
    try:
        assert worker.start().provider == "CPUExecutionProvider"
    finally:
        worker.close()
    assert started(log) == [f"{sys.executable} -m conformance.engine.serve"]


def test_the_fork_server_is_hosted_by_a_process_under_the_wrapper(recording_wrapper, cpu_init):
    """The workers it forks are forks of that process: they run under the wrapper too."""
    script, log = recording_wrapper
    server = ForkServer()
    worker = Worker(cpu_init, timeout=60, wrapper=(str(script),))
    worker.hosts = server
    try:
        worker.start()
    finally:
        worker.close()
        server.close()
    [line] = started(log)
    assert line.startswith(f"{sys.executable} -m conformance.engine.serve --fork-server ")


def test_a_conformance_run_starts_every_worker_under_the_wrapper(recording_wrapper, tmp_path):
    script, log = recording_wrapper
    run = conformance_run(tmp_path, "--ep=cpu", ROUNDTRIP, f"--conformance-wrapper={script}")
    assert run.exit_code == 0, run.output[-2000:]
    assert run.report["run"]["wrapper"] == str(script) and run.report["run"]["emulated"] is None
    assert started(log) and all(line.startswith(f"{sys.executable} -m conformance.engine.serve") for line in started(log))
    assert f"The EP's processes ran under `{script}`" in (run.reports / "report.md").read_text()


def test_the_wrapper_may_come_from_the_environment_or_the_ini_file(recording_wrapper, tmp_path):
    script, log = recording_wrapper
    (tmp_path / "env").mkdir()
    from_environment = conformance_run(tmp_path / "env", "--ep=cpu", ROUNDTRIP, env={WRAPPER_VARIABLE: str(script)})
    assert from_environment.report["run"]["wrapper"] == str(script) and len(started(log)) == 1
    (tmp_path / "ini").mkdir()
    (tmp_path / "ini" / "pytest.ini").write_text(f"[pytest]\nconformance_wrapper = {script}\n")
    from_ini = conformance_run(tmp_path / "ini", "--ep=cpu", ROUNDTRIP)
    assert from_ini.report["run"]["wrapper"] == str(script) and len(started(log)) == 2


def test_the_probe_runs_its_processes_under_the_wrapper(recording_wrapper):
    script, log = recording_wrapper
    probe = subprocess.run([sys.executable, "-m", "conformance.cli", "probe", "--no-throughput", "--wrapper", str(script)],
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    lines = started(log)
    # The child that lists the EPs present, then one worker per EP it listed.
    assert lines[0].startswith(f"{sys.executable} -c ") and f"{sys.executable} -m conformance.engine.serve" in lines[1:]


def test_a_wrapper_that_is_not_here_is_one_clear_error(tmp_path):
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--ep=cpu", "--conformance-wrapper=nosuch-emulator -cpu x",
                          f"--conformance-report={tmp_path / 'reports'}"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 4  # pytest's usage error
    assert "ERROR: --conformance-wrapper: wrapper 'nosuch-emulator -cpu x': nosuch-emulator is not an executable program here" in run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    probe = subprocess.run([sys.executable, "-m", "conformance.cli", "probe", "--ep", "cpu"], capture_output=True, text=True, timeout=120,
                           env={**os.environ, WRAPPER_VARIABLE: "nosuch-emulator"})
    assert probe.returncode == 2 and probe.stderr.strip() == ("ort-conformance: wrapper 'nosuch-emulator': nosuch-emulator is not an "
                                                              "executable program here (not found, or not executable)")


def test_a_wrapper_that_fails_at_start_is_one_clear_error(tmp_path):
    failing = tmp_path / "broken-emulator"
    failing.write_text("#!/bin/sh\necho 'broken-emulator: cannot start' >&2\nexit 7\n")
    failing.chmod(0o755)
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--ep=cpu", f"--conformance-wrapper={failing}",
                          f"--conformance-report={tmp_path / 'reports'}"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"EP 'cpu' could not be loaded under the wrapper '{failing}'" in run.stderr
    assert "exited with status 7" in run.stderr and "broken-emulator: cannot start" in run.stderr
    assert "Traceback" not in run.stdout + run.stderr and "INTERNALERROR" not in run.stdout + run.stderr
    probe = subprocess.run([sys.executable, "-m", "conformance.cli", "probe", "--ep", "cpu", "--wrapper", str(failing)],
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 3 and "Traceback" not in probe.stderr
    assert f"the EP could not be loaded (its processes run under the wrapper '{failing}')" in probe.stderr


def test_an_emulator_is_said_plainly_and_measures_no_throughput(tmp_path):
    """A wrapper named like a qemu user-mode emulator: the report says the CPU was emulated and
    the copy matrix has no GB/s figure. (A stand-in named qemu-x86_64 that runs the command
    natively: what is checked is what the kit says, not the emulator.)"""
    stand_in = tmp_path / "bin" / "qemu-x86_64"
    stand_in.parent.mkdir()
    stand_in.write_text('#!/bin/sh\n[ "$1" = -cpu ] && shift 2\nexec "$@"\n')
    stand_in.chmod(0o755)
    run = conformance_run(tmp_path, "--ep=cpu", ROUNDTRIP, f"--conformance-wrapper={stand_in} -cpu Skylake-Client-v4")
    emulated = run.report["run"]["emulated"]
    assert emulated.startswith(f"the EP's processes ran under {stand_in} -cpu Skylake-Client-v4") and "no throughput" in emulated
    assert all("throughput" not in pair for matrix in run.report["capabilities"] for pair in matrix["pairs"])
    assert run.report["capabilities"][0]["host_memcpy"] == {}
    for name in ("summary.md", "report.md"):
        assert "CPU emulated: the EP's processes ran under" in (run.reports / name).read_text()
    assert "CPU emulated: the EP's processes ran under" in run.output  # the terminal summary
    found_md = found.render(found.load_reports([run.reports / "report.json"]), load_catalogue([str(p) for p in shipped_spec_dirs()]))
    assert f"- **CPU emulated: the EP's processes ran under {stand_in} -cpu Skylake-Client-v4" in found_md  # docs/found.md
