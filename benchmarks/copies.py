"""Copy throughput for every direction each EP device supports, beside the limits of the machine.

Every memory pair of every EP device present (CPU memory, the device's DEFAULT and
HOST_ACCESSIBLE memory, other EP devices' DEFAULT memory: the capability matrix's endpoints) is
timed with `copy_tensors` and `update_inplace(OrtValue)` at each size. Each figure is compared
with numpy copying the same number of bytes between host buffers, measured in the same run, and
for CUDA device-to-device copies with the device's own memcpy (PyTorch or CuPy).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from conformance.testbed import bandwidth
from conformance.engine.capabilities import memory_endpoints

ROOT = Path(__file__).resolve().parents[1]
REFDEV = ROOT / "refdev" / "build" / "libort_refdev_ep.so"
SIZES = tuple(4 * bandwidth.KIB * 4**k for k in range(9))  # 4 KiB, 16 KiB, ... 256 MiB
METHODS = ("copy_tensors", "update_inplace", "update_inplace_numpy")  # update_inplace from an OrtValue, and from numpy
# The device's own copy a pair of a CUDA device is compared with: pinned host memory for CPU ends.
DEVICE_DIRECTIONS = {("cpu", "default"): "h2d", ("default", "cpu"): "d2h", ("default", "default"): "d2d"}


@dataclass
class Target:
    """An EP to time: its alias, the plugin library to register, or why it is skipped."""

    name: str
    library: str | None = None
    skipped: str = ""


@dataclass
class Row:
    ep: str
    device: str
    method: str
    source: str
    destination: str
    nbytes: int
    gbps: float | None
    error: str = ""
    device_memcpy: float | None = None  # the device's own memcpy at this size, where it applies


def targets(library: str | None, ep: str | None) -> list[Target]:
    """The EP asked for, or every EP the kit knows how to time here; one that is not installed
    is skipped with the kit's own message when it is loaded."""
    if ep:
        return [Target(ep, library)]
    refdev = Target("refdev", str(REFDEV)) if REFDEV.exists() else Target("refdev", skipped=f"not built ({REFDEV}): make -C refdev")
    return [Target("cpu"), refdev, Target("webgpu"), Target("CUDAExecutionProvider")]


def host_limits(sizes: tuple[int, ...]) -> dict[int, float]:
    """numpy's host-to-host copy at each size: the limit a host copy can reach."""
    return {nbytes: bandwidth.host_memcpy(nbytes, trials=7, budget=2.0) for nbytes in sizes}


def measure(target: Target, sizes: tuple[int, ...], device_memcpy) -> list[Row]:
    from conformance.engine.runner import Runner

    runner = Runner(target.name, library=target.library)
    cuda = runner.facts.provider == "CUDAExecutionProvider"
    synchronize = device_memcpy.synchronize if cuda else None
    rows = []
    for device in runner.facts.devices:
        ctx = runner.context(device.index)
        endpoints = memory_endpoints(ctx)
        for source in endpoints:
            for destination in endpoints:
                for method in METHODS:
                    if method == "update_inplace_numpy" and source.name != "cpu":
                        continue  # numpy data is host data: from a CPU source only
                    direction = DEVICE_DIRECTIONS.get((source.name, destination.name)) if cuda else None
                    rows += _direction(ctx, source, destination, method, sizes, device_memcpy if direction else None, synchronize, direction)
    return rows


def _direction(ctx, source, destination, method: str, sizes, device_memcpy, synchronize, direction: str | None = None) -> list[Row]:
    rows = []
    for nbytes in sizes:
        measured = bandwidth.throughput(ctx, source.info, destination.info, method, nbytes, trials=5, budget=1.0, synchronize=synchronize)
        row = Row(ctx.target.provider, ctx.facts.label, method, source.name, destination.name, nbytes,
                  measured.get("gbps"), measured.get("error", ""))
        if device_memcpy is not None and device_memcpy.directional is not None and direction:
            row.device_memcpy = device_memcpy.directional(direction, nbytes)
        rows.append(row)
        if row.error:
            break  # refused at one size: refused at all
    return rows


def write_json(path: str, rows: list[Row], host: dict[int, float], device_tool: str, skipped: list[str]) -> None:
    """The figures as data, for a run whose console is not kept (the GPU lane brings this back)."""
    figures = {"host_memcpy_gbps": {str(n): g for n, g in host.items()}, "device_memcpy": device_tool, "skipped": skipped,
               "rows": [dict(asdict(row), ratio_to_host=(row.gbps / host[row.nbytes] if row.gbps else None),
                             ratio_to_device=(row.gbps / row.device_memcpy if row.gbps and row.device_memcpy else None)) for row in rows]}
    Path(path).write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
