"""Copy throughput figures: what they are made of, never how fast anything is."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from conformance.testbed import bandwidth
from conformance.engine.capabilities import capability_matrix
from conformance.engine.runner import Runner


@pytest.fixture(scope="module")
def ctx():
    return Runner("cpu").context(0)


def test_best_seconds_is_the_best_trial_after_a_warm_up():
    calls = []
    seconds = bandwidth.best_seconds(lambda: calls.append(1), trials=3, budget=10.0)
    assert seconds > 0
    assert len(calls) >= 1 + 3  # the warm-up, then at least one call per trial


def test_every_trial_ends_with_finish_inside_its_timing():
    calls = []
    bandwidth.best_seconds(lambda: calls.append("copy"), trials=3, budget=10.0, finish=lambda: calls.append("finish"))
    assert calls[:2] == ["copy", "finish"]  # the warm-up is finished too
    trials = "".join("c" if call == "copy" else "f" for call in calls[2:]).split("f")
    assert trials[-1] == "" and len(trials) - 1 >= 1 and all(trials[:-1])  # each trial: copies, then one finish


class DeviceValue:
    def __init__(self, on_device: bool):
        self.on_device = on_device


class Clock:
    """The time the figures are timed with, advanced only by the work the stand-in device does:
    the figure is then the same on an idle machine and a loaded one."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class QueuedDevice:
    """A stand-in onnxruntime whose copies into device memory are only queued, and paid for by
    the next read back to the CPU (as WebGPU's are): 1 ms per queued copy, on `clock`."""

    def __init__(self, clock: Clock):
        self.queued = 0
        self.clock = clock
        self.OrtValue = SimpleNamespace(ortvalue_from_numpy=lambda array: DeviceValue(False),
                                        ortvalue_from_shape_and_type=lambda shape, dtype, memory_info=None: DeviceValue(True))

    def copy_tensors(self, sources, destinations, stream):
        if all(d.on_device for d in destinations):
            self.queued += len(destinations)
        elif any(s.on_device for s in sources):
            self.clock.now += 0.001 * self.queued
            self.queued = 0


def test_a_device_copy_that_is_only_queued_is_timed_until_it_is_done(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(bandwidth, "time", clock)
    ctx = SimpleNamespace(ort=QueuedDevice(clock))
    figure = bandwidth.throughput(ctx, "device memory", "device memory", "copy_tensors", 1 << 20, trials=2, budget=1.0)
    # 1 MiB per ms: 1.049 GB/s, not the infinity a timing of the queueing alone gives.
    assert figure["gbps"] == bandwidth.significant((1 << 20) / 0.001 / 1e9)


def test_a_copy_onnxruntime_refuses_is_an_error_not_a_figure(ctx):
    refused = bandwidth.throughput(ctx, None, None, "copy_tensors", 4096, trials=1)
    assert set(refused) == {"error"} and refused["error"]
    copied = bandwidth.throughput(ctx, None, None, "update_inplace", 4096, trials=1)
    assert set(copied) == {"gbps"} and copied["gbps"] > 0


def test_the_capability_matrix_carries_figures_per_size_class_beside_host_memcpy(ctx):
    matrix = capability_matrix(ctx, [4096, 1 << 20])
    assert set(matrix["host_memcpy"]) == {"4KiB", "1MiB"}
    pair = matrix["pairs"][0]
    assert (pair["source"], pair["destination"]) == ("cpu", "cpu")
    # The CPU EP has no data transfer of its own for CPU memory; onnxruntime's update_inplace copies.
    assert "copy_tensors" not in pair["throughput"]
    assert set(pair["throughput"]["update_inplace"]) == {"4KiB", "1MiB"}


def test_no_sizes_means_no_timing(ctx):
    matrix = capability_matrix(ctx, [])
    assert matrix["host_memcpy"] == {} and "throughput" not in matrix["pairs"][0]


def test_size_labels():
    assert [bandwidth.size_label(n) for n in (4096, 1 << 20, 256 << 20)] == ["4KiB", "1MiB", "256MiB"]


def test_measurements_of_one_size_share_its_host_arrays_made_once():
    host = bandwidth.HostBuffers(4096)
    source = host.array(0)
    assert (source == 0x3C).all()
    source[:] = 7  # what a copy left
    assert host.array(0) is source and (source == 7).all()
    assert host.array(1) is not source and not host.array(1).any()


def test_a_pair_copies_between_the_host_arrays_it_was_given(ctx):
    host = bandwidth.HostBuffers(4096)
    source, destination = host.array(0), host.array(1)
    endpoints = bandwidth.Endpoints(ctx, None, None, 4096, host)
    assert (source == 0x3C).all() and not destination.any()
    endpoints.operation("update_inplace")()
    assert (destination == 0x3C).all()  # the CPU values are the host arrays themselves


def test_a_large_size_is_timed_when_the_size_before_it_says_it_fits(ctx, monkeypatch):
    """4 KiB copies bound by latency (0.01 GB/s) say nothing of how long 64 MiB takes: the 1 MiB
    figure (5 GB/s) does, and 64 MiB fits in the budget at that speed."""
    speeds = {4096: 0.01, 1 << 20: 5.0, 64 << 20: 5.0}
    monkeypatch.setattr(bandwidth, "throughput", lambda ctx, source, destination, method, nbytes, **kw: {"gbps": speeds[nbytes]})
    monkeypatch.setattr(bandwidth, "host_memcpy", lambda nbytes, **kw: 20.0)
    matrix = capability_matrix(ctx, [4096, 1 << 20, 64 << 20])
    assert matrix["pairs"][0]["throughput"]["update_inplace"] == {"4KiB": 0.01, "1MiB": 5.0, "64MiB": 5.0}


def test_bandwidth_bound_sizes_are_timed_in_two_trials_and_smaller_ones_in_three(ctx, monkeypatch):
    trials = {}

    def timed(nbytes, **kw):
        trials[nbytes] = kw["trials"]
        return {"gbps": 5.0}

    monkeypatch.setattr(bandwidth, "throughput", lambda ctx, source, destination, method, nbytes, **kw: timed(nbytes, **kw))
    monkeypatch.setattr(bandwidth, "host_memcpy", lambda nbytes, **kw: timed(-nbytes, **kw)["gbps"])
    capability_matrix(ctx, [4096, 1 << 20, 64 << 20])
    assert trials == {4096: 3, 1 << 20: 3, 64 << 20: 2, -4096: 3, -(1 << 20): 3, -(64 << 20): 2}


def test_the_matrix_is_computed_without_the_parents_driver():
    """capabilities runs inside a worker; asking workers for it is conformance.run.probing's."""
    code = "import sys, conformance.engine.capabilities; print(' '.join(m for m in sys.modules if m.startswith('conformance.')))"
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout.split())
    assert "conformance.engine.capabilities" in loaded
    assert not {"conformance.isolation.controller", "conformance.run.probing", "conformance.isolation.fork_client"} & loaded
