"""`ort-conformance init`: an EP's spec drafted from the EP itself.

The EP is loaded in a worker, as a conformance run loads it (conformance.isolation.Worker, so
that an EP that crashes or hangs costs the worker, not this process); the worker answers with the
EP's facts, the copy matrix of its first device (the probe's own request) and the sessions of the
kit's models on it (engine.observe). conformance.tools.draft makes the spec of that; it is
checked as `ort-conformance validate` checks a file, then written whole or not at all.

Bad input is one line (`InitError`, exit 2) and leaves no draft behind: a library that is not
there or does not load, an EP name the library lacks, an EP that lists no device, crashes or
hangs as it loads, an output file that exists (unless `force`).
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance import safe_io
from conformance.catalogue.contracts import Catalogue
from conformance.catalogue.schema import EP_SCHEMA
from conformance.data import schemas_dir, shipped_spec_dirs
from conformance.errors import KitError, SpecErrors
from conformance.isolation.controller import START_SECONDS, WorkerLost, WorkerRefused, Worker
from conformance.tools.draft import Draft, Observed, Unobservable, draft, render

SUFFIXES = (".yaml", ".yml")  # what pytest and `validate` take for spec files


class InitError(KitError):
    """Why no draft was written, in one line."""


@dataclass(frozen=True)
class Request:
    """What `ort-conformance init` was asked: the EP (`ep`, and `library` to register first),
    its provider options, the worker's timeout and wrapper, where to write (None: NAME.yaml
    here) and whether an existing file may be replaced."""

    ep: str | None
    library: str | None = None
    options: dict[str, str] | None = None
    timeout: float = 60.0
    wrapper: tuple[str, ...] = ()
    output: Path | None = None
    force: bool = False

    def command(self) -> str:
        words = ["ort-conformance", "init"] + (["--ep-library", str(Path(self.library).resolve())] if self.library else [])
        words += ["--ep", self.ep or ""] + [f"--ep-option={key}={value}" for key, value in (self.options or {}).items()]
        return shlex.join(words)


def check(request: Request) -> None:
    """What can be refused before the EP is loaded: an output that is no spec file's name, or
    that exists (without `force`), or whose folder does not; a library that is not a file."""
    if request.output is not None:
        _writable(request.output, request.force)
    if request.library is not None:
        library = Path(request.library)
        if not library.exists():
            raise InitError(f"EP library not found: {request.library}")
        if not library.is_file():
            raise InitError(f"EP library {request.library} is not a file (a shared library is expected)")


def _writable(output: Path, force: bool) -> None:
    if output.suffix not in SUFFIXES:
        raise InitError(f"{output}: a spec file's name ends in .yaml or .yml (pytest and validate read it by its suffix)")
    if not output.parent.is_dir():
        raise InitError(f"{output}: no such folder: {output.parent}")
    if (output.exists() or output.is_symlink()) and not force:
        raise InitError(f"{output} exists: it is kept (--force replaces it)")


def observe(request: Request, catalogue: Catalogue | None = None) -> Observed:
    """What the EP shows, asked of a worker; InitError in one line when it refuses, crashes or hangs."""
    facts = None
    worker = Worker({"ep": request.ep, "library": request.library, "options": request.options or {}}, timeout=request.timeout,
                    wrapper=request.wrapper)
    step = "while onnxruntime loaded it (registering the library, listing its devices)"
    try:
        facts = worker.start()
        if facts.unusable:
            raise InitError(facts.unusable)
        step = "while the copy probe tried its copies"
        matrix = worker.request({"op": "probe", "device": 0, "sizes": []}, what="the copy probe")["capabilities"]
        step = "while sessions of the kit's models ran on it"
        runs = _runs(catalogue)
        sessions = worker.request({"op": "observe", "device": 0, **({"runs": runs} if runs is not None else {})},
                                  what="the sessions of the kit's models")["sessions"]
    except WorkerRefused as exc:
        raise InitError(_refusal_line(str(exc), request)) from None
    except WorkerLost as lost:
        raise InitError(lost_line(lost, step, max(request.timeout, START_SECONDS) if facts is None else request.timeout)) from None
    finally:
        worker.close()
    return Observed(facts, matrix, sessions, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), request.command())


def _runs(catalogue: Catalogue | None) -> list[list[str]] | None:
    """The (recipe, dtype) cases of session.nodes-on-ep: the sessions init runs (a run breaks no
    other contract; a run of another, which no contract runs, may crash the EP and cost the draft)."""
    contract = next((c for c in catalogue.contracts if c.id == "session.nodes-on-ep"), None) if catalogue else None
    if contract is None:
        return None
    return [[case["recipe"], case["dtype"]] for case in contract.cases()]


def lost_line(lost: WorkerLost, step: str, timeout: float) -> str:
    """A worker lost while init asked it something, in one line: when, the call in flight, and
    how it ended."""
    during = f" (in {lost.call})" if lost.call else ""
    if lost.outcome == "timeout":
        return f"the EP hung {step}{during}: no answer within {timeout:g} s, and its worker was killed"
    ended = f"was {lost.actual}" if lost.actual.startswith("killed") else lost.actual
    return f"the EP crashed {step}{during}: the worker that loaded it {ended}"


def _refusal_line(text: str, request: Request) -> str:
    """The worker's refusal in one line: its first, which says it whole (eps.unknown_ep_message)."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "the worker refused without saying why")
    if line.startswith("unknown EP") and not request.library:
        line += " (`ort-conformance probe` lists the EPs here; a library of your own: --ep-library=PATH --ep NAME)"
    return line


