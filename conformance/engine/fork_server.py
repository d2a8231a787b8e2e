"""The fork server's own half (see conformance.isolation.fork_client for the whole and its protocol).

Runs in the first worker, which hosts the server, and in the server forked off it. It imports
nothing of the kit: the worker hands it what to import before forking (`preload`) and what a
forked worker runs (`run`), so this module stays apart from the worker it serves and from the
parent's end.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import traceback
from pathlib import Path
from typing import Callable

TASKS = Path("/proc/self/task")


def why_not_fork_safe() -> str | None:
    """Why forking this process now could deadlock the child (None: it runs one thread)."""
    if not TASKS.is_dir():
        return "this system does not list a process's threads (/proc/self/task)"
    threads = len(os.listdir(TASKS))
    return f"the process runs {threads} threads; a fork could deadlock" if threads > 1 else None


def start_beside(fd: int, preload: Callable[[], None], run: Callable[[], None], warm_up: Callable[[], None] = lambda: None) -> None:
    """Forks the fork server off this process (a worker starting up), on the socket `fd`, once
    `preload()` has made the imports its workers share; each worker it forks calls `run()`,
    which serves and ends the process. The server calls `warm_up()` once it has said it is
    ready, before its first fork: imports its workers may need, made there once and not in each
    worker (a fork asked for meanwhile waits for it). Returns in this process, with `fd` closed."""
    channel = socket.socket(fileno=fd)
    try:
        preload()
        reason = why_not_fork_safe()
    except Exception as exc:  # an import that fails here fails in the worker too, and says so there
        reason = f"{type(exc).__name__}: {exc}"
    if reason:
        channel.sendall(f"unavailable {reason}\n".encode())
        channel.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork():
        channel.close()
        return
    try:
        # The host's stdin, replies and log are not the server's: holding them would hide the
        # host's end from the parent, which reads a worker's end as the end of its replies.
        devnull = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(devnull, target)
        os.close(devnull)
        channel.sendall(b"ready\n")
        _warm_up(warm_up)
        serve(channel, run)
    finally:
        os._exit(0)


def _warm_up(warm_up: Callable[[], None]) -> None:
    """Calls `warm_up()` in the server. An import that fails is left to the workers, which make
    the same imports themselves and say there what failed; a warm-up that left another thread
    running ends the server, which must not fork then: the parent sees it gone and spawns its
    workers."""
    try:
        warm_up()
    except Exception:
        pass
    if why_not_fork_safe():
        os._exit(0)


def serve(channel: socket.socket, run: Callable[[], None]) -> None:
    """Forks a worker for each request on `channel`, and reports the workers' ends there."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that SIGCHLD writes to the wakeup fd
    watched: list[socket.socket | int] = [channel, wake_read]
    try:
        while True:
            readable, _, _ = select.select(watched, [], [])
            if wake_read in readable:
                os.read(wake_read, 512)
                _report_ended(channel)
            if channel in readable:
                message, fds, _, _ = socket.recv_fds(channel, 16, 3)
                if not message:
                    return  # the parent closed its end
                pid = _fork_worker(channel, fds, (wake_read, wake_write), run)
                for fd in fds:
                    os.close(fd)
                channel.sendall(f"pid {pid}\n".encode())
    finally:
        signal.set_wakeup_fd(-1)


def _fork_worker(channel: socket.socket, fds: list[int], own: tuple[int, int], run: Callable[[], None]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        channel.close()
        for fd in own:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        run()  # ends the process
    except BaseException:
        traceback.print_exc()  # into the worker's log
    finally:
        os._exit(70)  # never back into the server's loop, whatever happened


def _report_ended(channel: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        channel.sendall(f"exit {pid} {code}\n".encode())
