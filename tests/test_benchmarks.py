"""The benchmark's verdicts on its targets (figures from stand-in rows; no timing here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20


def benchmark_run():
    spec = importlib.util.spec_from_file_location("benchmark_run", ROOT / "benchmarks" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def host_copy(nbytes: int, gbps: float):
    return SimpleNamespace(source="cpu", destination="cpu", nbytes=nbytes, gbps=gbps, error="")


def test_the_256mib_target_is_not_judged_when_that_size_was_not_measured():
    run = benchmark_run()
    verdict = run.host_copy_verdict([host_copy(MIB, 9.5)], {MIB: 10.0}, MIB)
    assert verdict == ["host copies >= 0.9 x memcpy at 256MiB", "not measured: --max-size 1MiB", "-"]


def test_the_256mib_target_is_judged_at_256mib():
    run = benchmark_run()
    size = 256 * MIB
    assert run.host_copy_verdict([host_copy(size, 9.5), host_copy(size, 9.8)], {size: 10.0}, size)[1:] == ["worst 0.95 of 2", "yes"]
    assert run.host_copy_verdict([host_copy(size, 8.0)], {size: 10.0}, size)[1:] == ["worst 0.80 of 1", "NO"]
    assert run.host_copy_verdict([], {size: 10.0}, size)[1:] == ["no host copy measured", "NO"]
