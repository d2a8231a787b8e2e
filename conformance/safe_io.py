"""Reading what a user names, and writing what the run leaves, without going astray.

What the kit reads (a spec file, a report.json, a bundle) is named by someone else and may be
anything: a FIFO called `x.yaml` that blocks a read forever, `/dev/zero`, a file of gigabytes.
`read_regular` reads a regular file only, and at most a stated number of bytes; `read_in` reads
back a file the run wrote into a folder, refusing a symlink planted as the folder or the file.

What the kit writes goes into a folder (the report folder, its models/, a document named with
`-o`) that someone else may have prepared: a symlink planted as `reports/models` or as
`report.json` would have the run write wherever it points. `open_in` (a log, appended to) and
`write_set` (the report's files, or one with `write_file`) refuse a folder that is a symlink
(`ensure_folder`) and a file that is one (O_NOFOLLOW), and `write_set` writes its files aside
in their folder before renaming them into place, so that a full disk leaves the previous set
whole rather than half of each.

Every refusal is one `UnsafeFile` naming the file or folder at fault and what is wrong, in
words a user can act on. Knows nothing of specs, reports or bundles.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, BinaryIO, Mapping
from conformance.errors import FileError

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink"))


class UnsafeFile(FileError):
    """A file or folder that cannot be read or written as asked: where, and why in a few words."""


def kind_of(mode: int) -> str:
    """What a file of this st_mode is, in words ("a FIFO"), for a refusal."""
    return "a regular file" if stat.S_ISREG(mode) else next((word for test, word in _KINDS if test(mode)), "an unknown kind of file")


def _reason(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{exc.strerror} (the folder is full)"
    return exc.strerror or str(exc)


# --- reading ---------------------------------------------------------------------------------


def open_regular(path: Path | str, *, follow_symlinks: bool = True) -> BinaryIO:
    """The regular file at `path` opened for reading (binary), refused (UnsafeFile) when it is
    anything else (with `follow_symlinks=False`, a symlink too). A FIFO, device or folder is
    refused from its stat, before it is opened; it is opened non-blocking all the same, so that
    one swapped in meanwhile cannot block the open, and checked again once open. A missing file
    is FileNotFoundError, for a caller to which absent is an answer."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        mode = (os.stat if follow_symlinks else os.lstat)(path).st_mode
        if stat.S_ISLNK(mode):
            raise UnsafeFile(path, "is a symlink: refusing to read through it")
        if not stat.S_ISREG(mode):
            raise UnsafeFile(path, f"not a regular file: {kind_of(mode)}")
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise UnsafeFile(path, "is a symlink: refusing to read through it") from None
        raise UnsafeFile(path, f"cannot read: {_reason(exc)}") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise UnsafeFile(path, f"not a regular file: {kind_of(status.st_mode)}")
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "rb")


