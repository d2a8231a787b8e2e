"""No process of a run outlives it (conformance/orphans.py): the parent-death signal each
process asks for, and the watchdog on its requests' pipe; under pytest-xdist too, where the
controller's kill must take its xdist workers, their fork servers and workers along."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from conformance import orphans
from processes import alive, assert_none_outlive, hung_run, processes_in


def test_under_xdist_a_killed_controller_leaves_no_worker_behind(refdev_library, tmp_path):
    process = hung_run(refdev_library, tmp_path, "-n", "2")
    left = processes_in(tmp_path) - {process.pid}
    assert len(left) >= 3, left  # two xdist workers, and at least one EP worker
    process.kill()
    process.wait()
    assert_none_outlive(left)


def _chain(tmp_path, grandchild: str):
    """A child that starts `grandchild` (Python code) and prints its pid, then sleeps; the
    child's pid and the grandchild's."""
    script = tmp_path / "grandchild.py"
    script.write_text(textwrap.dedent(grandchild))
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys, time
        grandchild = subprocess.Popen([sys.executable, {str(script)!r}], stdin=subprocess.PIPE)
        print(grandchild.pid, flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    return child, int(child.stdout.readline())


def test_a_process_that_asked_dies_with_its_parent(tmp_path):
    child, grandchild = _chain(tmp_path, """
        import time
        from conformance import orphans
        orphans.die_with_parent()
        open(__file__ + ".armed", "w").close()
        time.sleep(60)
    """)
    while not (tmp_path / "grandchild.py.armed").exists():
        time.sleep(0.02)
    child.kill()
    child.wait()
    assert_none_outlive({grandchild}, 2.0)


def test_without_asking_it_would_outlive_its_parent(tmp_path):
    """The same chain without die_with_parent: the grandchild lives on (what the tests above
    would see if the mechanism were gone)."""
    child, grandchild = _chain(tmp_path, """
        import time
        time.sleep(60)
    """)
    time.sleep(0.3)
    child.kill()
    child.wait()
    time.sleep(1.0)
    try:
        assert alive(grandchild)
    finally:
        os.kill(grandchild, signal.SIGKILL)


def test_the_watchdog_ends_a_process_whose_requests_pipe_closed_while_its_main_thread_is_busy():
    worker = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import time
        from conformance import orphans
        orphans.watch_stdin(grace=0.2)
        print("watching", flush=True)
        time.sleep(60)  # a check that takes long, reading no request
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert worker.stdout.readline() == b"watching\n"
    time.sleep(0.3)
    assert worker.poll() is None  # an open pipe is left alone, with nothing to read or not
    worker.stdin.close()
    # Its 60 s sleep cut short by the watchdog: ended cleanly (0), long before the sleep's end.
    assert worker.wait(timeout=50) == 0


def test_a_parent_already_gone_is_seen_once_the_signal_is_asked_for():
    code = subprocess.run([sys.executable, "-c", "from conformance import orphans; orphans.die_with_parent(parent=1)"],
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))).returncode
    assert code == 70
    assert orphans.spawned_parent() is None or isinstance(orphans.spawned_parent(), int)


def test_an_ep_library_that_hangs_as_it_loads_costs_the_timeout_then_one_clear_error(tmp_path):
    """A worker's start is bounded too (by --conformance-timeout, 10 s at least for the
    interpreter and onnxruntime's import): loading the EP library is a call into the vendor's
    code like any other."""
    source = tmp_path / "hang.c"
    source.write_text("#include <unistd.h>\n__attribute__((constructor)) static void hang(void) { for (;;) sleep(1); }\n")
    library = tmp_path / "libhang.so"
    try:
        built = subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(source)], capture_output=True, text=True)
    except FileNotFoundError:
        built = None
    if built is None or built.returncode != 0:
        import pytest

        pytest.skip("no C compiler here to build a library that hangs as it loads")
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ep-library", str(library), "--ep", "Hang",
                                "--conformance-timeout", "3", "--conformance-report", "reports"],
                               cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 4  # pytest's usage error
    assert completed.stderr.strip() == ("ERROR: EP 'Hang' could not be loaded: starting the worker did not finish within 10 s; "
                                        "the worker was killed and replaced")
    assert_none_outlive(processes_in(tmp_path))
