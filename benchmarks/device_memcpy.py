"""The device's own memcpy, measured with PyTorch or CuPy: device to device on one device, and
between pinned host memory and the device (host to device, device to host).

Neither is a dependency of the kit: on a machine with an NVIDIA GPU, install one of them beside
onnxruntime-gpu to get the CUDA EP's device-to-device figures as a ratio to what the device
itself reaches. Without them the ratio is skipped with the reason.
"""

from __future__ import annotations

from typing import Any, Callable

from conformance.testbed import bandwidth


DIRECTIONS = ("d2d", "h2d", "d2h")


class DeviceMemcpy:
    """`gbps(nbytes)` of the device's device-to-device memcpy, `directional(direction, nbytes)`
    of any of DIRECTIONS (host memory pinned, as the fastest host copy a device reaches);
    `synchronize` waits for the device; `reason` says why neither tool is available (then all
    three are None)."""

    def __init__(self):
        self.gbps: Callable[[int], float] | None = None
        self.directional: Callable[[str, int], float] | None = None
        self.synchronize: Callable[[], Any] | None = None
        self.reason = ""
        self.tool = ""
        reasons = []
        for attempt in (self._torch, self._cupy):
            why = attempt()
            if not why:
                self.directional = _remembered(self.directional)
                return
            reasons.append(why)
        self.reason = "; ".join(reasons)

    def _torch(self) -> str:
        try:
            import torch
        except ImportError:
            return "PyTorch is not installed"
        if not torch.cuda.is_available():
            return "PyTorch sees no CUDA device"

        def buffer(where: str, nbytes: int):
            if where == "h":
                return torch.ones(nbytes, dtype=torch.uint8).pin_memory()
            return torch.ones(nbytes, dtype=torch.uint8, device="cuda")

        def directional(direction: str, nbytes: int) -> float:
            source, destination = buffer(direction[0], nbytes), buffer(direction[2], nbytes)
            return bandwidth.gbps(nbytes, bandwidth.best_seconds(lambda: (destination.copy_(source, non_blocking=True), torch.cuda.synchronize())))

        self.directional, self.synchronize, self.tool = directional, torch.cuda.synchronize, f"PyTorch {torch.__version__}"
        self.gbps = lambda nbytes: directional("d2d", nbytes)
        return ""

    def _cupy(self) -> str:
        try:
            import cupy
        except ImportError:
            return "CuPy is not installed"
        try:
            cupy.cuda.runtime.getDeviceCount()
        except cupy.cuda.runtime.CUDARuntimeError as exc:
            return f"CuPy sees no CUDA device ({exc})"

        def synchronize() -> None:
            cupy.cuda.Device().synchronize()

        def buffer(where: str, nbytes: int):
            if where == "h":  # pinned host memory, seen by the device; the pointer keeps its owner alive
                memory = cupy.cuda.alloc_pinned_memory(nbytes)
                return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(memory.ptr, nbytes, memory), 0)
            return cupy.ones(nbytes, dtype=cupy.uint8).data

        def directional(direction: str, nbytes: int) -> float:
            source, destination = buffer(direction[0], nbytes), buffer(direction[2], nbytes)
            return bandwidth.gbps(nbytes, bandwidth.best_seconds(lambda: (destination.copy_from(source, nbytes), synchronize())))

        self.directional, self.synchronize, self.tool = directional, synchronize, f"CuPy {cupy.__version__}"
        self.gbps = lambda nbytes: directional("d2d", nbytes)
        return ""


def _remembered(measure):
    """`measure` measured once per (direction, size): every method and pair of a run compares
    with the same figure, and the device's time is spent on the EP's copies."""
    figures: dict[tuple[str, int], float] = {}

    def directional(direction: str, nbytes: int) -> float:
        if (direction, nbytes) not in figures:
            figures[direction, nbytes] = measure(direction, nbytes)
        return figures[direction, nbytes]

    return directional
