"""What an import check works with: the C API, an environment with the EP under test, its
EP device there, the device's importer, and a Vulkan producer; made once per worker.

`ImportRig.for_context(ctx)` raises NotRun (the C path or the producer is missing here) or
NotApplicable (the EP device has no importer), with the reason, before a check does anything.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

from conformance.calls import Call
from conformance.findings import NotApplicable, NotRun
from conformance.target.interop import capi as C
from conformance.target.interop import vulkan

_RIGS: dict[tuple[Any, ...], "ImportRig | Exception"] = {}
# onnxruntime has one OrtEnv per process (CreateEnv again returns it): one C environment per
# worker, with the EP library registered once, shared by the rigs of all its devices
_ENVIRONMENTS: dict[tuple[Any, ...], C.Environment] = {}


def c_device(ctx) -> tuple[C.CApi, C.Environment, int]:
    """The C API, the worker's C environment with the EP under test, and its EP device there
    (the same index as the context's); NotRun where the C path cannot run."""
    try:
        api = C.CApi.load(ctx.ort)
    except C.Unavailable as exc:
        raise NotRun(f"the C path cannot run here: {exc}") from None
    target = ctx.target
    key = (target.library, target.registration)
    if key not in _ENVIRONMENTS:
        _ENVIRONMENTS[key] = C.Environment(api, target.registration if target.library else None, target.library)
    env = _ENVIRONMENTS[key]
    devices = env.devices(target.provider)
    if ctx.device_index >= len(devices):
        raise NotRun(f"the C library lists {len(devices)} {target.provider} devices; the kit tests device {ctx.device_index}")
    return api, env, devices[ctx.device_index]


class ImportRig:
    """One EP device under import: the C API, the C environment, the device there, its importer,
    and (on first use) the Vulkan producer; helpers that import, make tensors and read or write
    them the way an application would."""

    def __init__(self, api: C.CApi, env: C.Environment, device: int, importer: Any, pci_bus_id: str | None = None):
        self.api, self.env, self.device, self.importer = api, env, device, importer
        self.pci_bus_id = pci_bus_id  # of the EP device's hardware, where onnxruntime says (GPUs)
        self._producer: vulkan.Producer | Exception | None = None

    @classmethod
    def for_context(cls, ctx) -> "ImportRig":
        target = ctx.target
        key = (target.provider, target.library, target.registration, ctx.device_index)
        if key not in _RIGS:
            try:
                _RIGS[key] = cls._make(ctx)
            except (NotRun, NotApplicable) as exc:
                _RIGS[key] = exc
        found = _RIGS[key]
        if isinstance(found, Exception):
            raise found
        return found

    @classmethod
    def _make(cls, ctx) -> "ImportRig":
        api, env, device = c_device(ctx)
        importer = ctypes.c_void_p()
        with ctx.calling(Call("CreateExternalResourceImporterForDevice")):
            api.interop("CreateExternalResourceImporterForDevice", ctypes.c_void_p(device), ctypes.byref(importer))
        if not importer.value:
            raise NotApplicable(f"{ctx.target.provider} gives no external resource importer for this device (it imports nothing)")
        hardware = getattr(ctx.device, "device", None)
        return cls(api, env, device, importer, (getattr(hardware, "metadata", None) or {}).get("pci_bus_id"))

    def other_device_importer(self) -> "ImportRig":
        """The importer of another EP device of the same EP (NotApplicable when it has one device)."""
        devices = self.env.devices(self.env.capi.call("EpDevice_EpName", ctypes.c_void_p(self.device)).decode())
        others = [device for device in devices if device != self.device]
        if not others:
            raise NotApplicable("the EP lists one device: no handle from another device to try")
        importer = ctypes.c_void_p()
        self.api.interop("CreateExternalResourceImporterForDevice", ctypes.c_void_p(others[0]), ctypes.byref(importer))
        if not importer.value:
            raise NotApplicable("the EP's other device gives no importer")
        return ImportRig(self.api, self.env, others[0], importer)

    # --- the producer ---------------------------------------------------------------------

    def producer(self) -> vulkan.Producer:
        if self._producer is None:
            try:
                self._producer = vulkan.open_producer(pci_bus_id=self.pci_bus_id)
            except vulkan.NoProducer as exc:
                self._producer = exc
        if isinstance(self._producer, Exception):
            raise NotRun(f"no producer of VK_MEMORY_OPAQUE_FD memory here: {self._producer}")
        return self._producer

    def can_import(self, handle_type: str) -> bool:
        supported = ctypes.c_bool()
        self.api.interop("CanImportMemory", self.importer, C.HANDLE_TYPES[handle_type], ctypes.byref(supported))
        return bool(supported.value)

    def require_opaque_fd(self) -> vulkan.Producer:
        producer = self.producer()
        if not self.can_import("vk_memory_opaque_fd"):
            raise NotApplicable("the importer does not import VK_MEMORY_OPAQUE_FD (CanImportMemory is false)")
        return producer

    # --- imports ----------------------------------------------------------------------------

    def descriptor(self, fd: int, size: int, offset: int = 0, handle_type: str = "vk_memory_opaque_fd",
                   version: int = C.ORT_API_VERSION_IN_DESCRIPTORS) -> C.MemoryDescriptor:
        return C.MemoryDescriptor(version, C.HANDLE_TYPES[handle_type], ctypes.c_void_p(fd), size, offset)

    def import_memory(self, descriptor: C.MemoryDescriptor) -> Any:
        handle = ctypes.c_void_p()
        self.api.interop("ImportMemory", self.importer, ctypes.byref(descriptor), ctypes.byref(handle))
        return handle

    def tensor(self, handle: Any, shape: tuple[int, ...], offset: int = 0, element_type: str = "float32",
               version: int = C.ORT_API_VERSION_IN_DESCRIPTORS) -> Any:
        dims = (ctypes.c_int64 * len(shape))(*shape)
        descriptor = C.TensorDescriptor(version, C.ELEMENT_TYPES[element_type], dims, len(shape), offset)
        value = ctypes.c_void_p()
        self.api.interop("CreateTensorFromMemory", self.importer, handle, ctypes.byref(descriptor), ctypes.byref(value))
        return value

    def release_tensor(self, value: Any) -> None:
        self.api.call("ReleaseValue", value)

    def release_handle(self, handle: Any) -> None:
        self.api.interop("ReleaseExternalMemoryHandle", handle)

    def memory(self, value: Any) -> dict[str, Any]:
        return C.memory_of(self.api, value)

    def cpu_readable(self, value: Any) -> bool:
        facts = self.memory(value)
        return facts["device_type"] == "cpu" or facts["memory_type"] == "host_accessible"

    def read(self, value: Any, size: int) -> bytes:
        """The tensor's bytes as the CPU sees them: directly where its memory is CPU-readable,
        else through CopyTensors into a sentinel-filled CPU buffer."""
        if self.cpu_readable(value):
            return ctypes.string_at(C.data_address(self.api, value), size)
        landing = (ctypes.c_uint8 * size)(*([0xA5] * size))
        destination = C.cpu_tensor(self.api, landing, (size,), C.ELEMENT_TYPES["uint8"])
        try:
            C.copy_tensors(self.api, self.env, [value], [destination])
        finally:
            self.api.call("ReleaseValue", destination)
        return bytes(landing)

    def write(self, value: Any, data: bytes, *, direct: bool) -> None:
        """Writes `data` into the tensor: through its data pointer (`direct`) or with CopyTensors."""
        if direct:
            ctypes.memmove(C.data_address(self.api, value), data, len(data))
            return
        source_buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        source = C.cpu_tensor(self.api, source_buffer, (len(data),), C.ELEMENT_TYPES["uint8"])
        try:
            C.copy_tensors(self.api, self.env, [source], [value])
        finally:
            self.api.call("ReleaseValue", source)


def pattern(count: int, seed: int) -> np.ndarray:
    """float32 values the producer writes: negatives and positives, distinct per seed."""
    values = (np.arange(count, dtype=np.float32) - count / 2) * np.float32(0.25) + np.float32(seed)
    return values.astype(np.float32)


def close_fd(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
