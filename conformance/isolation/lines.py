"""JSON lines to and from one worker process: the framing isolation.Worker speaks over its pipes.

A message is one JSON object on one line. Reading takes one line at a time with a deadline, and
tells a line, the end of the process's output and a deadline that passed apart. Knows nothing of
requests, checks or how a process was started.
"""

from __future__ import annotations

import fcntl
import json
import os
import selectors
import time
from typing import Any


def widen_pipe(stream) -> None:
    """Grows the pipe to a worker's stdin to 1 MiB (on Linux, within the system's limit): a
    batch of checks (70 kB for the CPU EP) is then written at once while the worker is busy,
    e.g. starting up, instead of pytest's process waiting for it to read."""
    resize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if resize is None or stream is None:
        return
    try:
        fcntl.fcntl(stream.fileno(), resize, 1 << 20)
    except OSError:
        pass  # past /proc/sys/fs/pipe-max-size: the pipe keeps its size, and writes may wait


def write(stream, message: dict[str, Any]) -> None:
    """Writes `message` as one line to `stream` (a process's stdin)."""
    try:
        stream.write((json.dumps(message) + "\n").encode())
        stream.flush()
    except BrokenPipeError:
        pass  # the worker is gone; reading will say how it ended


class LineChannel:
    """The lines a process writes on its stdout, and messages to its stdin."""

    def __init__(self, process):
        self.process = process
        self._buffer, self._taken = b"", 0  # bytes read from the process; how many are taken as lines

    def send(self, message: dict[str, Any]) -> None:
        assert self.process and self.process.stdin
        write(self.process.stdin, message)

    def buffered_line(self) -> bytes | None:
        """The next line if it was read from the process already, else None (nothing is read:
        `read_line` waits for it). An empty line is left to `read_line` too."""
        end = self._buffer.find(b"\n", self._taken)
        if end <= self._taken:
            return None
        line, self._taken = self._buffer[self._taken:end], end + 1
        return line

    def read_line(self, deadline: float) -> bytes | None:
        """One line from the process; b'' at end of file; None when `deadline` passed."""
        assert self.process and self.process.stdout
        # The worker mostly writes lines faster than they are taken (nine in ten are here
        # already in a CPU run): those are sliced off what was read, without waiting on the pipe
        # and without copying the rest of the buffer for every line.
        end = self._buffer.find(b"\n", self._taken)
        if end < 0:
            self._buffer, self._taken = self._buffer[self._taken:], 0
            fd = self.process.stdout.fileno()
            with selectors.DefaultSelector() as selector:
                selector.register(fd, selectors.EVENT_READ)
                while end < 0:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not selector.select(remaining):
                        return None
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        return b""
                    end = chunk.find(b"\n")
                    if end >= 0:
                        end += len(self._buffer)
                    self._buffer += chunk
        line, self._taken = self._buffer[self._taken:end], end + 1
        return line

    def drained_within(self, seconds: float) -> bool:
        """Whether the process's output ended within `seconds`, its remaining lines read and
        dropped: a process asked to exit is seen ending as the end of its replies (the pipe
        closes when the process does), without polling for its exit status."""
        deadline = time.monotonic() + seconds
        while self.process.stdout and not self.process.stdout.closed:
            line = self.read_line(deadline)
            if line is None:
                return False
            if line == b"":
                return True
        return True
