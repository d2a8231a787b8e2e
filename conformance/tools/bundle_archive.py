"""A submission bundle's archive read as what it is: a file from elsewhere, hostile until checked.

`read` gives the bundle's files by name, or one BundleError naming the bundle and what is wrong:
not a regular file (a FIFO is refused before it is opened), larger than a bundle is, not
gzip-compressed, truncated or corrupt, or holding a member no `ort-conformance bundle` writes.
A bundle holds regular files only, under plain relative names, each once: a symbolic or hard
link (to a system file, or named with `../`), a FIFO or device, a folder, an absolute name or
one with a `..` component is refused before anything is read, whatever its type; unpacked with
tar, any of those would write or read outside the folder it is unpacked into, and a verifier
that skipped it would vouch for an archive it did not look at. Knows nothing of what the
files say (bundle.verify checks that).
"""

from __future__ import annotations

import gzip
import os
import tarfile
import zlib
from pathlib import Path, PurePosixPath

from conformance import safe_io
from conformance.errors import FileError
from conformance.findings import message_line
from conformance.options import reason_of


class BundleError(FileError):
    """A bundle that cannot be written or read: the file at fault and what is wrong with it."""


# What a bundle may hold. A CPU run's bundle is a few hundred kilobytes; a member is refused
# from the size its header states, before a byte of it is read, so a small archive holding a
# huge (sparse, or highly compressed) member costs neither the memory nor the time to inflate it.
MAX_MEMBER_BYTES = 256 << 20
MAX_BUNDLE_BYTES = 1 << 30  # all members together, and the archive itself
MAX_MEMBERS = 10_000
GZIP_MAGIC = b"\x1f\x8b"
MAX_TRAILING_BYTES = 1 << 20  # after the tar's end: its padding to a 10 KiB record, and little more

# Member types that are not regular files, in words, for the refusal.
_KINDS = ((tarfile.TarInfo.issym, "a symbolic link"), (tarfile.TarInfo.islnk, "a hard link"), (tarfile.TarInfo.isdir, "a folder"),
          (tarfile.TarInfo.isfifo, "a FIFO"), (tarfile.TarInfo.ischr, "a character device"), (tarfile.TarInfo.isblk, "a block device"))


def read(bundle: Path) -> dict[str, bytes]:
    """The bundle's files by name; BundleError, one line, when it is not a readable bundle of
    regular files (see the module's docstring)."""
    try:
        with safe_io.open_regular(bundle) as file:
            size = os.fstat(file.fileno()).st_size
            if size > MAX_BUNDLE_BYTES:
                raise BundleError(bundle, f"{size} bytes, over the limit of {MAX_BUNDLE_BYTES} for a bundle")
            if file.read(len(GZIP_MAGIC)) != GZIP_MAGIC:
                raise BundleError(bundle, "not a bundle: not gzip-compressed (a bundle is the .tar.gz `ort-conformance bundle` writes)")
            file.seek(0)
            with tarfile.open(fileobj=file, mode="r:gz") as archive:
                files = _members(bundle, archive)
                _to_the_end(bundle, archive.fileobj)
                return files
    except safe_io.UnsafeFile as exc:
        raise BundleError(bundle, exc.message) from None
    except EOFError:
        raise BundleError(bundle, "truncated: the archive ends early (an interrupted copy or download?)") from None
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise BundleError(bundle, f"corrupt: {message_line(exc)}") from None
    except tarfile.TarError as exc:
        raise BundleError(bundle, f"not a bundle (a .tar.gz archive written by `ort-conformance bundle`): {message_line(exc)}") from None
    except OSError as exc:
        raise BundleError(bundle, f"cannot be read: {reason_of(exc)}") from None


def _to_the_end(bundle: Path, stream) -> None:
    """Reads the gzip stream past the tar's end to its own, where gzip checks its CRC and length:
    tarfile stops at the end-of-archive blocks, and a flipped CRC would otherwise go unseen."""
    trailing = 0
    while chunk := stream.read(64 << 10):
        trailing += len(chunk)
        if trailing > MAX_TRAILING_BYTES:
            raise BundleError(bundle, f"holds more than {MAX_TRAILING_BYTES} bytes after the end of its archive")


def refusal(member: tarfile.TarInfo) -> str:
    """Why `member` has no place in a bundle ('' when it has one): its name first, checked for
    every member whatever its type, then its type."""
    name = member.name
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":") or ".." in parts or not parts:
        return f"member {name!r}: an absolute name, or one with '..', would be unpacked outside the bundle's folder"
    kind = next((words for test, words in _KINDS if test(member)), None if member.isfile() else f"of tar type {member.type!r}")
    if kind is None:
        return ""
    target = f" to {member.linkname!r}" if member.issym() or member.islnk() else ""
    return f"member {name} is {kind}{target}, not a regular file: a bundle holds regular files only"


def _members(bundle: Path, archive: tarfile.TarFile) -> dict[str, bytes]:
    """The files of `archive`, read one header at a time, each refused by its name, its type
    and the size its header states before it is read."""
    files: dict[str, bytes] = {}
    total = 0
    for count, member in enumerate(archive, 1):
        if count > MAX_MEMBERS:
            raise BundleError(bundle, f"holds more than {MAX_MEMBERS} members, more than a bundle has")
        if why := refusal(member):
            raise BundleError(bundle, why)
        if member.name in files:  # tar would unpack the last, a reader might take the first
            raise BundleError(bundle, f"member {member.name} appears twice: a bundle holds each file once")
        if member.size > MAX_MEMBER_BYTES:
            raise BundleError(bundle, f"member {member.name} is {member.size} bytes, over the limit of {MAX_MEMBER_BYTES} for a bundle member")
        total += member.size
        if total > MAX_BUNDLE_BYTES:
            raise BundleError(bundle, f"its members hold more than {MAX_BUNDLE_BYTES} bytes, over the limit for a bundle")
        extracted = archive.extractfile(member)
        assert extracted is not None, "a regular file's member"
        data = extracted.read(member.size + 1)
        if len(data) != member.size:
            raise BundleError(bundle, f"member {member.name}: {len(data)} bytes where its header says {member.size}")
        files[member.name] = data
    return files
