"""What the stress tier costs a certification run: the whole run against the same run with
`-m "not stress"`, both on one machine in one go (these machines are shared and noisy: only
figures taken side by side compare), and the tier's own time and memory peak.

The memory peak is the largest resident set of any process of the run (the workers are
descendants that are waited for, so RUSAGE_CHILDREN covers them), read in a fresh child per
run so that one run's peak does not carry into the next.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from conformance_run import ENVIRONMENT, PYTEST, ROOT

# What the issue that brought the tier in allows it: at most this much added to a CPU-EP or
# refdev certification run on 2 cores, and the kit's own memory under this beyond the large
# tensors it holds.
ADDED_SECONDS = 30.0
KIT_MEMORY_BYTES = 1 << 30

# Runs the command given and prints its wall time and its descendants' peak RSS as JSON.
_MEASURED = """\
import json, resource, subprocess, sys, time
started = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
wall = time.perf_counter() - started
print(json.dumps({"wall": wall, "exit": code, "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


@dataclass
class TierRun:
    wall: float
    exit_code: int
    peak_bytes: int
    stress_cases: int
    stress_seconds: float  # the stress cases' own time, as their workers timed them
    largest_tensor: int  # the largest tensor size the size family reached (0: none recorded)


def measured_run(ep_args: list[str], extra: list[str]) -> TierRun:
    with tempfile.TemporaryDirectory(prefix="ort-conformance-stress-") as tmp:
        command = [*PYTEST, *ep_args, "--conformance-report", tmp, *extra]
        reply = subprocess.run([sys.executable, "-c", _MEASURED, *command], cwd=ROOT, capture_output=True, text=True, env=ENVIRONMENT)
        figures = json.loads(reply.stdout)
        report = Path(tmp) / "report.json"
        if not report.exists():
            raise RuntimeError(f"the conformance run ({' '.join(ep_args + extra)}) wrote no report (exit {figures['exit']})")
        data = json.loads(report.read_text())
    stress = {cid for cid, c in (data.get("contracts") or {}).items() if c.get("tier") == "stress"}
    results = [r for r in data["results"] if r["contract"] in stress]
    largest = max((int(r.get("details", {}).get("evidence", {}).get("largest_bytes", 0) or 0) for r in results), default=0)
    return TierRun(figures["wall"], figures["exit"], figures["peak_kib"] * 1024, len(results),
                   sum(r["duration"] for r in results), largest)


def targets() -> list[tuple[str, list[str]]]:
    """The EPs the tier's cost is measured on: the CPU EP, and refdev where it is built."""
    found = [("cpu", ["--ep=cpu"])]
    library = ROOT / "refdev" / "build" / "libort_refdev_ep.so"
    if library.exists():
        found.append(("refdev", [f"--ep-library={library}", "--ep", "refdev"]))
    return found


def measure() -> list[list[str]]:
    """One table row per EP: the whole run, the run without the tier, what the tier adds, its
    own time, the memory peaks of both runs."""
    rows = []
    for name, ep_args in targets():
        started = time.perf_counter()
        whole = measured_run(ep_args, [])
        without = measured_run(ep_args, ["-m", "not stress"])
        added = whole.wall - without.wall
        rows.append([name, f"{whole.wall:.1f}", f"{without.wall:.1f}", f"{added:+.1f}", f"{whole.stress_cases}",
                     f"{whole.stress_seconds:.1f}", _mib(whole.peak_bytes), _mib(without.peak_bytes),
                     _mib(whole.largest_tensor) if whole.largest_tensor else "-",
                     "yes" if added <= ADDED_SECONDS else "no", f"{time.perf_counter() - started:.0f}"])
    return rows


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB"
