"""Room for the size family's large tensors: how much memory this machine has for them, and one
case at a time across every process of the kit on it.

A case that holds gigabytes asks first (`room_for`): it takes a file lock in the temporary
folder that every worker of every run on the machine shares (several EP devices, shards or
pytest-xdist workers would otherwise each find the memory free and take it at once), then reads
what is available: /proc/meminfo's MemAvailable, the cgroup's limit less its usage, and
`ORT_CONFORMANCE_MEMORY_LIMIT` where set. Where the case needs more than that, less a spare
gigabyte for everything else, it is not applicable, and says the figures. Waiting for another
process's case announces itself each second, so the worker's timeout does not take the wait for
a hang.

An EP's device memory may be host memory (an integrated GPU, an NPU sharing RAM, the reference
EP's malloc), and nothing the EP advertises says so: the bytes a case holds in DEFAULT memory
are counted against host memory too.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from conformance.findings import NotApplicable, NotRun

GIB = 1 << 30
LIMIT_VARIABLE = "ORT_CONFORMANCE_MEMORY_LIMIT"  # the most the size family's large cases may hold at once, e.g. 6GiB
SPARE_BYTES = GIB  # left to the rest of the machine beyond what a case needs
LOCK_FILE = "ort-conformance-large-tensors.lock"
LOCK_WAIT_SECONDS = 900.0  # longer than a soaking case of another process takes to let go

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": GIB, "gib": GIB, "t": 1 << 40, "tib": 1 << 40}


def size_text(nbytes: int) -> str:
    """'4 GiB + 4 KiB + 3 bytes' for the exact sizes the family uses; '6.25 GiB' for other figures."""
    parts, rest = [], nbytes
    for unit, name in ((GIB, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if rest >= unit:
            parts.append(f"{rest // unit} {name}")
            rest %= unit
    if rest or not parts:
        parts.append(f"{rest} byte{'s' * (rest != 1)}")
    return " + ".join(parts) if len(parts) <= 3 else f"{nbytes / GIB:.2f} GiB"


def parse_size(text: str) -> int:
    """'6GiB', '512 MiB', '1073741824' -> bytes; ValueError for anything else."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if match is None or match.group(2).lower() not in _UNITS:
        raise ValueError(f"{text!r} is not a size such as 6GiB, 512MiB or 1073741824")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def large_copy_need(block_bytes: int, guard: int, chunk: int, *, views: bool) -> int:
    """The bytes the large copy holds at once, host and DEFAULT memory counted together: two blocks
    of `block_bytes` between guards on either path. Offset views stage a chunk each way at a
    time (filling and reading device memory); the whole-tensor path (DEFAULT data pointers that are
    no addresses) holds host source + A, A + B, then B + host destination, freeing each block once
    passed, and reads only host memory in chunks."""
    return 2 * (block_bytes + 2 * guard) + (2 if views else 1) * chunk


@dataclass
class Room:
    """What this machine has for a case: `available` (the least of the sources, None where none
    could be read) and each source's figure, by name."""

    available: int | None
    sources: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        said = ", ".join(f"{name} {size_text(value)}" for name, value in self.sources.items())
        return f"{size_text(self.available)} available ({said})" if self.available is not None else "no figure of available memory here"


def _meminfo_available(path: Path = Path("/proc/meminfo")) -> int | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    match = re.search(r"^MemAvailable:\s+([0-9]+) kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def _cgroup_room() -> int | None:
    """The cgroup (v2) limit less its usage, where this process's cgroup has a limit."""
    try:
        entry = next(line for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))
        folder = Path("/sys/fs/cgroup") / entry[3:].lstrip("/")
        limit = (folder / "memory.max").read_text().strip()
        used = int((folder / "memory.current").read_text())
    except (OSError, StopIteration, ValueError):
        return None
    return None if limit == "max" else max(0, int(limit) - used)


def room_here() -> Room:
    """The memory available now, from each source this machine has; NotRun where the limit
    variable is set to something that is no size."""
    sources: dict[str, int] = {}
    for name, figure in (("MemAvailable", _meminfo_available()), ("cgroup limit less usage", _cgroup_room())):
        if figure is not None:
            sources[name] = figure
    if "MemAvailable" not in sources and hasattr(os, "sysconf"):
        try:
            sources["free pages"] = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            pass
    limit = os.environ.get(LIMIT_VARIABLE, "").strip()
    if limit:
        try:
            sources[LIMIT_VARIABLE] = parse_size(limit)
        except ValueError as exc:
            raise NotRun(f"{LIMIT_VARIABLE}: {exc}") from None
    return Room(min(sources.values()) if sources else None, sources)


def shortfall(needed: int, room: Room, what: str) -> str | None:
    """Why `needed` bytes do not fit in `room` with the spare gigabyte left over, or None where they do."""
    if room.available is None:
        return f"{what} needs {size_text(needed)} at once, and this machine gives no figure of its available memory"
    if needed + SPARE_BYTES > room.available:
        return (f"{what} needs {size_text(needed)} at once (host and DEFAULT memory counted together) and {size_text(SPARE_BYTES)} "
                f"to spare; this machine has {room.describe()}")
    return None


@contextlib.contextmanager
def room_for(ctx, needed: int, what: str) -> Iterator[Room]:
    """Holds the machine's large-tensor lock while the case runs, and gives the room it found;
    NotApplicable with the figures where `needed` bytes do not fit."""
    limited = room_here().sources.get(LIMIT_VARIABLE)
    if limited is not None and shortfall(needed, Room(limited, {LIMIT_VARIABLE: limited}), what):
        raise NotApplicable(shortfall(needed, room_here(), what))  # the limit alone rules it out: no wait for the lock
    with _machine_lock(ctx, what):
        room = room_here()
        short = shortfall(needed, room, what)
        if short:
            raise NotApplicable(short)
        yield room


@contextlib.contextmanager
def _machine_lock(ctx, what: str) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # no advisory locks here (Windows): cases of two processes may overlap
        yield
        return
    with open(Path(tempfile.gettempdir()) / LOCK_FILE, "a+") as lock:
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - started
                if waited > LOCK_WAIT_SECONDS:
                    raise NotRun(f"another process of the kit on this machine held its large tensors for {waited:.0f} s; "
                                 f"{what} did not start") from None
                ctx.attempt(f"waiting for another process of the kit to free its large tensors ({waited:.0f} s) before {what}")
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
