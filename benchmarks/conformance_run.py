"""Timings of whole conformance runs: `pytest --ep ...` as a user starts it, interpreter included."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
# The runs use Python's bytecode cache, as an installed kit does (pip compiles it at install):
# with PYTHONDONTWRITEBYTECODE set, every run would compile the kit's modules, and pytest would
# rewrite them again (it rewrites the assertions of every module of a plugin's distribution).
ENVIRONMENT = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}

# A vendor file that adds one contract with a wide parameter matrix, so that collection is
# timed over more than 1000 items (the shipped catalogue alone gives about 450 on the CPU EP).
WIDE_CONTRACT = """\
family: bench
title: A wide parameter matrix, for timing collection
contracts:
  - id: bench.wide-roundtrip
    statement: A CPU→DEFAULT→CPU round trip MUST be bit-exact (the same check as copy.roundtrip-exact).
    subject: ep
    severity: informational
    provenance:
      basis: inferred
      ref: "the kit's tests"
    since: "1.22"
    sources:
      - kind: onnxruntime-docs
        ref: "onnxruntime Python API: copy_tensors"
    check: copy.roundtrip
    params:
      dtype: [float32, float64, float16, int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool]
      shape: [{shapes}]
"""


@dataclass
class Run:
    wall: float  # seconds, from starting the interpreter to its exit
    checks: int  # results in report.json
    pytest_seconds: float  # what pytest reports ("... in X s"): collection and the test loop
    exit_code: int
    checks_seconds: float = 0.0  # the checks' own time, as their workers timed them (report.json's durations)


def conformance_run(ep_args: list[str], extra: list[str], repeat: int) -> Run:
    """The fastest of `repeat` runs (noise from other processes only adds time)."""
    best = None
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="ort-conformance-bench-") as tmp:
            started = time.perf_counter()
            completed = subprocess.run([*PYTEST, *ep_args, "--conformance-report", tmp, *extra],
                                       cwd=ROOT, capture_output=True, text=True, env=ENVIRONMENT)
            wall = time.perf_counter() - started
            report = Path(tmp) / "report.json"
            if not report.exists():
                raise RuntimeError(f"the conformance run wrote no report:\n{completed.stdout[-2000:]}{completed.stderr[-2000:]}")
            results = json.loads(report.read_text())["results"]
        run = Run(wall, len(results), _pytest_seconds(completed.stdout), completed.returncode, sum(r["duration"] for r in results))
        if best is None or run.wall < best.wall:
            best = run
    return best


def without_isolated_contracts() -> list[str]:
    """pytest arguments deselecting the contracts marked `isolated`: bad requests that may take
    the process running them down (onnxruntime 1.32 aborts on one of them on the CPU EP), so
    they run in a worker of their own even without isolation. Both sides of the isolation
    comparison leave them out, so that it compares the checks run in pytest's process with the
    same checks run in a worker."""
    from conformance.checks import known_checks
    from conformance.catalogue.spec import load_catalogue

    ids = sorted(c.id for c in load_catalogue(known_checks=known_checks()).contracts if c.isolated)
    return ["-k", f"not ({' or '.join(ids)})"] if ids else []


@dataclass
class Collection:
    items: int
    seconds: float


def collection(ep_args: list[str], repeat: int, items_wanted: int = 1000) -> Collection:
    """The time of pytest's collection of at least `items_wanted` items (best of `repeat`)."""
    best = None
    with tempfile.TemporaryDirectory(prefix="ort-conformance-bench-") as tmp:
        wide = Path(tmp) / "bench-wide.yaml"
        wide.write_text(WIDE_CONTRACT.format(shapes=", ".join(f'"{n}"' for n in range(1, 61))))
        for _ in range(repeat):
            completed = subprocess.run([*PYTEST, "-p", "collection_timer", *ep_args, str(wide), "--collect-only", "--conformance-report", tmp],
                                       cwd=ROOT, capture_output=True, text=True, env=_with_benchmarks_on_path())
            match = re.search(r"collection-timer: (\d+) items in ([0-9.]+) s", completed.stdout)
            if not match:
                raise RuntimeError(f"collection failed:\n{completed.stdout[-2000:]}{completed.stderr[-2000:]}")
            found = Collection(int(match.group(1)), float(match.group(2)))
            if best is None or found.seconds < best.seconds:
                best = found
    if best.items < items_wanted:
        raise RuntimeError(f"only {best.items} items collected, fewer than {items_wanted}")
    return best


PYTEST_FLOOR = "pytest, {items} empty tests"


def floor(items: int, repeat: int) -> dict[str, float]:
    """What no conformance run can go below here, in wall seconds (best of `repeat`): pytest
    running `items` empty tests, and an interpreter importing onnxruntime (which a run needs in
    at least one process before its first check)."""
    with tempfile.TemporaryDirectory(prefix="ort-conformance-bench-") as tmp:
        empty = Path(tmp) / "test_empty.py"
        empty.write_text(f"import pytest\n\n\n@pytest.mark.parametrize('i', range({items}))\ndef test_item(i):\n    pass\n")
        return {
            PYTEST_FLOOR.format(items=items): _best_wall([*PYTEST, "-p", "no:xdist", str(empty)], tmp, repeat),
            "python -c 'import onnxruntime'": _best_wall([sys.executable, "-c", "import onnxruntime"], tmp, repeat),
        }


def _best_wall(command: list[str], cwd: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, cwd=cwd, capture_output=True, check=True, env=ENVIRONMENT)
        best = min(best, time.perf_counter() - started)
    return best


def _with_benchmarks_on_path() -> dict[str, str]:
    path = [str(Path(__file__).parent)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    return dict(ENVIRONMENT, PYTHONPATH=os.pathsep.join(path))


def _pytest_seconds(stdout: str) -> float:
    match = re.search(r" in ([0-9.]+)s", stdout.strip().splitlines()[-1] if stdout.strip() else "")
    return float(match.group(1)) if match else float("nan")
