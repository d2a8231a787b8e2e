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


def large_catalogue():
    spec = importlib.util.spec_from_file_location("large_catalogue", ROOT / "benchmarks" / "large_catalogue.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_large_catalogue_is_judged_at_2x_pytests_floor_for_10000_contracts_only():
    large = large_catalogue()
    assert large.LargeRun(10_000, 11_017, 10.4, 5.2, 300.0, 0).line().endswith("2.00x; peak memory 300 MiB; exit 0; target <= 2x: met")
    assert large.LargeRun(10_000, 11_017, 10.5, 5.2, 300.0, 0).line().endswith("target <= 2x: NOT met")
    assert "target" not in large.LargeRun(50_000, 51_017, 200.0, 25.0, 900.0, 0).line()
    assert large.LargeRun(10_000, 0, 1.0, float("nan"), 50.0, 4, "usage error").line() == "10000 contracts: no report (exit 4): usage error"


def test_a_large_catalogue_file_is_valid_and_names_the_check_the_issue_measured(tmp_path):
    from conformance.catalogue.spec import load_catalogue

    path = tmp_path / "many-0.yaml"
    path.write_text(large_catalogue().spec(0, 3))
    contracts = [c for c in load_catalogue([str(path)]).contracts if c.family == "many"]
    assert [c.check for c in contracts] == ["update-inplace.from-numpy"] * 3
