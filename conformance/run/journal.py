"""The run's results journal: DIR/journal.jsonl, one JSON line per fact as the run learns it.

A report is written once, at the end of a run; a run killed before (SIGKILL, the OOM killer,
a CI runner torn down, an EP that aborts the pytest process under --conformance-isolation none)
would otherwise leave nothing of what it found. The journal is appended to as the run goes,
each line flushed to the file system when written: the run's facts first (`run`: what it ran,
with which spec files), each EP's facts once its worker answered (`eps`), the number of checks
collected, every result as it is decided, the copy matrices after the probe, and `finished`
once the report set is written. A journal without `finished` is a run that did not end;
`ort-conformance rebuild DIR` reads it back (`read`) into the RunRecord the report is built
from, marked interrupted.

A write that fails (a full disk) stops the journal, not the run: the run's report says so at
the end (`broken`). Reading tolerates a last line cut short by a kill mid-write. Must not know:
pytest, workers, how the report is rendered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from conformance import safe_io
from conformance.facts import EpFacts
from conformance.outcomes import Result
from conformance.record import EpRecord, RunRecord
from conformance.errors import KitError

NAME = "journal.jsonl"
SCHEMA = "ort-ep-conformance/journal/1"
LIMIT = 1 << 30  # a journal of a million results is far under this; more is not one of ours

_encode = json.JSONEncoder(default=str).encode  # one encoder for every line (see worker._write)


class Journal:
    """The journal of a run being made, in `folder` (opened through safe_io.open_in: a symlink
    planted as journal.jsonl is refused, not written through)."""

    def __init__(self, folder: Path | str | None, run: dict[str, Any]):
        """`folder` None: a journal that writes nothing (an xdist worker's: the controller keeps the run's)."""
        self.path = Path(folder or ".") / NAME
        self.broken = ""  # why the journal stopped being written ('' while it is)
        self._file: IO[str] | None = safe_io.open_in(folder, NAME, "w") if folder is not None else None
        self._write({"kind": "run", "schema": SCHEMA, **run})

    def eps(self, facts: list[EpFacts], spec_digest: str, platform: str) -> None:
        """The EPs' facts, the digest of the spec files the run read (rebuild reads them
        again) and the machine's platform (asked while the workers start, not before)."""
        self._write({"kind": "eps", "eps": [ep.to_wire() for ep in facts], "spec_digest": spec_digest, "platform": platform})

    def collected(self, count: int) -> None:
        self._write({"kind": "collected", "count": count})

    def result(self, data: dict[str, Any]) -> None:
        """A result as decided (Result.to_dict), appended and flushed before the next check."""
        self._write({"kind": "result", "result": data})

    def capabilities(self, label: str, matrices: list[dict[str, Any]]) -> None:
        self._write({"kind": "capabilities", "ep": label, "matrices": matrices})

    def finished(self, verdict: str, interrupted: bool, finished: float, files: list[str] | None = None) -> None:
        """The run's end; `files`: its worker logs and models (runfolder.run_files), what its bundle holds besides the reports."""
        self._write({"kind": "finished", "verdict": verdict, "interrupted": interrupted, "finished": finished, "files": files or []})

    def _write(self, line: dict[str, Any]) -> None:
        if self._file is None:
            return
        try:
            self._file.write(_encode(line) + "\n")
            self._file.flush()  # in the file system's hands now: a SIGKILL of this process loses nothing of it
        except OSError as exc:
            self.broken = f"{self.path}: {exc.strerror or exc}; the journal stops at the results written before"
            self._close()

    def close(self) -> None:
        self._close()

    def _close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError:
                pass  # a full disk reported at close: `broken` said so already, or nothing was lost


class JournalError(KitError):
    """A journal that cannot be read back: where (path:line) and why."""


@dataclass
class Contents:
    """What a journal holds: the run's facts, the EPs' facts, the results in their order,
    each EP's copy matrices, and the `finished` line (None when the run did not end)."""

    run: dict[str, Any]
    eps: list[EpFacts] = field(default_factory=list)
    digest: str = ""  # of the spec files the run read
    collected: int = 0
    results: list[Result] = field(default_factory=list)
    capabilities: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    finished: dict[str, Any] | None = None
    cut_short: bool = False  # its last line was cut short (the process was killed writing it)
    last_written: float = 0.0  # the journal's modification time
    duplicates: list[str] = field(default_factory=list)  # cases whose result line came again, the same: counted once
    by_case: dict[str, Result] = field(default_factory=dict, repr=False)  # each case's result, to find those again


def read(folder: Path | str) -> Contents:
    """The journal in `folder` (read through safe_io.read_in: not through a planted symlink);
    JournalError when there is none, or when it is not one of ours."""
    path = Path(folder) / NAME
    try:
        data = safe_io.read_in(folder, NAME, LIMIT, what="journal")
    except safe_io.UnsafeFile as exc:
        raise JournalError(str(exc)) from None
    if data is None:
        raise JournalError(f"{path}: no journal there (a run writes one into its --conformance-report folder)")
    contents = parse(data, path)
    contents.last_written = path.stat().st_mtime
    return contents


