"""What a vendor's large catalogue costs: `python benchmarks/large_catalogue.py [N ...]`.

N contracts (default 10 000, then 50 000), each one `update-inplace.from-numpy` case on the
CPU EP, are written to a temporary folder, in files of 2000 (a spec file may hold 1 MiB), and
run as a vendor runs them (`pytest many-0.yaml many-1.yaml ... --ep=cpu`, the shipped catalogue
with them); the line printed for each N gives the checks, the run's wall time, pytest's floor
for as many items (empty tests), their ratio, and the peak memory (the largest resident set of
the run's processes). `benchmarks/run.py` prints the same figures for 10 000 contracts, best of
its --repeat, beside its other targets. Prints figures; fails nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import conformance_run  # noqa: E402

TARGET_CONTRACTS = 10_000
TARGET_RATIO = 2.0  # of pytest's floor for as many items, for TARGET_CONTRACTS contracts


PER_FILE = 2000


def spec(first: int, contracts: int) -> str:
    entries = "".join(f"""  - id: many.c{i}
    statement: Contract number {i} holds (the same check as update-inplace.from-numpy).
    subject: ep
    severity: informational
    provenance:
      basis: inferred
      ref: "the kit's tests"
    since: "1.22"
    sources:
      - kind: onnxruntime-docs
        ref: "onnxruntime Python API: OrtValue.update_inplace"
    check: update-inplace.from-numpy
    params:
      dtype: [float32]
      shape: ["16"]
""" for i in range(first, first + contracts))
    return f"family: many\ntitle: A vendor's large catalogue, for timing\ncontracts:\n{entries}"


@dataclass
class LargeRun:
    contracts: int
    checks: int  # results in report.json (the shipped catalogue's included)
    wall: float  # seconds, from starting the interpreter to its exit
    floor: float  # pytest running as many empty tests, measured in the same call
    peak_mib: float  # the largest resident set of the run's processes
    exit_code: int
    error: str = ""  # why the run wrote no report

    @property
    def ratio(self) -> float:
        return self.wall / self.floor

    def line(self) -> str:
        if self.error:
            return f"{self.contracts} contracts: no report (exit {self.exit_code}): {self.error}"
        met = f"; target <= {TARGET_RATIO:g}x: {'met' if self.ratio <= TARGET_RATIO else 'NOT met'}" if self.contracts == TARGET_CONTRACTS else ""
        return (f"{self.contracts} contracts: {self.checks} checks in {self.wall:.1f} s, pytest's floor for as many items {self.floor:.1f} s, "
                f"{self.ratio:.2f}x; peak memory {self.peak_mib:.0f} MiB; exit {self.exit_code}{met}")


def measure(contracts: int, repeat: int = 1) -> LargeRun:
    """The fastest of `repeat` runs of `contracts` contracts, against the fastest of `repeat`
    runs of pytest's floor for as many items, measured after them."""
    with tempfile.TemporaryDirectory(prefix="ort-conformance-large-") as tmp:
        paths = []
        for first in range(0, contracts, PER_FILE):
            paths.append(Path(tmp) / f"many-{first // PER_FILE}.yaml")
            paths[-1].write_text(spec(first, min(PER_FILE, contracts - first)))
        best: LargeRun | None = None
        for attempt in range(repeat):
            run = _run(contracts, paths, Path(tmp) / f"reports-{attempt}")
            if run.error:
                return run
            if best is None or run.wall < best.wall:
                best = run
    assert best is not None, "repeat is at least 1"
    best.floor = conformance_run.floor(best.checks, repeat)[conformance_run.PYTEST_FLOOR.format(items=best.checks)]
    return best


def _run(contracts: int, paths: list[Path], reports: Path) -> LargeRun:
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen([*conformance_run.PYTEST, *map(str, paths), "--ep=cpu", "--conformance-report", str(reports)],
                                   cwd=conformance_run.ROOT, stdout=subprocess.DEVNULL, stderr=errors, env=conformance_run.ENVIRONMENT)
        # This run's own peak: wait4's usage is the run's process and the workers it waited for.
        # (RUSAGE_CHILDREN would be the largest of every run this benchmark made so far: the
        # stress tier's 8 GiB of refdev, measured before, was printed here once.)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
    peak = usage.ru_maxrss / 1024  # KiB on Linux
    report = reports / "report.json"
    if not report.exists():
        return LargeRun(contracts, 0, wall, float("nan"), peak, process.returncode, stderr.strip()[-300:])
    checks = len(json.loads(report.read_text())["results"])
    return LargeRun(contracts, checks, wall, float("nan"), peak, process.returncode)


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    try:
        sizes = [int(arg) for arg in args] or [10_000, 50_000]
    except ValueError:
        print(f"benchmarks/large_catalogue.py: expects numbers of contracts, got {' '.join(args)}", file=sys.stderr)
        return 2
    for contracts in sizes:
        print(measure(contracts).line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
