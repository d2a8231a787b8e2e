"""The scripts of a run's failing results, written to `reports/repro/`: one standalone Python
file per failed, crashed or timed-out case (its first violation's reproducer), named after the
case, so that a vendor runs `python reports/repro/<case>.py` without the kit. Written only for
failing cases, so a passing run writes nothing (and only standalone scripts); scripts of an earlier run in that folder are
removed, so that what is there is this run's."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from conformance import safe_io
from conformance.outcomes import Details

FOLDER = "repro"
FAILING = ("fail", "crash", "timeout", "flaky")
SCRIPT = "# Reproduces: "  # how a standalone script (conformance.checks.context.snippets) begins
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


def script_name(result: dict[str, Any]) -> str:
    """`<contract>_<device>-<params>.py`, in characters every file system takes."""
    params = "-".join(str(value) for value in result.get("params", {}).values())
    case = "-".join(part for part in (str(result.get("device", "")), params) if part)
    name = _UNSAFE.sub("_", f"{result['contract']}_{case}")
    return name[:200] + ".py"


def standalone(result: dict[str, Any]) -> str:
    """The failing `result`'s standalone script ('' when it has none: it passed, or its
    reproducer is the case run through the kit)."""
    if result.get("outcome") not in FAILING:
        return ""
    return next((v.reproducer for v in Details.from_wire(result.get("details")).violations if str(v.reproducer).startswith(SCRIPT)), "")


def path_of(result: dict[str, Any], directory: Path | str) -> str | None:
    """Where `write` puts `result`'s script under the report folder `directory` (None if it
    has none), as the terminal names it while the run goes on. Two cases whose names differ
    only in characters a file name cannot hold would share a name, and `file_names` numbers the
    second: the reports, written once every result is known, name the files by it."""
    return str(Path(directory) / FOLDER / script_name(result)) if standalone(result) else None


def file_names(results: list[dict[str, Any]]) -> list[str | None]:
    """Each result's script's name under repro/ (None for a result without one), in order."""
    names: list[str | None] = []
    taken: set[str] = set()
    for result in results:
        if not standalone(result):
            names.append(None)
            continue
        name, base, n = script_name(result), script_name(result)[:-3], 2
        while name in taken:
            name, n = f"{base}-{n}.py", n + 1
        taken.add(name)
        names.append(name)
    return names


def scripts(results: list[dict[str, Any]]) -> dict[str, str]:
    """{file name: script} of the failing results whose reproducer is a standalone script."""
    files: dict[str, str] = {}
    for result, name in zip(results, file_names(results), strict=True):
        if name:
            reproducer = standalone(result)
            files[name] = reproducer if reproducer.endswith("\n") else reproducer + "\n"
    return files


def write(report: dict[str, Any], directory: Path) -> list[Path]:
    """Writes the scripts of `report`'s failing results into `directory/repro/`; returns their paths."""
    folder = Path(directory) / FOLDER
    files = scripts(report.get("results", []))
    _remove_stale(folder, set(files))
    return safe_io.write_set(folder, files) if files else []


def _remove_stale(folder: Path, keep: set[str]) -> None:
    """Removes the regular *.py files of an earlier run (never a symlink, nor through one)."""
    try:
        if stat.S_ISLNK(os.lstat(folder).st_mode):
            return  # write_set refuses it, with the reason
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        path = folder / name
        try:
            if name.endswith(".py") and name not in keep and stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError:
            pass
