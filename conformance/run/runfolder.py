"""The report folder of a run: the only place a run writes, and one run's at a time.

`claim` makes the folder and its models/ (refusing either when it is a symlink, or not a
folder: a planted `reports/models` link would have the models written wherever it points),
checks that a file can be made there, and takes an exclusive lock on `.lock` in it
(fcntl.flock): a second run into the same folder is refused, in one message naming the folder
and the run holding it, rather than interleaving its journal, logs and report with the first's.
The lock is the open file's: it goes with the process, however it ends, so a killed run never
leaves a stale lock behind. Must not know: pytest, reports.
"""

from __future__ import annotations

import errno
import fcntl
import os
import tempfile
from pathlib import Path
from typing import IO, Any

from conformance import safe_io
from conformance.run.journal import Journal
from conformance.errors import KitError

LOCK = ".lock"


class RunFolder:
    """The report folder as a run holds it: `open` checks it, and for the run that writes the
    report (`primary`: not an xdist worker) takes its lock and opens its journal; `close`
    lets both go."""

    def __init__(self, folder: Path, primary: bool):
        self.folder = folder
        self.primary = primary
        self.journal = Journal(None, {})  # writes nothing until open
        self._lock: IO[str] | None = None

    def open(self, run: dict[str, Any]) -> None:
        """FolderRefused when the folder cannot be used (see `claim`), or its journal opened."""
        if not self.primary:
            check(self.folder)  # the xdist controller holds the lock and keeps the journal
            return
        self._lock = claim(self.folder)
        try:
            self.journal = Journal(self.folder, run)
        except safe_io.UnsafeFile as exc:  # a symlink planted as journal.jsonl
            raise FolderRefused(f"--conformance-report {self.folder}: {exc.path}: {exc.message}") from None

    def close(self) -> None:
        self.journal.close()
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.close()  # the lock goes with the file


class FolderRefused(KitError):
    """The report folder cannot be used: the message says which and why."""


def check(folder: Path) -> None:
    """The folder and its models/ made, real folders, and writable; FolderRefused otherwise."""
    if not folder.is_symlink() and folder.exists() and not folder.is_dir():
        raise FolderRefused(f"--conformance-report {folder}: is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        pass  # a symlink, refused below
    except OSError as exc:
        raise FolderRefused(f"--conformance-report {folder}: cannot be written: {exc.strerror or exc}") from None
    try:
        safe_io.ensure_folder(folder)
        safe_io.ensure_folder(folder / "models")
        tempfile.TemporaryFile(dir=folder).close()
    except safe_io.UnsafeFile as exc:
        raise FolderRefused(f"--conformance-report {folder}: {exc.path}: {exc.message}") from None
    except OSError as exc:
        raise FolderRefused(f"--conformance-report {folder}: cannot be written: {exc.strerror or exc}") from None


def claim(folder: Path) -> IO[str]:
    """`check`, then the folder's lock, held until the returned file is closed (or the process
    ends); FolderRefused when another run holds it."""
    check(folder)
    try:
        lock = safe_io.open_in(folder, LOCK, "a")
    except safe_io.UnsafeFile as exc:
        raise FolderRefused(f"--conformance-report {folder}: {exc.path}: {exc.message}") from None
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = _holder(folder)
        lock.close()
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise FolderRefused(f"--conformance-report {folder}: cannot be locked: {exc.strerror or exc}") from None
        raise FolderRefused(f"--conformance-report {folder}: another run{holder} is writing into this folder; "
                            "wait for it to end, or give this run a folder of its own") from None
    os.ftruncate(lock.fileno(), 0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def _holder(folder: Path) -> str:
    try:
        text = (safe_io.read_in(folder, LOCK, 64) or b"").decode(errors="replace").strip()
    except safe_io.UnsafeFile:
        return ""
    return f" (pid {text})" if text.isdigit() else ""
