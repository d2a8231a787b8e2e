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


def device_copy(method: str, nbytes: int, gbps: float, device_memcpy: float):
    return SimpleNamespace(source="default", destination="default", method=method, nbytes=nbytes, gbps=gbps, error="", device_memcpy=device_memcpy)


def test_the_gpu_target_judges_each_device_to_device_method_against_the_devices_memcpy_at_256mib():
    run = benchmark_run()
    rows = [device_copy("copy_tensors", 256 * MIB, 2000.0, 2100.0), device_copy("update_inplace", 256 * MIB, 1000.0, 2100.0)]
    assert run.device_copy_verdicts(rows, 256 * MIB) == [
        ["copy_tensors device>device >= 0.8 x device memcpy at 256MiB", "0.95", "yes"],
        ["update_inplace(OrtValue) device>device >= 0.8 x device memcpy at 256MiB", "0.48", "NO"]]


def test_the_gpu_target_is_absent_without_a_device_memcpy_and_unjudged_below_256mib():
    run = benchmark_run()
    assert run.device_copy_verdicts([device_copy("copy_tensors", MIB, 10.0, None)], MIB) == []
    assert run.device_copy_verdicts([device_copy("copy_tensors", MIB, 10.0, 20.0)], MIB)[0][1:] == ["not measured: --max-size 1MiB", "-"]
