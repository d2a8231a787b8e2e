"""Reading a fleet table: "does this EP, at this version, copy from DEFAULT to CPU?" from a file.

`ort-conformance fleet` writes fleet.json (schema `conformance/schemas/fleet.schema.json`): one
row per EP device of each run gathered. An application reads it here instead of probing the EP at
start-up, without onnxruntime:

    fleet = conformance.fleet.load("fleet.json")
    if fleet.supports("OpenVINOExecutionProvider", "1.8.1", "default", "cpu"): ...
    for answer in fleet.answers("refdev", None, "cpu", "host_accessible"): print(answer)

`supports` is True when `copy_tensors` moved the bytes intact in every run of that EP version
(the newest run of each onnxruntime version and device); `answers` gives each run's
status, detail, verdict and report. An EP, version or memory the table does not know is a
FleetError that lists what it does know. What a run could not measure is never answered as if
it had: an EP that get_ep_devices() does not list (the CUDA EP without a GPU, the legacy
OpenVINO EP) advertised no memory, so what its DEFAULT or HOST_ACCESSIBLE memory is, and how
copies to and from it go, is not known; `answers` says `not_known` and why, and `supports`
raises NotMeasured rather than answer False.

A table is read as a file from elsewhere: a regular file of at most MAX_TABLE_BYTES, checked
whole against fleet.schema.json (plain_schema: no jsonschema needed) before a row is used.
The standard library only, and the leaves of the kit's errors and safe reads: this module is
what `conformance.fleet` exposes, and loads neither onnxruntime, numpy nor jsonschema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance import safe_io
from conformance import errors
from conformance.errors import KitError
from conformance.tools import plain_schema

SCHEMA = "ort-ep-conformance/fleet/1"
SCHEMA_FILE = Path(__file__).resolve().parents[1] / "schemas" / "fleet.schema.json"
MEMORIES = ("cpu", "default", "host_accessible")
NOT_ADVERTISED = "not_advertised"  # an answer's status where that run's EP device lacks the memory
NOT_KNOWN = "not_known"  # an answer's status where that run could not measure the direction (detail: why)
# Why an EP that get_ep_devices() does not list has no measured memory: the kit asks an EP device
# for its memory infos, and without one only plain CPU memory was there to probe.
UNLISTED = ("get_ep_devices() does not list this EP, so it was never asked for its memory: its DEFAULT and "
            "HOST_ACCESSIBLE memory are not known, and only plain CPU memory was probed")
# A fleet table of hundreds of runs is a few megabytes; a file past this is refused unread.
MAX_TABLE_BYTES = 256 << 20


class FleetError(KitError):
    """A fleet table that cannot be read, or a question it cannot answer: the message says why."""


class UnknownEp(FleetError, LookupError):
    """No run of that EP (or of that version of it) is in the table."""


class UnknownMemory(FleetError, LookupError):
    """A memory that is not one of the table's, or that the EP device does not advertise."""


class NotMeasured(FleetError, errors.NotMeasured):
    """A question no run of the table measured an answer to (an EP that get_ep_devices() does not
    list, a probe that was lost): the message names the runs and why. Not False: False would
    say the copy was tried and did not work."""


@dataclass(frozen=True)
class Answer:
    """One run's answer for one copy direction of one EP device. `status` is the copy matrix's
    (supported, unverified, broken, required_but_missing, not_required, unsupported),
    `not_known` where the run could not measure it (`detail` says why: an EP that
    get_ep_devices() does not list, a probe that was lost), or `not_advertised` where that run's
    EP device lacks one of the memories (the same EP set up otherwise in another run); `report`
    links the run's report."""

    ep: str
    ep_version: str | None
    onnxruntime: str | None
    device: str
    source: str
    destination: str
    status: str
    detail: str
    verdict: str
    date: str | None
    report: str
    run: str

    @property
    def supported(self) -> bool:
        return self.status == "supported"

    @property
    def measured(self) -> bool:
        return self.status not in (NOT_KNOWN, NOT_ADVERTISED)

    def __str__(self) -> str:
        return (f"{self.ep} {self.ep_version or '-'} (onnxruntime {self.onnxruntime or '-'}, device {self.device}): "
                f"{self.source} -> {self.destination} {self.status}: {self.detail} [run {self.run}, {self.date}, {self.verdict}]")


