"""One native handle handed to one ImportMemory, held the way an application holds it.

A producer exports a fresh handle for every import (`Handed(producer, allocation)`): for an
opaque fd, a new fd. Who owns that fd once the import has succeeded is not stated by
onnxruntime's documents: a Vulkan import takes it (the driver closes it), another importer dups it
and leaves the caller's alone. So right after ImportMemory returns, `settle` looks at the fd
number: if it no longer names the file it named (closed, or closed and reused), the importer took
it, and the caller must never use or close that number again; else the caller still owns it and
`close` closes it once the import's objects are released. What it saw is said in words, for the
report as information (`settle`'s answer), with the number of other fds of the same memory this
process holds (an importer, or its driver, that kept a dup of it).

A HOST_ALLOCATION handle is an address: nothing is handed over, nothing to close.
"""

from __future__ import annotations

import os
from typing import Any


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        status = os.fstat(fd)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _others_of(identity: tuple[int, int] | None, fd: int) -> int:
    """How many other fds of this process name the same file (Linux's /proc/self/fd)."""
    if identity is None:
        return 0
    try:
        numbers = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return 0
    return sum(1 for number in numbers if number != fd and _identity(number) == identity)


class Handed:
    """A handle exported for one import: `native` (the fd or the address), `handle_type`, and
    after `settle`, `taken` (the importer closed the caller's fd)."""

    def __init__(self, producer: Any, allocation: Any):
        self.handle_type: str = producer.handle_type
        self.native: int = producer.export(allocation)
        self.is_fd = self.handle_type == "vk_memory_opaque_fd"
        self.identity = _identity(self.native) if self.is_fd else None
        self.others_before = _others_of(self.identity, self.native) if self.is_fd else 0
        self.taken = False
        self.settled = ""

    def settle(self) -> str:
        """After ImportMemory returned (accepted or refused): what became of the caller's fd, in
        words ('' for a handle that is not an fd)."""
        if not self.is_fd or self.settled:
            return self.settled
        if _identity(self.native) != self.identity:
            self.taken = True
            self.settled = "the importer took the caller's fd (closed it): the caller must not close it again"
        else:
            kept = _others_of(self.identity, self.native) - self.others_before
            self.settled = ("the caller's fd was left open to the caller"
                            + (f"; the importer holds {kept} other fd(s) of the same memory" if kept > 0 else ""))
        return self.settled

    def close(self) -> None:
        """Closes the caller's fd where it is still the caller's (never a number the importer took)."""
        if self.is_fd and not self.taken and _identity(self.native) == self.identity:
            try:
                os.close(self.native)
            except OSError:
                pass
        self.taken = True
