"""The EP device's DEFAULT allocator as the C API hands it to an application: tensors allocated
from it and released, and what the allocator reports of itself (AllocatorGetStats: InUse,
NumAllocs, ... as key-value pairs, where it reports anything).

The allocator is the C environment's shared allocator for the device's DEFAULT memory info
(GetSharedAllocator), made by the EP's factory; where the device advertises no DEFAULT memory
(its DEFAULT memory is plain CPU memory), onnxruntime's own CPU allocator
(GetAllocatorWithDefaultOptions). Both stay the environment's: only the tensors are released.
"""

from __future__ import annotations

import ctypes
from typing import Any

from conformance.testbed.interop import capi as C

_ptr = ctypes.c_void_p
FLOAT32 = C.ELEMENT_TYPES["float32"]


class DefaultAllocator:
    def __init__(self, api: C.CApi, env: C.Environment, device: int):
        self.api, self.env, self.device = api, env, device
        # what the device advertises (None: no DEFAULT memory info, plain CPU memory)
        self.memory = C.ep_device_memory(api, device, "default")
        self.allocator = _ptr()
        info = api.call("EpDevice_MemoryInfo", _ptr(device), 0)
        if info:
            api.call("GetSharedAllocator", env.env, _ptr(info), ctypes.byref(self.allocator))
        else:
            api.call("GetAllocatorWithDefaultOptions", ctypes.byref(self.allocator))
        if not self.allocator.value:
            raise C.Unavailable("the C environment gives no allocator for the EP device's DEFAULT memory")
        self.stats_refusal = ""  # why it reports nothing: AllocatorGetStats' error, or no GetStats to call

    @property
    def cpu_readable(self) -> bool:
        """Whether the CPU reads and writes the allocator's memory directly (plain or CPU-typed memory)."""
        return self.memory is None or self.memory["device_type"] == "cpu"

    @property
    def label(self) -> str:
        if self.memory is None:
            return "plain CPU memory (onnxruntime's CPU allocator: the EP device advertises no DEFAULT memory)"
        return f"{self.memory['name']} ({self.memory['device_type']}, {self.memory['memory_type']})"

    def tensor(self, count: int) -> _ptr:
        """A new float32 tensor of `count` elements from the allocator."""
        value = _ptr()
        self.api.call("CreateTensorAsOrtValue", self.allocator, (ctypes.c_int64 * 1)(count), 1, FLOAT32, ctypes.byref(value))
        return value

    def release(self, value: Any) -> None:
        self.api.call("ReleaseValue", value)

    def stats(self) -> dict[str, str]:
        """What the allocator reports of itself ({} where it reports nothing, refuses, or
        implements no GetStats: why is kept in `stats_refusal`)."""
        try:
            found = C.allocator_stats(self.api, self.allocator)
        except C.OrtError as exc:
            self.stats_refusal = exc.message
            return {}
        if found is None:
            self.stats_refusal = C.NO_GET_STATS
            return {}
        return found

    def stat(self, key: str) -> int | None:
        """One figure of the statistics as a number (None where it is absent or not a number)."""
        value = self.stats().get(key, "")
        return int(value) if value.isdigit() else None
