"""The kit's exceptions share one root, and an error that names a place in a file is data.

`KitException` is the root of every exception the kit raises; `KitError` of every error (all but
`findings.CallQuarantined`, the one signal, which a check's `except Exception` must not catch).
`SpecError` is an error at `path:line:column` (a spec file, the known issues), kept as data
until it is shown; it crosses from a worker to pytest's process as its wire dict (`to_wire`,
`from_wire`), never as text to be split again. A leaf: it imports nothing of the kit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable


class KitException(BaseException):
    """The root of the kit's exceptions: catch `KitError` for its errors."""


class KitError(KitException, Exception):
    """An error raised by the kit (caught by `except Exception` as any error is)."""


class FileError(KitError):
    """An error about one file, as data: the file (`path`) and what is wrong with it (`message`)."""

    def __init__(self, path: Any, message: str):
        super().__init__(f"{path}: {message}")
        self.path = str(path)
        self.message = message


class NotMeasured(KitError):
    """A question asked of what no run or probe measured (the memory of an EP that
    get_ep_devices() does not list, a probe that was lost): the message says what and why.
    Raised rather than answered False, which would say the thing was tried and did not work."""


@dataclass(frozen=True)
class SpecError:
    """An error at a place: the file as shown (`path`), its 1-based `line` and `column`, the
    dotted key there (`key`, '' for none) and what is wrong (`message`)."""

    path: str
    line: int
    column: int
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}:{self.column}"
        return f"{where}: {self.message}" if not self.key else f"{where}: {self.key}: {self.message}"

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> "SpecError":
        return cls(str(data["path"]), int(data["line"]), int(data["column"]), str(data["key"]), str(data["message"]))


class SpecErrors(KitError):
    """Every error found in the spec files, as data (`errors`); its text one error a line."""

    def __init__(self, errors: list[SpecError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


def unique(errors: Iterable[SpecError]) -> list[SpecError]:
    """`errors` without repeats, in their order (two checks may find one error)."""
    return list(dict.fromkeys(errors))


def closest(word: str, choices: list[str], cutoff: float = 0.6) -> str | None:
    """The choice `word` was most likely meant to be, if any is close (a "did you mean"). difflib
    is imported only here, for an input with an error: a worker's start does without it."""
    import difflib

    hint = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return hint[0] if hint else None