def read_regular(path: Path | str, limit: int, *, what: str = "file", follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file at `path` (open_regular), refused (UnsafeFile) when it is
    longer than `limit` bytes: by its size before reading, and by what was read if it grew. A
    missing file is UnsafeFile too ("cannot read: No such file or directory")."""
    try:
        file = open_regular(path, follow_symlinks=follow_symlinks)
    except FileNotFoundError as exc:
        raise UnsafeFile(path, f"cannot read: {_reason(exc)}") from None
    with file:
        try:
            size = os.fstat(file.fileno()).st_size
            if size > limit:
                raise UnsafeFile(path, f"too large for a {what}: {size} bytes, over the limit of {limit}")
            data = file.read(limit + 1)
        except OSError as exc:
            raise UnsafeFile(path, f"cannot read: {_reason(exc)}") from None
    if len(data) > limit:
        raise UnsafeFile(path, f"too large for a {what}: over the limit of {limit} bytes")
    return data


def read_in(folder: Path | str, name: str, limit: int, *, what: str = "file") -> bytes | None:
    """The bytes of the file `name` in `folder`, None when there is none; refused (UnsafeFile)
    when the folder or the file is a symlink, as `open_in` refuses them: what the run wrote
    there it reads back from there, not from wherever a planted link points."""
    folder = Path(folder)
    _require_real_folder(folder, missing_ok=True)
    path = folder / _plain_name(name)
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnsafeFile(path, f"cannot read: {_reason(exc)}") from None
    return read_regular(path, limit, what=what, follow_symlinks=False)


# --- writing ---------------------------------------------------------------------------------


def ensure_folder(folder: Path | str) -> Path:
    """`folder`, made (with its parents) when absent; refused when it, the last component, is
    a symlink or not a folder. Folders above it may be symlinks: a home or /tmp often is, and
    whoever can replace those can write there anyway."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        pass  # a symlink to a folder, or a file: worded below
    except OSError as exc:
        raise UnsafeFile(folder, f"cannot be made: {_reason(exc)}") from None
    _require_real_folder(folder)
    return folder


def _require_real_folder(folder: Path, *, missing_ok: bool = False) -> None:
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        if missing_ok:
            return
        raise UnsafeFile(folder, "cannot be used: No such file or directory") from None
    except OSError as exc:
        raise UnsafeFile(folder, f"cannot be used: {_reason(exc)}") from None
    if stat.S_ISLNK(mode):
        raise UnsafeFile(folder, "is a symlink: refusing to write or read through it (remove it, or name a real folder)")
    if not stat.S_ISDIR(mode):
        raise UnsafeFile(folder, f"is not a folder but {kind_of(mode)}")


def _plain_name(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise UnsafeFile(name, "not a plain file name (a name of one component is written into a folder)")
    return name


def open_in(folder: Path | str, name: str, mode: str = "w", *, encoding: str | None = "utf-8") -> IO:
    """`folder/name` opened for writing ("w", "wb") or appending ("a", "ab"), made when absent.
    Refused (UnsafeFile) when the folder is a symlink (ensure_folder), or when `name` there is
    a symlink (O_NOFOLLOW) or not a regular file (a FIFO planted as a log would block the run)."""
    if mode not in ("w", "wb", "a", "ab"):
        raise ValueError(f"open_in writes or appends, it does not open with mode {mode!r}")
    folder = ensure_folder(folder)
    path = folder / _plain_name(name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_APPEND if mode.startswith("a") else 0
    try:
        # Opened relative to the folder, itself opened without following a symlink: a folder
        # swapped for a symlink after ensure_folder looked is refused as well (ELOOP).
        folder_descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UnsafeFile(folder, f"cannot be used: {_reason(exc)}") from None
    try:
        descriptor = os.open(name, flags, 0o666, dir_fd=folder_descriptor)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFile(path, "is a symlink: refusing to write through it") from None
        if exc.errno == errno.ENXIO:  # a FIFO without a reader, refused by O_NONBLOCK
            raise UnsafeFile(path, "not a regular file: a FIFO") from None
        raise UnsafeFile(path, f"cannot be written: {_reason(exc)}") from None
    finally:
        os.close(folder_descriptor)
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise UnsafeFile(path, f"not a regular file: {kind_of(status.st_mode)}")
        os.set_blocking(descriptor, True)
        if mode.startswith("w"):
            os.ftruncate(descriptor, 0)  # truncated once known to be a regular file of ours
    except BaseException:
        os.close(descriptor)
        raise
    if "b" in mode:
        return os.fdopen(descriptor, mode)
    return os.fdopen(descriptor, mode, encoding=encoding)


def write_set(folder: Path | str, files: Mapping[str, bytes | str]) -> list[Path]:
    """Writes `files` (name -> contents; text is UTF-8) into `folder` as one set: each is written
    to a temporary file in the folder first, and only when all are written are they renamed into
    place. A failure while writing (a full disk) removes the temporary files and leaves the
    previous set as it was; it is one UnsafeFile naming the folder. A symlink, folder or FIFO
    under one of the names is refused before anything is written (and a rename would replace a
    symlink planted meanwhile, never write through it). Returns the paths written, in the order given."""
    folder = ensure_folder(folder)
    names = [_plain_name(name) for name in files]
    for name in names:
        _require_replaceable(folder / name)
    umask = os.umask(0)
    os.umask(umask)
    written: list[tuple[str, Path]] = []
    try:
        for name in names:
            written.append((_write_aside(folder, name, files[name], 0o666 & ~umask), folder / name))
    except OSError as exc:
        _remove([temporary for temporary, _ in written])
        raise UnsafeFile(folder, f"cannot write {', '.join(names)}: {_reason(exc)}; the files there before are unchanged") from None
    except BaseException:
        _remove([temporary for temporary, _ in written])
        raise
    try:
        for temporary, path in written:
            os.replace(temporary, path)
    except OSError as exc:
        _remove([temporary for temporary, _ in written])
        raise UnsafeFile(folder, f"cannot rename the files written into place: {_reason(exc)}") from None
    return [path for _, path in written]


def _require_replaceable(path: Path) -> None:
    """UnsafeFile unless `path` is absent or a regular file. A symlink there is refused rather
    than replaced: whoever planted it meant the run to write where it points, and should hear so."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UnsafeFile(path, f"cannot be written: {_reason(exc)}") from None
    if stat.S_ISLNK(mode):
        raise UnsafeFile(path, "is a symlink: refusing to write through it")
    if not stat.S_ISREG(mode):
        raise UnsafeFile(path, f"is {kind_of(mode)}, not a file")


def write_file(folder: Path | str, name: str, contents: bytes | str) -> Path:
    """One file written as `write_set` writes a set: whole, or not at all."""
    return write_set(folder, {name: contents})[0]


def _write_aside(folder: Path, name: str, contents: bytes | str, mode: int) -> str:
    """A temporary file beside `name` holding `contents`, its mode `mode`; its path. mkstemp
    creates it with O_EXCL, so a name planted there in the meantime is never written through.
    The temporary file is removed when writing it fails."""
    data = contents.encode("utf-8") if isinstance(contents, str) else contents
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view):]
        os.fchmod(descriptor, mode)  # mkstemp made it for its owner alone; a report is for whoever the umask allows
    except BaseException:
        os.close(descriptor)
        _remove([temporary])
        raise
    try:
        os.close(descriptor)  # where a file system reports a full disk late, it does so here
    except OSError:
        _remove([temporary])
        raise
    return temporary


def _remove(paths: list[str]) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass  # already gone, or in a folder gone read-only: nothing more to do