def make(request: Request, catalogue: Catalogue) -> tuple[Draft, Path, str]:
    """The draft of the EP `request` names, where it goes and its text; InitError when it cannot be made."""
    check(request)
    seen = observe(request, catalogue)
    try:
        made = draft(seen, catalogue)
    except Unobservable as exc:
        raise InitError(str(exc)) from None
    output = request.output or Path(f"{made.data['ep']['name']}.yaml")
    _writable(output, request.force)  # again: the default name is known only now, and time has passed
    text = render(made, _schema_path(output))
    _validate(text, output.name)
    return made, output, text


def _schema_path(output: Path) -> str:
    """The EP schema as the YAML language server finds it from the draft's folder."""
    return os.path.relpath(schemas_dir() / EP_SCHEMA, output.resolve().parent)


def _validate(text: str, name: str) -> None:
    """The draft checked as `ort-conformance validate` checks a vendor's file, before it is written."""
    from conformance.catalogue.spec import load_catalogue
    from conformance.checks import known_checks

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / name).write_text(text, encoding="utf-8")
        try:
            load_catalogue([*map(str, shipped_spec_dirs()), str(Path(folder) / name)], known_checks=known_checks())
        except SpecErrors as exc:
            raise InitError(f"the draft does not validate, so it was not written: {exc.errors[0]}") from None


def write(output: Path, text: str) -> None:
    try:
        safe_io.write_file(output.parent, output.name, text)
    except safe_io.UnsafeFile as exc:
        raise InitError(f"{output}: cannot be written: {exc}") from None


def run(request: Request) -> int:
    """`ort-conformance init`: the draft made and written, its warnings on stderr, what to do next
    on stdout; exit 0 (InitError when no draft was written)."""
    from conformance.catalogue.spec import load_catalogue

    if not request.ep:
        raise InitError("--ep NAME is needed: the EP's provider name" + (" in the library" if request.library else ""))
    made, output, text = make(request, load_catalogue())
    for breach in made.breaches:
        print(f"ort-conformance: warning: {breach}", file=sys.stderr)
    for text in made.left_out:
        print(f"ort-conformance: left out: {text}", file=sys.stderr)
    write(output, text)
    print("\n".join(next_steps(request, output, made)))
    return 0


def next_steps(request: Request, output: Path, made: Draft) -> list[str]:
    """What the terminal says once the draft is written."""
    ep: dict[str, Any] = made.data["ep"]
    unconfirmed = list(ep["verification"])
    library = f" --ep-library={Path(request.library).resolve()}" if request.library else ""
    return [f"wrote {output}: a draft of {ep['provider']}'s spec, {len(unconfirmed)} claims to confirm ({', '.join(unconfirmed)})",
            f"run it: pytest {shlex.quote(str(output))}{library} --ep {shlex.quote(ep['provider'])}"
            + (f" {' '.join(shlex.quote('--ep-option=' + k + '=' + v) for k, v in (request.options or {}).items())}" if request.options else ""),
            "then read docs/new-ep.md: confirm each claim, delete the draft line, run with --conformance-strict"]
