"""No process of a run outlives the process that owns it.

A worker hung inside an EP call reads no request and notices nothing: when the pytest process
that owns it is killed (SIGKILL, the OOM killer, a CI runner's cancel), it is re-parented to init
and would run on for as long as the hang lasts. So each process of a run asks Linux for a
signal when its parent ends (`die_with_parent`: prctl(PR_SET_PDEATHSIG, SIGKILL)): a worker
spawned by pytest dies with pytest, a worker forked by the fork server with the server, which
itself ends when pytest's end of its socket closes (forkhost.serve), and an xdist worker with
the xdist controller. The signal comes when the *thread* that made the child ends, not the
process: every process here is made by its parent's main thread (the plugin, the launcher and
the fork server start no threads), and under xdist by the thread that runs the session, which
lasts until the workers are closed.

Where that signal is not to be had (not Linux), or was asked for after the parent had already
gone, `watch_stdin` ends the process a moment after its requests' pipe is closed by every
writer, which is what the parent's end does to it; it runs in a thread of its own, so it works
while the main thread waits in a call that releases the GIL. Knows nothing of the kit.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
PARENT = "ORT_CONFORMANCE_PARENT"  # the pid of the process that spawned a worker, in its environment


def die_with_parent(parent: int | None = None) -> bool:
    """Asks for SIGKILL when the parent ends (Linux); when the parent is already gone (the pid
    of the parent is no longer `parent`, or is 1), ends this process at once. Returns whether
    the signal was set up."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        armed = False
    # Asked for after the parent ended, the signal never comes: look once it is set up.
    if os.getppid() == 1 or (parent is not None and os.getppid() != parent):
        os._exit(70)
    return armed


def spawned_parent() -> int | None:
    """The parent pid a spawned worker was told (None where it was not)."""
    value = os.environ.get(PARENT, "")
    return int(value) if value.isdigit() else None


def watch_stdin(grace: float = 2.0, fd: int = 0) -> threading.Thread:
    """A daemon thread that ends the process `grace` seconds after every writer of `fd` (the
    requests' pipe) closed it: the parent asked it to exit (it then ends before) or is gone."""
    def watch() -> None:
        poller = select.poll()
        poller.register(fd, 0)  # no events asked: POLLHUP and POLLERR are always reported
        while True:
            try:
                events = poller.poll()
            except InterruptedError:
                continue
            if any(mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, mask in events):
                break
        time.sleep(grace)
        os._exit(0)

    thread = threading.Thread(target=watch, name="orphan-watchdog", daemon=True)
    thread.start()
    return thread
