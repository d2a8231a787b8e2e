"""The report folder of a run: the only place a run writes, and one run's at a time.

`claim` makes the folder and its models/ (refusing either when it is a symlink, or not a
folder: a planted `reports/models` link would have the models written wherever it points),
checks that a file can be made there, and takes an exclusive lock on `.lock` in it
(fcntl.flock): a second run into the same folder is refused, in one message naming the folder
and the run holding it, rather than interleaving its journal, logs and report with the first's.
The lock is the open file's: it goes with the process, however it ends, so a killed run never
leaves a stale lock behind.

A run's folder holds that run's files alone, from its start: the previous run's report set,
journal, worker logs and reproducers are moved into `previous/` (replacing an older one), and
`unfinished.txt` says a run is under way, or did not finish, until its report set is written
(or `ort-conformance rebuild` writes it from the journal). A killed run leaves no older
verdict standing beside its journal, and a bundle made of the folder holds one run. The
models/ folder is a cache the runs share: a model is the run's when the run used it, as its
workers' model caches recorded it in `models-used.txt` (models.ModelCache). Must not know:
pytest, reports.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from conformance import safe_io
from conformance.run.journal import Journal
from conformance.errors import KitError

LOCK = ".lock"
PREVIOUS = "previous"  # the previous run's files, moved aside when a run starts
UNFINISHED = "unfinished.txt"  # present from a run's start until its report set is written
# A run's own files, besides models/: its report set, journal, logs and reproducers.
MODELS_USED = "models-used.txt"  # the names of the models/ files the run's workers used, a line each
RUN_FILES = ("report.json", "report.md", "report.html", "summary.md", "junit.xml", "journal.jsonl", MODELS_USED)
RUN_FOLDERS = ("repro",)
LOG_PREFIX, LOG_SUFFIX = "worker-", ".log"
MODEL_SUFFIX = ".onnx"
MAX_MODELS_USED_BYTES = 16 << 20  # far more names than the catalogue has models


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
            set_aside(self.folder)
            mark_unfinished(self.folder, run.get("started", time.time()))
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
    """The folder and its models/ made, real folders, and writable; FolderRefused otherwise,
    also for a path the system refuses outright (one longer than it allows)."""
    try:
        _check(folder)
    except OSError as exc:
        raise FolderRefused(f"--conformance-report {shown(folder)}: cannot be used: {exc.strerror or exc}") from None


def shown(folder: Path, limit: int = 160) -> str:
    """`folder` as a message shows it: whole, or its start and end around an ellipsis when longer than `limit`."""
    text = str(folder)
    return text if len(text) <= limit else f"{text[:limit // 2]}…{text[-limit // 2:]} ({len(text)} characters)"


def _check(folder: Path) -> None:
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


def set_aside(folder: Path) -> list[str]:
    """Moves the previous run's files in `folder` (RUN_FILES, RUN_FOLDERS, worker logs) into
    `folder/previous/`, an older previous/ removed first; returns the names moved. Only regular
    files and real folders are moved: a symlink planted under one of the names stays, for the
    write of that name to refuse it and say so. UnsafeFile when previous/ is not a real folder
    (a symlink is refused, not emptied through)."""
    names = [name for name in _listing(folder) if _ours(folder / name, name in RUN_FOLDERS) and (name in RUN_FILES or name in RUN_FOLDERS or is_log(name))]
    aside = folder / PREVIOUS
    try:
        mode = os.lstat(aside).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise safe_io.UnsafeFile(aside, f"cannot be used: {exc.strerror or exc}") from None
    if mode is not None and not stat.S_ISDIR(mode):
        raise safe_io.UnsafeFile(aside, "is not a folder (a symlink, or a file): the previous run's files are moved there")
    if not names:
        return []
    try:
        if mode is not None:
            shutil.rmtree(aside)  # unlinks the links in it, follows none
        os.mkdir(aside)
        for name in names:
            os.rename(folder / name, aside / name)
    except OSError as exc:
        raise safe_io.UnsafeFile(aside, f"the previous run's files cannot be moved here: {exc.strerror or exc}") from None
    return names


def _ours(path: Path, folder: bool) -> bool:
    """Whether `path` is a regular file (a real folder, with `folder`), not a link to one."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) if folder else stat.S_ISREG(mode)


def mark_unfinished(folder: Path, started: float) -> None:
    """`unfinished.txt`: the run that started at `started` has not written its report set."""
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    safe_io.write_file(folder, UNFINISHED,
                       f"A run started at {when} (pid {os.getpid()}) writes into this folder and has not written its report.\n"
                       "If no run is going now, it did not finish: `ort-conformance rebuild "
                       f"{folder}` writes its report from {folder / 'journal.jsonl'}.\n"
                       f"The previous run's report set, if any, is in {folder / PREVIOUS}/.\n")


def mark_finished(folder: Path) -> None:
    """The report set of the folder's run is written: `unfinished.txt` goes."""
    try:
        if stat.S_ISREG(os.lstat(folder / UNFINISHED).st_mode):
            os.unlink(folder / UNFINISHED)
    except OSError:
        pass  # none there


def is_log(name: str) -> bool:
    return name.startswith(LOG_PREFIX) and name.endswith(LOG_SUFFIX)


def run_files(folder: Path) -> list[str]:
    """The worker logs and models of the run in `folder`, as a bundle names them (logs/NAME,
    models/NAME): the logs there (an earlier run's were set aside) and the models the run used,
    as `MODELS_USED` lists them; every model there when the folder has no such list (a run of a
    kit that kept none)."""
    logs = [f"logs/{name}" for name in _listing(folder) if is_log(name)]
    try:
        listed = safe_io.read_in(folder, MODELS_USED, MAX_MODELS_USED_BYTES, what="list of models used")
    except safe_io.UnsafeFile:
        listed = b""  # a symlink planted as the list: no model is known to be the run's
    used = set(_listing(folder / "models")) if listed is None else set(listed.decode(errors="replace").splitlines())
    models = []
    for name in sorted(used):
        try:
            status = os.lstat(folder / "models" / name)
        except (OSError, ValueError):
            continue
        if name.endswith(MODEL_SUFFIX) and "/" not in name and stat.S_ISREG(status.st_mode):
            models.append(f"models/{name}")
    return sorted(logs) + models


def _listing(folder: Path) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []
