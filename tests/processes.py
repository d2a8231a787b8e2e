"""What the tests of killed runs share: a run of the reference EP stuck in a copy, the
processes started in a folder, and whether any outlives the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conformance.run import journal

# A run started under `nohup` (SIGHUP ignored) or as a background job of a shell without job
# control (SIGINT ignored) inherits those dispositions, and the kit rightly keeps a signal its
# caller ignores; a test that sends one starts its run through this, so that each signal ending
# a run is at its default whatever started the tests.
DEFAULT_SIGNALS = ("import os, signal, sys\n"
                   "for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP): signal.signal(number, signal.SIG_DFL)\n"
                   "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


def python_with_default_signals() -> list[str]:
    """The start of a command line that runs Python (its arguments follow) with SIGINT, SIGTERM
    and SIGHUP at their defaults, as a terminal starts it."""
    return [sys.executable, "-c", DEFAULT_SIGNALS]


def processes_in(folder: Path) -> set[int]:
    """Every process started in `folder` (its working directory), the test's own aside: the
    run's pytest, its workers, and the fork server, whose parent (the first worker) may have
    been lost to a hang by then, leaving it a child of init."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if Path(os.readlink(entry / "cwd")) == folder:
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def sleeping(pid: int) -> bool:
    """Whether process `pid`'s main thread sleeps (nanosleep), as refdev's hung copy does; an
    idle worker waits in a read or poll instead."""
    try:
        return "nanosleep" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def results_in(folder: Path) -> int:
    path = folder / journal.NAME
    return path.read_text().count('"kind": "result"') if path.exists() else 0


def hung_run(library: Path, folder: Path, *extra: str) -> subprocess.Popen:
    """pytest on refdev in hang mode, returned once it has journaled results and a worker is
    stuck in a copy (refdev's CopyTensors sleeps in a loop): the first check's copy hangs until
    the 8 s timeout, the results of the checks that make the same call follow, then the next
    call hangs."""
    env = dict(os.environ, ORT_REFDEV_FAULT="hang")
    process = subprocess.Popen([*python_with_default_signals(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ep-library", str(library), "--ep", "refdev",
                                "--conformance-timeout", "8", "--conformance-report", str(folder / "reports"), *extra],
                               cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while results_in(folder / "reports") < 3 or not any(sleeping(pid) for pid in processes_in(folder)):
        assert process.poll() is None, process.stdout.read().decode()[-3000:]
        assert time.monotonic() < deadline, "no hang in two minutes"
        time.sleep(0.05)
    return process


def assert_none_outlive(pids: set[int], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in pids if alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)  # not left behind by the test either
    assert not left, f"processes outlived the run by {seconds:g} s: {left}"
