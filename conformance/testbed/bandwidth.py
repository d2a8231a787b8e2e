"""Copy throughput between memories of an EP device, beside the host's own memcpy.

A figure is the best of several timed trials (each repeating the copy often enough to be
measurable), in GB/s (10^9 bytes per second), so that noise from other processes can only make
a figure lower, never higher. Used by the capability matrix (a few size classes, within a time
budget) and by the benchmark (sizes up to 256 MiB). Knows nothing of contracts or reports.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from conformance.findings import message_line

KIB = 1 << 10
MIB = 1 << 20
# The size classes of the capability matrix: latency-bound, cache-sized, bandwidth-bound.
SIZE_CLASSES = (4 * KIB, MIB, 64 * MIB)
# A trial repeats a copy until it takes this long, so that the timer (nanoseconds) and one
# call's overhead do not count; 1 ms rather than 2 takes 6 ms off the copy probe's 60 on the CPU EP.
MIN_TRIAL_SECONDS = 0.001


def size_label(nbytes: int) -> str:
    return f"{nbytes // MIB}MiB" if nbytes >= MIB else f"{nbytes // KIB}KiB"


def best_seconds(operation: Callable[[], Any], *, trials: int = 5, budget: float = 1.0,
                 finish: Callable[[], Any] | None = None) -> float:
    """Seconds one `operation()` takes: the best of `trials` timed trials, fewer when `budget`
    seconds have passed (at least one trial always runs, after one untimed warm-up call).
    `finish`, when given, ends every trial inside its timing: it waits until the trial's
    operations are done, for a device that only queues them."""
    operation()
    if finish is not None:
        finish()
    started = time.perf_counter()
    repeats, best = 1, float("inf")
    for _ in range(trials):
        begin = time.perf_counter()
        for _ in range(repeats):
            operation()
        if finish is not None:
            finish()
        elapsed = time.perf_counter() - begin
        best = min(best, elapsed / repeats)
        if elapsed < MIN_TRIAL_SECONDS:
            repeats = min(repeats * max(2, int(MIN_TRIAL_SECONDS / max(elapsed, 1e-9))), 1 << 16)
        if time.perf_counter() - started > budget:
            break
    return best


def gbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e9 if seconds > 0 else float("inf")


class HostBuffers:
    """Two host arrays of one size, for one measurement after another at that size (host
    memcpy, the CPU ends of every pair): their pages are allocated and first touched once per
    size rather than once per measurement (about 5 ms per 64 MiB array on the development
    machine), and not written again, since only how long a copy takes is measured here."""

    FIRST_BYTES = (0x3C, 0x00)  # what each slot holds when made: source and destination differ

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self._arrays: dict[int, np.ndarray] = {}

    def array(self, slot: int) -> np.ndarray:
        """Array `slot` (0: a source, 1: a destination), holding what the last copy left."""
        if slot not in self._arrays:
            self._arrays[slot] = np.full(self.nbytes, self.FIRST_BYTES[slot], dtype=np.uint8)
        return self._arrays[slot]


def host_memcpy(nbytes: int, *, trials: int = 5, budget: float = 1.0, host: HostBuffers | None = None) -> float:
    """GB/s of numpy copying `nbytes` between two host buffers: the limit a host copy can reach."""
    host = host or HostBuffers(nbytes)
    source, destination = host.array(0), host.array(1)
    return gbps(nbytes, best_seconds(lambda: np.copyto(destination, source), trials=trials, budget=budget))


class Endpoints:
    """A source and a destination value of `nbytes` in two memories of an EP device; their
    CPU-side bytes in `host`'s arrays when given."""

    def __init__(self, ctx, source_info, destination_info, nbytes: int, host: HostBuffers | None = None):
        self.ctx = ctx
        self._storage: list[np.ndarray] = []  # numpy arrays backing CPU values, kept alive with them
        host = host or HostBuffers(nbytes)
        self.source = self._value(source_info, host.array(0))
        self.destination = self._value(destination_info, host.array(1))
        self._marker = self._read_back_marker(destination_info if destination_info is not None else source_info)

    def _read_back_marker(self, device_info) -> tuple | None:
        """(one byte in the device memory end, one byte of CPU memory), or None when no end is
        device memory, or onnxruntime has no data transfer for it (memory the CPU writes
        directly, whose copies are done when they return)."""
        if device_info is None:
            return None
        try:
            marker = (self._value(device_info, np.zeros(1, dtype=np.uint8)), self._value(None, np.zeros(1, dtype=np.uint8)))
            self.ctx.ort.copy_tensors([marker[0]], [marker[1]], None)
        except Exception:
            return None
        return marker

    def barrier(self) -> None:
        """Wait until the copies queued on the device memory end are done: read one byte of that
        memory back to the CPU. An EP may only queue a device copy (WebGPU does), and a read
        back waits for the copies queued before it on the device's in-order queue; without it a
        device-to-device figure measures how fast copies are queued, not done."""
        if self._marker is not None:
            self.ctx.ort.copy_tensors([self._marker[0]], [self._marker[1]], None)

    def _value(self, info, storage: np.ndarray):
        """A value in the memory of `info` (None: CPU memory) holding `storage`'s bytes."""
        self._storage.append(storage)
        cpu = self.ctx.ort.OrtValue.ortvalue_from_numpy(storage)
        if info is None:
            return cpu
        value = self.ctx.ort.OrtValue.ortvalue_from_shape_and_type([storage.size], np.uint8, memory_info=info)
        self.ctx.ort.copy_tensors([cpu], [value], None)
        return value

    def operation(self, method: str, synchronize: Callable[[], Any] | None = None) -> Callable[[], Any]:
        if method == "copy_tensors":
            copy = lambda: self.ctx.ort.copy_tensors([self.source], [self.destination], None)  # noqa: E731
        elif method == "update_inplace":
            copy = lambda: self.destination.update_inplace(self.source)  # noqa: E731
        elif method == "update_inplace_numpy":
            # from the host array behind the CPU source: the path an application takes with numpy data
            copy = lambda: self.destination.update_inplace(self._storage[0])  # noqa: E731
        else:
            raise ValueError(f"unknown copy method {method!r}")
        if synchronize is None:
            return copy
        return lambda: (copy(), synchronize())


def throughput(ctx, source_info, destination_info, method: str, nbytes: int, *, trials: int = 5, budget: float = 1.0,
               synchronize: Callable[[], Any] | None = None, host: HostBuffers | None = None) -> dict[str, Any]:
    """{'gbps': figure} for one copy, or {'error': why} when the copy is refused. `synchronize`,
    when given, runs after each copy (waiting for a device that copies asynchronously); every
    trial ends with `Endpoints.barrier` either way. `host`: the arrays of that size to use."""
    try:
        endpoints = Endpoints(ctx, source_info, destination_info, nbytes, host)
        seconds = best_seconds(endpoints.operation(method, synchronize), trials=trials, budget=budget, finish=endpoints.barrier)
    except Exception as exc:
        return {"error": message_line(exc)[:200]}
    return {"gbps": significant(gbps(nbytes, seconds))}


def significant(figure: float, digits: int = 4) -> float:
    return float(f"{figure:.{digits}g}")