class Fleet:
    """The rows of one fleet.json, and the questions an application asks of them."""

    def __init__(self, data: dict[str, Any], path: str = "fleet.json"):
        self.path = path
        self.rows: list[dict[str, Any]] = data["rows"]

    def eps(self) -> list[str]:
        return sorted({row["ep"] for row in self.rows})

    def versions(self, ep: str) -> list[str]:
        return sorted({_version(row) or "-" for row in self._of_ep(ep)})

    def _of_ep(self, ep: str) -> list[dict[str, Any]]:
        wanted = ep.casefold()
        rows = [row for row in self.rows if wanted in (row["ep"].casefold(), str(row["ep_label"]).casefold())]
        if not rows:
            raise UnknownEp(f"{self.path}: no run of EP {ep!r}; the table has {', '.join(self.eps()) or 'no EP'}")
        return rows

    def rows_of(self, ep: str, version: str | None = None, *, onnxruntime: str | None = None, device: str | None = None) -> list[dict[str, Any]]:
        """The rows of `ep` (provider name or alias, any case) at EP `version` (None: any; an EP
        that states no version of its own is known by its onnxruntime version), narrowed to
        an onnxruntime version and a device label when given."""
        rows = self._of_ep(ep)
        if version is not None:
            rows = [row for row in rows if _version(row) == version]
            if not rows:
                raise UnknownEp(f"{self.path}: no run of {ep} at version {version!r}; its versions: {', '.join(self.versions(ep))}")
        for key, value in (("onnxruntime", onnxruntime), ("device", device)):
            if value is not None:
                narrowed = [row for row in rows if row[key] == value]
                if not narrowed:
                    known = sorted({str(row[key]) for row in rows})
                    raise UnknownEp(f"{self.path}: no run of {ep}{' ' + version if version else ''} with {key} {value!r}; it has {', '.join(known)}")
                rows = narrowed
        return rows

    def answers(self, ep: str, version: str | None, source: str, destination: str, *, onnxruntime: str | None = None,
                device: str | None = None) -> list[Answer]:
        """Each run's answer for copying from `source` to `destination` (cpu, default,
        host_accessible, or another device's memory as the matrix names it), newest first."""
        known = sorted({p["source"] for row in self.rows for p in row["copies"]} | set(MEMORIES))
        for name in (source, destination):
            if name.casefold() not in {k.casefold() for k in known}:
                raise UnknownMemory(f"{self.path}: {name!r} is not a memory of the table; memories: {', '.join(known)}")
        answers = [_answer(row, source, destination) for row in self.rows_of(ep, version, onnxruntime=onnxruntime, device=device)]
        if all(answer.status == NOT_ADVERTISED for answer in answers):
            runs = ", ".join(sorted({answer.run for answer in answers}))
            raise UnknownMemory(f"{self.path}: {ep}{' ' + version if version else ''}: {answers[0].detail} in any run of the table ({runs})")
        return sorted(answers, key=lambda a: a.date or "", reverse=True)

    def supports(self, ep: str, version: str | None, source: str, destination: str, *, onnxruntime: str | None = None,
                 device: str | None = None) -> bool:
        """Whether copy_tensors moved the bytes intact from `source` to `destination` in the newest
        run of each EP version, onnxruntime version and device of `ep` at `version`. False for
        `not_required` too: both ends are CPU memory, and copy_tensors was refused (no copy is
        needed; `answers` says so). NotMeasured, naming the runs and why, when no run that
        measured the direction says False and some newest run could not measure it."""
        newest: dict[tuple, Answer] = {}
        for answer in self.answers(ep, version, source, destination, onnxruntime=onnxruntime, device=device):
            if answer.status != NOT_ADVERTISED:  # a run of the EP set up without that memory (another configuration)
                newest.setdefault((answer.onnxruntime, answer.device, answer.ep_version), answer)
        if any(answer.measured and not answer.supported for answer in newest.values()):
            return False  # measured: a run tried the copy and it did not move the bytes intact
        unknown = [answer for answer in newest.values() if answer.status == NOT_KNOWN]
        if unknown:
            said = "; ".join(f"run {answer.run}: {answer.detail}" for answer in unknown)
            raise NotMeasured(f"{self.path}: {ep}{' ' + version if version else ''}: {source} -> {destination} is not known: {said}")
        return bool(newest)


