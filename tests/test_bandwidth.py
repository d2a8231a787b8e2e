"""Copy throughput figures: what they are made of, never how fast anything is."""

from __future__ import annotations

import pytest

from conformance import bandwidth
from conformance.capabilities import capability_matrix
from conformance.runner import Runner


@pytest.fixture(scope="module")
def ctx():
    return Runner("cpu").context(0)


def test_best_seconds_is_the_best_trial_after_a_warm_up():
    calls = []
    seconds = bandwidth.best_seconds(lambda: calls.append(1), trials=3, budget=10.0)
    assert seconds > 0
    assert len(calls) >= 1 + 3  # the warm-up, then at least one call per trial


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
