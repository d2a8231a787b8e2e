"""What a vendor's large catalogue costs: `python benchmarks/large_catalogue.py [N ...]`.

N contracts (default 10 000, then 50 000), each one case on the CPU EP, are written to a
temporary folder, in files of 2000 (a spec file may hold 1 MiB), and run as a vendor runs them
(`pytest many-0.yaml many-1.yaml ... --ep=cpu`, the shipped catalogue with them); the line printed for each N gives the checks, the run's wall time,
pytest's floor for as many items (empty tests), their ratio, and the peak memory (the largest
resident set of the run's processes). Building the report is linear in the results (each spec
file read once), so the ratio stays near that of a shipped run. Prints figures; fails nothing.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import conformance_run  # noqa: E402

TARGET_RATIO = 3.0  # of pytest's floor, for a 10 000-contract catalogue


PER_FILE = 2000


def spec(first: int, contracts: int) -> str:
    entries = "".join(f"""  - id: many.c{i}
    statement: Contract number {i} holds (the same check as copy.roundtrip-exact).
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
      dtype: [float32]
      shape: ["16"]
""" for i in range(first, first + contracts))
    return f"family: many\ntitle: A vendor's large catalogue, for timing\ncontracts:\n{entries}"


def measure(contracts: int) -> str:
    with tempfile.TemporaryDirectory(prefix="ort-conformance-large-") as tmp:
        paths = []
        for first in range(0, contracts, PER_FILE):
            paths.append(Path(tmp) / f"many-{first // PER_FILE}.yaml")
            paths[-1].write_text(spec(first, min(PER_FILE, contracts - first)))
        reports = Path(tmp) / "reports"
        started = time.perf_counter()
        completed = subprocess.run([*conformance_run.PYTEST, *map(str, paths), "--ep=cpu", "--conformance-report", str(reports)],
                                   cwd=conformance_run.ROOT, capture_output=True, text=True, env=conformance_run.ENVIRONMENT)
        wall = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux: the largest of the processes waited for
        report = reports / "report.json"
        if not report.exists():
            return f"{contracts} contracts: no report (exit {completed.returncode}): {completed.stderr.strip()[-300:]}"
        checks = len(json.loads(report.read_text())["results"])
    pytest_floor = conformance_run.floor(checks, 1)[conformance_run.PYTEST_FLOOR.format(items=checks)]
    ratio = wall / pytest_floor
    met = f"; target <= {TARGET_RATIO:g}x: {'met' if ratio <= TARGET_RATIO else 'NOT met'}" if contracts == 10_000 else ""
    return (f"{contracts} contracts: {checks} checks in {wall:.1f} s, pytest's floor for as many items {pytest_floor:.1f} s, "
            f"{ratio:.2f}x; peak memory {peak:.0f} MiB; exit {completed.returncode}{met}")


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    try:
        sizes = [int(arg) for arg in args] or [10_000, 50_000]
    except ValueError:
        print(f"benchmarks/large_catalogue.py: expects numbers of contracts, got {' '.join(args)}", file=sys.stderr)
        return 2
    for contracts in sizes:
        print(measure(contracts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