def _version(row: dict[str, Any]) -> str | None:
    return row["ep_version"] or row["onnxruntime"]


class _NotHere(KitError):
    """A memory this row's EP device does not advertise (the same EP may in another run)."""


class _NotKnown(KitError):
    """A memory this row's run could not ask the EP about (why, in its message)."""


def _endpoint(row: dict[str, Any], name: str) -> tuple[str, str]:
    """(the matrix's name of memory `name` on this row's device, a note when it is another's)."""
    wanted = name.casefold()
    names = sorted({p["source"] for p in row["copies"]} | set(MEMORIES))
    memory = row["memory"]
    if wanted in ("default", "host_accessible") and not row["ep_device"]:
        raise _NotKnown(UNLISTED)  # its memory None means never asked, not plain CPU memory
    if wanted == "default" and (memory["default"] is None or memory["default"].get("device_type") == "cpu"):
        return "cpu", "its DEFAULT memory is plain CPU memory; "
    if wanted == "host_accessible" and memory["host_accessible"] is None:
        raise _NotHere("advertises no HOST_ACCESSIBLE memory")
    if wanted not in {n.casefold() for n in names}:
        raise _NotHere(f"has no memory {name!r} in its copy matrix")
    return next(n for n in names if n.casefold() == wanted), ""


def _answer(row: dict[str, Any], source: str, destination: str) -> Answer:
    run = row["run"]
    try:
        (src, note_src), (dst, note_dst) = _endpoint(row, source), _endpoint(row, destination)
    except _NotHere as why:
        return Answer(row["ep"], row["ep_version"], row["onnxruntime"], row["device"], source, destination, NOT_ADVERTISED,
                      f"device {row['device']} {why}", run["verdict"], run.get("date"), run["report"], run["name"])
    except _NotKnown as why:
        return Answer(row["ep"], row["ep_version"], row["onnxruntime"], row["device"], source, destination, NOT_KNOWN,
                      f"device {row['device']}: {why}", run["verdict"], run.get("date"), run["report"], run["name"])
    pair = next((p for p in row["copies"] if (p["source"], p["destination"]) == (src, dst)), None)
    if pair is None:
        lost = f"its copy probe was lost: {row['probe_error']}" if row.get("probe_error") else "the run's copy matrix has no such pair"
        status, detail = NOT_KNOWN, f"device {row['device']}: {lost}"
    else:
        status, detail = pair["status"], pair["detail"]
    return Answer(row["ep"], row["ep_version"], row["onnxruntime"], row["device"], src, dst, status, (note_src or note_dst) + detail,
                  run["verdict"], run.get("date"), run["report"], run["name"])


def load(path: str | Path) -> Fleet:
    """The fleet table in `path` (fleet.json, or the folder `ort-conformance fleet` wrote it to).
    FleetError, naming the file and what is wrong, when it is not one this reader knows: not a
    regular file (a FIFO, a device), over MAX_TABLE_BYTES, not JSON, or not of fleet.schema.json
    (checked whole, before any row is used)."""
    path = Path(path)
    if path.is_dir():
        path = path / "fleet.json"
    try:
        data = json.loads(safe_io.read_regular(path, MAX_TABLE_BYTES, what="fleet table"))
    except safe_io.UnsafeFile as exc:
        raise FleetError(f"{path}: cannot be read as a fleet table: {exc.message}") from None
    except (ValueError, RecursionError) as exc:
        raise FleetError(f"{path}: not JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        schema = data.get("schema") if isinstance(data, dict) else None
        raise FleetError(f"{path}: not a fleet table of schema {SCHEMA} (schema {str(schema)[:80]!r}); write one with `ort-conformance fleet`")
    found = plain_schema.problems(_schema(), data)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise FleetError(f"{path}: not a fleet table of {SCHEMA_FILE.name}: {found[0]}{more}")
    return Fleet(data, str(path))


_SCHEMAS: list[dict[str, Any]] = []


def _schema() -> dict[str, Any]:
    """fleet.schema.json, read once (it ships beside this package's modules)."""
    if not _SCHEMAS:
        _SCHEMAS.append(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    return _SCHEMAS[0]
