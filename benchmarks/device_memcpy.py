"""The device's own memcpy (device to device, same device), measured with PyTorch or CuPy.

Neither is a dependency of the kit: on a machine with an NVIDIA GPU, install one of them beside
onnxruntime-gpu to get the CUDA EP's device-to-device figures as a ratio to what the device
itself reaches. Without them the ratio is skipped with the reason.
"""

from __future__ import annotations

from typing import Any, Callable

from conformance.target import bandwidth


class DeviceMemcpy:
    """`gbps(nbytes)` of the device's memcpy; `synchronize` waits for the device; `reason` says
    why neither is available (then both are None)."""

    def __init__(self):
        self.gbps: Callable[[int], float] | None = None
        self.synchronize: Callable[[], Any] | None = None
        self.reason = ""
        self.tool = ""
        reasons = []
        for attempt in (self._torch, self._cupy):
            why = attempt()
            if not why:
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

        def measure(nbytes: int) -> float:
            source = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
            destination = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            return bandwidth.gbps(nbytes, bandwidth.best_seconds(lambda: (destination.copy_(source), torch.cuda.synchronize())))

        self.gbps, self.synchronize, self.tool = measure, torch.cuda.synchronize, f"PyTorch {torch.__version__}"
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

        def measure(nbytes: int) -> float:
            source = cupy.ones(nbytes, dtype=cupy.uint8)
            destination = cupy.empty(nbytes, dtype=cupy.uint8)
            return bandwidth.gbps(nbytes, bandwidth.best_seconds(lambda: (destination.__setitem__(Ellipsis, source), synchronize())))

        self.gbps, self.synchronize, self.tool = measure, synchronize, f"CuPy {cupy.__version__}"
        return ""