def parse(data: bytes, path: Path | str) -> Contents:
    """What the journal `data` (read from `path`, named in errors) holds; JournalError when it
    is not one of ours. A bundle's copy of a journal is read with this."""
    lines = data.decode("utf-8", errors="replace").split("\n")
    cut_short = lines[-1] != ""  # every line written ends with a newline; a kill may cut the last
    return _contents(Path(path), [line for line in lines if line], cut_short)


def _contents(path: Path, lines: list[str], cut_short: bool) -> Contents:
    contents: Contents | None = None
    for number, text in enumerate(lines, 1):
        try:
            line = json.loads(text)
            kind = line["kind"]
        except (ValueError, KeyError, TypeError):
            if number == len(lines) and cut_short:
                break  # the line being written when the run was killed
            # A kill cuts the last line alone, and leaves it without its newline: a bad line
            # anywhere else is damage done to the journal after it was written.
            raise JournalError(f"{path}:{number}: damaged: line {number} of {len(lines)} is not a journal line, and a run "
                               "that is killed cuts short only its last line; nothing is rebuilt from a damaged journal") from None
        if contents is None:
            if kind != "run" or line.get("schema") != SCHEMA:
                raise JournalError(f"{path}:1: not a journal of this kit (expected its first line to be the run's, {SCHEMA})")
            contents = Contents(run=line)
        else:
            _take(contents, kind, line, f"{path}:{number}")
    if contents is None:
        raise JournalError(f"{path}: empty: the run was killed before it wrote anything")
    contents.cut_short = cut_short
    return contents


def _take(contents: Contents, kind: str, line: dict[str, Any], where: str) -> None:
    try:
        if kind == "eps":
            contents.eps = [facts for wire in list(line["eps"]) if (facts := EpFacts.from_wire(wire)) is not None]
            contents.digest = str(line.get("spec_digest", ""))
            contents.run.setdefault("platform", str(line.get("platform", "")))
        elif kind == "collected":
            contents.collected = int(line["count"])
        elif kind == "result":
            _add_result(contents, Result.from_dict(line["result"]), where)
        elif kind == "capabilities":
            contents.capabilities[line["ep"]] = list(line["matrices"])
        elif kind == "finished":
            contents.finished = line
        else:
            raise JournalError(f"{where}: unknown kind of line {kind!r}")
    except (KeyError, TypeError, ValueError) as exc:
        raise JournalError(f"{where}: a {kind} line without what it holds ({type(exc).__name__}: {exc})") from None


def _add_result(contents: Contents, result: Result, where: str) -> None:
    """`result` appended; a case's result line written again, the same, counted once (and
    named in `duplicates`); a second, different result of a case: JournalError (a run decides
    each case once, so one of the two is not the run's)."""
    key = result.nodeid or json.dumps([result.contract, result.ep, result.device, result.params], sort_keys=True, default=str)
    seen = contents.by_case
    if key in seen:
        if seen[key] != result:
            raise JournalError(f"{where}: a second result of {key}, not the same as the first: a run decides each case once")
        contents.duplicates.append(key)
        return
    seen[key] = result
    contents.results.append(result)


def text(contents: Contents) -> str:
    """The journal that holds `contents`, as `parse` reads it back: the journal of a run made of
    others' results (`ort-conformance merge` of shards)."""
    lines: list[dict[str, Any]] = [{**contents.run, "kind": "run", "schema": SCHEMA},
                                   {"kind": "eps", "eps": [ep.to_wire() for ep in contents.eps], "spec_digest": contents.digest,
                                    "platform": contents.run.get("platform", "")},
                                   {"kind": "collected", "count": contents.collected}]
    lines += [{"kind": "result", "result": result.to_dict()} for result in contents.results]
    lines += [{"kind": "capabilities", "ep": label, "matrices": matrices} for label, matrices in contents.capabilities.items()]
    lines += [{**contents.finished, "kind": "finished"}] if contents.finished else []
    return "".join(_encode(line) + "\n" for line in lines)


def record(contents: Contents, catalogue: Any) -> RunRecord:
    """The RunRecord the report is built from: the journal's results, its EPs declared in
    `catalogue` (the run's spec files, read again), interrupted unless the run finished."""
    run = contents.run
    finished = contents.finished
    eps = tuple(EpRecord(facts, catalogue.ep_spec(facts.label) if facts.declared else None, tuple(contents.capabilities.get(facts.label, ())))
                for facts in contents.eps)
    # A run that did not end ended, as far as is known, when its journal was last written.
    ended = finished["finished"] if finished else max(run["started"], contents.last_written)
    return RunRecord(
        results=tuple(contents.results), eps=eps, contracts=tuple(catalogue.contracts), spec_digest=catalogue.digest,
        collected=max(contents.collected, len(contents.results)), started=run["started"], finished=ended,
        interrupted=finished["interrupted"] if finished else True, strict=bool(run.get("strict")),
        isolation=run.get("isolation", "worker"), python=run.get("python", ""), platform=run.get("platform", ""),
        command=run.get("command", ""), wrapper=run.get("wrapper", ""), emulated=run.get("emulated", ""), shard=run.get("shard"),
    )
