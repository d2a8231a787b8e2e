"""What an import check works with: the C API, an environment with the EP under test, its
EP device there, the device's importer, and the producers (Vulkan for opaque fds, host memory
for HOST_ALLOCATION); made once per worker.

`ImportRig.for_context(ctx)` raises NotRun (the C path or the producer is missing here) or
NotApplicable (the EP device has no importer), with the reason, before a check does anything.

Handles are held as an application holds them (`Handed`): every import gets a native handle
exported for it alone, and after ImportMemory returns, the rig looks whether the importer took
the fd (closed it) and never touches a taken fd again. Every interop call is announced to the
check (`ctx.calling`), so a crash names it, and every output is checked before use: an OK status
with a NULL handle or tensor raises `NullOutput`, naming the call.
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any

import numpy as np

from conformance.calls import Call
from conformance.errors import KitError
from conformance.findings import NotApplicable, NotRun
from conformance.testbed.interop import capi as C
from conformance.testbed.interop import host, vulkan
from conformance.testbed.interop.handed import Handed
from conformance import proofs

# the handle kinds the checks ask for -> the handle type the descriptor names
HANDLE_KINDS = {"opaque-fd": "vk_memory_opaque_fd", "host-allocation": "host_allocation"}

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


class NullOutput(KitError):
    """An interop call returned OK and left its output NULL: `call` names it, `what` the output."""

    def __init__(self, call: str, what: str):
        super().__init__(f"{call} returned OK and no {what}")
        self.call, self.what = call, what


class NoImporter(NotApplicable):
    """The EP device imports nothing; `error` is the message of the error status it said so
    with, where it did not answer OK with no importer (what onnxruntime's guide asks)."""

    def __init__(self, message: str, error: str = ""):
        super().__init__(message)
        self.error = error


def create_importer(api: C.CApi, device: int, calling: Any = None) -> Any:
    """The EP device's importer; NoImporter where it has none (NULL, or an error status)."""
    importer = ctypes.c_void_p()
    with calling(Call("CreateExternalResourceImporterForDevice")) if calling else contextlib.nullcontext():
        try:
            api.interop("CreateExternalResourceImporterForDevice", ctypes.c_void_p(device), ctypes.byref(importer))
        except C.OrtError as exc:
            raise NoImporter(f"this EP device imports nothing: {exc.message}", exc.message) from None
    if not importer.value:
        raise NoImporter("the EP device gives no external resource importer (it imports nothing)")
    return importer


class Producers:
    """The producers of each handle kind for one EP device, made on first use: Vulkan for opaque
    fds (on the EP device's GPU where it can be told), host memory for HOST_ALLOCATION."""

    def __init__(self, api: C.CApi, env: C.Environment, pci_bus_id: str | None):
        self.api, self.env, self.pci_bus_id = api, env, pci_bus_id
        self._made: dict[str, Any] = {}

    def of(self, kind: str) -> Any:
        """The producer of handle kind `kind`, whatever the importer says of it; NotRun where
        there is none here, NotApplicable where this onnxruntime does not name the handle type."""
        handle_type = HANDLE_KINDS[kind]
        since = C.HANDLE_TYPES_SINCE.get(handle_type)
        if since and not self.env.version_at_least(since):
            raise NotApplicable(f"onnxruntime {self.api.version} has no {handle_type.upper()} handle type (it appeared in {since[0]}.{since[1]})")
        if kind not in self._made:
            try:
                self._made[kind] = vulkan.open_producer(pci_bus_id=self.pci_bus_id) if kind == "opaque-fd" else host.HostProducer()
            except vulkan.NoProducer as exc:
                self._made[kind] = exc
        found = self._made[kind]
        if isinstance(found, Exception):
            raise NotRun(f"no producer of VK_MEMORY_OPAQUE_FD memory here: {found}")
        return found


class ImportRig:
    """One EP device under import: the C API, the C environment, the device there, its importer,
    and (on first use) the producers; helpers that import, make tensors and read or write them
    the way an application would, announcing each interop call to the check it serves (`ctx`)."""

    def __init__(self, api: C.CApi, env: C.Environment, device: int, importer: Any, pci_bus_id: str | None = None, ctx: Any = None):
        self.api, self.env, self.device, self.importer = api, env, device, importer
        self.pci_bus_id = pci_bus_id  # of the EP device's hardware, where onnxruntime says (GPUs)
        self.ctx = ctx  # the check being served: its `calling` announces each interop call
        self.producers = Producers(api, env, pci_bus_id)

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
        found.ctx = ctx
        return found

    @classmethod
    def _make(cls, ctx) -> "ImportRig":
        api, env, device = c_device(ctx)
        try:
            importer = create_importer(api, device, ctx.calling)
        except NoImporter as exc:
            raise NoImporter(f"{ctx.target.provider}: {exc}", exc.error) from None
        hardware = getattr(ctx.device, "device", None)
        return cls(api, env, device, importer, (getattr(hardware, "metadata", None) or {}).get("pci_bus_id"))

    def _calling(self, kind: str, note: str = "") -> Any:
        return self.ctx.calling(Call(kind, note=note)) if self.ctx is not None else contextlib.nullcontext()

    def other_device_importer(self) -> "ImportRig":
        """The importer of another EP device of the same EP (NotApplicable when it has one device)."""
        devices = self.env.devices(self.env.capi.call("EpDevice_EpName", ctypes.c_void_p(self.device)).decode())
        others = [device for device in devices if device != self.device]
        if not others:
            raise NotApplicable("the EP lists one device: no handle from another device to try")
        try:
            importer = create_importer(self.api, others[0], self.ctx.calling if self.ctx else None)
        except NoImporter as exc:
            raise NotApplicable(f"the EP's other device: {exc}") from None
        return ImportRig(self.api, self.env, others[0], importer, ctx=self.ctx)

    # --- the producers --------------------------------------------------------------------

    def source(self, kind: str) -> Any:
        """The producer of handle kind `kind` ('opaque-fd', 'host-allocation') once the importer
        has said it imports it; NotRun or NotApplicable with the reason where it cannot be tried."""
        producer = self.producers.of(kind)
        if not self.can_import(HANDLE_KINDS[kind]):
            raise NotApplicable(f"the importer does not import {HANDLE_KINDS[kind].upper()} (CanImportMemory is false)")
        return producer

    def can_import(self, handle_type: str) -> bool:
        supported = ctypes.c_bool()
        with self._calling("CanImportMemory"):
            self.api.interop("CanImportMemory", self.importer, C.HANDLE_TYPES[handle_type], ctypes.byref(supported))
        return bool(supported.value)

    # --- imports ----------------------------------------------------------------------------

    def import_handed(self, handed: Handed, size: int, offset: int = 0, *, handle_type: str | None = None,
                      version: int = C.ORT_API_VERSION_IN_DESCRIPTORS) -> Any:
        """ImportMemory of a freshly handed handle; afterwards, whether the importer took the fd
        is settled (and told the check as evidence), so that it is never used or closed again."""
        descriptor = C.MemoryDescriptor(version, C.HANDLE_TYPES[handle_type or handed.handle_type], ctypes.c_void_p(handed.native), size, offset)
        try:
            return self.import_memory(descriptor)
        finally:
            ownership = handed.settle()
            if ownership and self.ctx is not None:
                self.ctx.prove(proofs.FD_AFTER_IMPORT, ownership)

    def import_memory(self, descriptor: C.MemoryDescriptor) -> Any:
        handle = ctypes.c_void_p()
        with self._calling("ImportMemory"):
            self.api.interop("ImportMemory", self.importer, ctypes.byref(descriptor), ctypes.byref(handle))
        if not handle.value:
            raise NullOutput("ImportMemory", "handle")
        return handle

    def tensor(self, handle: Any, shape: tuple[int, ...], offset: int = 0, element_type: str = "float32",
               version: int = C.ORT_API_VERSION_IN_DESCRIPTORS) -> Any:
        dims = (ctypes.c_int64 * len(shape))(*shape)
        descriptor = C.TensorDescriptor(version, C.ELEMENT_TYPES[element_type], dims, len(shape), offset)
        value = ctypes.c_void_p()
        if self.ctx is not None:
            self.ctx.attempt(f"CreateTensorFromMemory of {list(shape)} float32 at offset {offset}")
        with self._calling("CreateTensorFromMemory"):
            self.api.interop("CreateTensorFromMemory", self.importer, handle, ctypes.byref(descriptor), ctypes.byref(value))
        if not value.value:
            raise NullOutput("CreateTensorFromMemory", "tensor")
        return value

    def release_tensor(self, value: Any) -> None:
        with self._calling("ReleaseValue", "imported tensor"):
            self.api.call("ReleaseValue", value)

    def release_handle(self, handle: Any) -> None:
        with self._calling("ReleaseExternalMemoryHandle"):
            self.api.interop("ReleaseExternalMemoryHandle", handle)

    def release_importer(self) -> None:
        with self._calling("ReleaseExternalResourceImporter"):
            self.api.interop("ReleaseExternalResourceImporter", self.importer)

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
            with self._calling("CopyTensors", "imported > cpu"):
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
            with self._calling("CopyTensors", "cpu > imported"):
                C.copy_tensors(self.api, self.env, [source], [value])
        finally:
            self.api.call("ReleaseValue", source)


def pattern(count: int, seed: int) -> np.ndarray:
    """float32 values the producer writes: negatives and positives, distinct per seed."""
    values = (np.arange(count, dtype=np.float32) - count / 2) * np.float32(0.25) + np.float32(seed)
    return values.astype(np.float32)

