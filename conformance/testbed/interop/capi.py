"""onnxruntime's C API, driven through ctypes on the `libonnxruntime.so` the installed wheel ships.

The interop API (`OrtInteropApi`: importers, `ImportMemory`, `CreateTensorFromMemory`) exists
only in C. ctypes rather than a small C helper, because `pip install` of the kit must need no
compiler and no onnxruntime headers: the function tables are reached by slot index, and the
indices come from `slots.py`, generated from the >= 1.24 header (`conformance.testbed.interop.headers`)
and compared with it by a test. The C API's tables only grow at the end, so an index read from
the newest header holds in every version that has the function; the kit asks the runtime for the
lowest API version that has every function it calls (`API_VERSION`).

The wheel's C library is a second copy of onnxruntime in the process, beside the Python
extension's statically linked one: it has its own environment, EP devices and registered
libraries (a plugin EP library is registered in it again; the two copies then share that
library's state). Only host memory crosses between the copies, by pointer. Checks call this from
the ordinary worker, so a crash or a hang in here is that check's `crash` or `timeout`.

Where the library is missing, or too old, `CApi.load` raises `Unavailable` with the reason.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

from conformance.testbed.interop import slots
from conformance.errors import KitError

API_VERSION = 24  # GetInteropApi appeared in 1.24; nothing else called here is newer
ORT_API_VERSION_IN_DESCRIPTORS = 24  # `version` of the descriptors the kit fills

# ONNXTensorElementDataType, OrtDeviceMemoryType, OrtMemoryInfoDeviceType, OrtExternalMemoryHandleType
ELEMENT_TYPES = {"float32": 1, "uint8": 2, "int8": 3, "int32": 6, "int64": 7, "float64": 11}
DEVICE_MEMORY_TYPES = {0: "default", 5: "host_accessible"}
DEVICE_TYPES = {0: "cpu", 1: "gpu", 2: "fpga", 3: "npu"}
HANDLE_TYPES = {"d3d12_resource": 0, "d3d12_heap": 1, "vk_memory_win32": 2, "vk_memory_opaque_fd": 3, "host_allocation": 4}
# handle types younger than the interop API: the onnxruntime version that named them
HANDLE_TYPES_SINCE = {"host_allocation": (1, 30)}

_ptr, _size = ctypes.c_void_p, ctypes.c_size_t
_Status = ctypes.c_void_p


class Unavailable(KitError):
    """The C path cannot run here; the message says why."""


class OrtError(KitError, RuntimeError):
    """An OrtStatus that was not OK: its code and message."""

    def __init__(self, call: str, code: int, message: str):
        super().__init__(f"{call}: {message}")
        self.call, self.code, self.message = call, code, message


class MemoryDescriptor(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("handle_type", ctypes.c_int), ("native_handle", _ptr),
                ("size_bytes", _size), ("offset_bytes", _size)]


class TensorDescriptor(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("element_type", ctypes.c_int), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("rank", _size), ("offset_bytes", _size)]


class ExternalMemoryHandle(ctypes.Structure):
    """The head every EP's imported handle starts with (onnxruntime_ep_c_api.h, OrtExternalMemoryHandle,
    1.24+): a public struct the EP fills, which OrtInteropApi::ImportMemory hands to the application
    as it is (onnxruntime 1.32's ReleaseExternalMemoryHandle calls its `Release` and nothing else)."""
    _fields_ = [("version", ctypes.c_uint32), ("ep_device", _ptr), ("descriptor", MemoryDescriptor), ("Release", _ptr)]


class _ApiBase(ctypes.Structure):
    _fields_ = [("GetApi", ctypes.CFUNCTYPE(_ptr, ctypes.c_uint32)), ("GetVersionString", ctypes.CFUNCTYPE(ctypes.c_char_p))]


def wheel_library(ort_module: Any) -> Path:
    """The C library inside the installed onnxruntime package."""
    capi = Path(ort_module.__file__).parent / "capi"
    found = sorted(capi.glob("libonnxruntime.so*"))
    if not found:
        raise Unavailable(f"the onnxruntime package at {capi.parent} ships no libonnxruntime.so (only its Python extension)")
    return found[0]


class CApi:
    """The C API of one libonnxruntime.so: `call(name, ...)` calls an OrtApi function by name
    (status-returning ones raise OrtError), `interop(name, ...)` an OrtInteropApi one."""

    # (restype, argtypes) of the functions the kit calls; a status-returning function has restype _Status
    SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
        "GetErrorCode": (ctypes.c_int, [_Status]),
        "GetErrorMessage": (ctypes.c_char_p, [_Status]),
        "ReleaseStatus": (None, [_Status]),
        "CreateEnv": (_Status, [ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(_ptr)]),
        "ReleaseEnv": (None, [_ptr]),
        "RegisterExecutionProviderLibrary": (_Status, [_ptr, ctypes.c_char_p, ctypes.c_char_p]),
        "UnregisterExecutionProviderLibrary": (_Status, [_ptr, ctypes.c_char_p]),
        "GetEpDevices": (_Status, [_ptr, ctypes.POINTER(ctypes.POINTER(_ptr)), ctypes.POINTER(_size)]),
        "EpDevice_EpName": (ctypes.c_char_p, [_ptr]),
        "EpDevice_MemoryInfo": (_size, [_ptr, ctypes.c_int]),  # a pointer, read as a number: _ptr is read as a status
        "GetInteropApi": (_ptr, []),
        "CreateCpuMemoryInfo": (_Status, [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_ptr)]),
        "ReleaseMemoryInfo": (None, [_ptr]),
        "CreateTensorWithDataAsOrtValue": (_Status, [_ptr, _ptr, _size, ctypes.POINTER(ctypes.c_int64), _size, ctypes.c_int, ctypes.POINTER(_ptr)]),
        "ReleaseValue": (None, [_ptr]),
        "GetTensorMutableData": (_Status, [_ptr, ctypes.POINTER(_ptr)]),
        "GetTensorSizeInBytes": (_Status, [_ptr, ctypes.POINTER(_size)]),
        "AllocatorGetStats": (_Status, [_ptr, ctypes.POINTER(_ptr)]),
        "GetKeyValuePairs": (None, [_ptr, ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)), ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)),
                                    ctypes.POINTER(_size)]),
        "ReleaseKeyValuePairs": (None, [_ptr]),
        "GetTensorMemoryInfo": (_Status, [_ptr, ctypes.POINTER(_ptr)]),
        "MemoryInfoGetName": (_Status, [_ptr, ctypes.POINTER(ctypes.c_char_p)]),
        "MemoryInfoGetDeviceMemType": (ctypes.c_int, [_ptr]),
        "MemoryInfoGetDeviceType": (None, [_ptr, ctypes.POINTER(ctypes.c_int)]),
        "MemoryInfoGetId": (_Status, [_ptr, ctypes.POINTER(ctypes.c_int)]),
        "MemoryInfoGetVendorId": (ctypes.c_uint32, [_ptr]),
        "CopyTensors": (_Status, [_ptr, ctypes.POINTER(_ptr), ctypes.POINTER(_ptr), _ptr, _size]),
        "GetSharedAllocator": (_Status, [_ptr, _ptr, ctypes.POINTER(_ptr)]),
        "CreateTensorAsOrtValue": (_Status, [_ptr, ctypes.POINTER(ctypes.c_int64), _size, ctypes.c_int, ctypes.POINTER(_ptr)]),
        "GetAllocatorWithDefaultOptions": (_Status, [ctypes.POINTER(_ptr)]),
        "CreateSessionOptions": (_Status, [ctypes.POINTER(_ptr)]),
        "ReleaseSessionOptions": (None, [_ptr]),
        "SetSessionGraphOptimizationLevel": (_Status, [_ptr, ctypes.c_int]),
        "SessionOptionsAppendExecutionProvider_V2": (_Status, [_ptr, _ptr, ctypes.POINTER(_ptr), _size, ctypes.POINTER(ctypes.c_char_p),
                                                               ctypes.POINTER(ctypes.c_char_p), _size]),
        "CreateSessionFromArray": (_Status, [_ptr, ctypes.c_char_p, _size, _ptr, ctypes.POINTER(_ptr)]),
        "ReleaseSession": (None, [_ptr]),
        "Run": (_Status, [_ptr, _ptr, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(_ptr), _size, ctypes.POINTER(ctypes.c_char_p), _size,
                          ctypes.POINTER(_ptr)]),
    }
    INTEROP_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
        "CreateExternalResourceImporterForDevice": (_Status, [_ptr, ctypes.POINTER(_ptr)]),
        "ReleaseExternalResourceImporter": (None, [_ptr]),
        "CanImportMemory": (_Status, [_ptr, ctypes.c_int, ctypes.POINTER(ctypes.c_bool)]),
        "ImportMemory": (_Status, [_ptr, ctypes.POINTER(MemoryDescriptor), ctypes.POINTER(_ptr)]),
        "ReleaseExternalMemoryHandle": (None, [_ptr]),
        "CreateTensorFromMemory": (_Status, [_ptr, _ptr, ctypes.POINTER(TensorDescriptor), ctypes.POINTER(_ptr)]),
    }

    def __init__(self, library: ctypes.CDLL, path: Path, api: int, version: str):
        self.library, self.path, self.version = library, path, version
        self._api = api
        self._functions: dict[tuple[int, str], Any] = {}
        table = self._function("GetInteropApi", slots.ORT_API, api, self.SIGNATURES)()
        if not table:
            raise Unavailable(f"{path.name} {version}: GetInteropApi() returned NULL")
        self._interop = table

    @classmethod
    def load(cls, ort_module: Any) -> "CApi":
        path = wheel_library(ort_module)
        try:
            library = ctypes.CDLL(str(path))
        except OSError as exc:
            raise Unavailable(f"{path.name} cannot be loaded: {exc}") from None
        try:
            get_base = library.OrtGetApiBase
        except AttributeError:
            raise Unavailable(f"{path.name} exports no OrtGetApiBase") from None
        get_base.restype = ctypes.POINTER(_ApiBase)
        base = get_base().contents
        version = base.GetVersionString().decode()
        api = base.GetApi(API_VERSION)
        if not api:
            raise Unavailable(f"{path.name} (onnxruntime {version}) does not provide C API version {API_VERSION} (the interop API needs >= 1.24)")
        return cls(library, path, api, version)

    def _function(self, name: str, table: dict[str, tuple[int, int]], address: int, signatures: dict) -> Any:
        key = (address, name)
        if key not in self._functions:
            index, since = table[name]
            if since > API_VERSION:
                raise Unavailable(f"{name} appeared in 1.{since}; the kit asks for C API {API_VERSION}")
            pointer = ctypes.cast(address, ctypes.POINTER(_ptr))[index]
            restype, argtypes = signatures[name]
            self._functions[key] = ctypes.CFUNCTYPE(restype, *argtypes)(pointer)
        return self._functions[key]

    def _checked(self, name: str, status: Any) -> None:
        if status:
            code = self._function("GetErrorCode", slots.ORT_API, self._api, self.SIGNATURES)(status)
            message = self._function("GetErrorMessage", slots.ORT_API, self._api, self.SIGNATURES)(status).decode(errors="replace")
            self._function("ReleaseStatus", slots.ORT_API, self._api, self.SIGNATURES)(status)
            raise OrtError(name, code, message)

    def call(self, name: str, *args) -> Any:
        function = self._function(name, slots.ORT_API, self._api, self.SIGNATURES)
        result = function(*args)
        if self.SIGNATURES[name][0] is _Status:
            self._checked(name, result)
            return None
        return result

    def function(self, name: str) -> Any:
        """The ctypes function of OrtApi `name`, called as it is: a status-returning one returns
        its status, for `check`. For a loop that times the native call alone."""
        return self._function(name, slots.ORT_API, self._api, self.SIGNATURES)

    def check(self, name: str, status: Any) -> None:
        """Raises OrtError for a status `function(name)` returned that was not OK (and releases it)."""
        self._checked(name, status)

    def interop(self, name: str, *args) -> None:
        function = self._function(name, slots.ORT_INTEROP_API, self._interop, self.INTEROP_SIGNATURES)
        result = function(*args)
        if self.INTEROP_SIGNATURES[name][0] is _Status:
            self._checked(name, result)


class Environment:
    """An OrtEnv of the C library with the EP's library registered in it (when it has one), and
    its EP devices."""

    def __init__(self, capi: CApi, registration: str | None = None, library: str | None = None):
        self.capi = capi
        env = _ptr()
        capi.call("CreateEnv", 3, b"ort-ep-conformance", ctypes.byref(env))
        self.env = env
        self.registration = registration
        if registration and library:
            self.register(registration, library)

    def register(self, registration: str, library: str) -> None:
        """Registers `library` under `registration`. A relative path would be taken relative to
        the C library's folder, so it is made absolute; a /proc/self/fd/N path (a copy of the
        library in a memfd) is kept as it is, since resolving it names no file."""
        path = library if library.startswith("/proc/self/fd/") else str(Path(library).resolve())
        self.capi.call("RegisterExecutionProviderLibrary", self.env, registration.encode(), path.encode())

    def devices(self, ep_name: str) -> list[int]:
        array = ctypes.POINTER(_ptr)()
        count = _size()
        self.capi.call("GetEpDevices", self.env, ctypes.byref(array), ctypes.byref(count))
        return [array[i] for i in range(count.value) if self.capi.call("EpDevice_EpName", _ptr(array[i])).decode() == ep_name]

    def version_at_least(self, version: tuple[int, int]) -> bool:
        return tuple(int(part) for part in self.capi.version.split(".")[:2]) >= version

    def unregister(self) -> None:
        if self.registration:
            self.capi.call("UnregisterExecutionProviderLibrary", self.env, self.registration.encode())
            self.registration = None

    def close(self) -> None:
        self.unregister()
        self.capi.call("ReleaseEnv", self.env)


def memory_of(capi: CApi, value: Any) -> dict[str, Any]:
    """What an OrtValue's memory info says: name, device type, device memory type."""
    info = _ptr()
    capi.call("GetTensorMemoryInfo", value, ctypes.byref(info))
    name = ctypes.c_char_p()
    capi.call("MemoryInfoGetName", info, ctypes.byref(name))
    device_type = ctypes.c_int(-1)
    capi.call("MemoryInfoGetDeviceType", info, ctypes.byref(device_type))
    memory_type = capi.call("MemoryInfoGetDeviceMemType", info)
    return {"name": (name.value or b"").decode(), "device_type": DEVICE_TYPES.get(device_type.value, str(device_type.value)),
            "memory_type": DEVICE_MEMORY_TYPES.get(memory_type, str(memory_type))}


def ep_device_memory(capi: CApi, device: int, kind: str) -> dict[str, Any] | None:
    """What the EP device's memory info of `kind` ('default', 'host_accessible') says through
    the C API: name, device type, memory type, vendor and device id; None where it has none."""
    code = {v: k for k, v in DEVICE_MEMORY_TYPES.items()}[kind]
    info = capi.call("EpDevice_MemoryInfo", _ptr(device), code)
    if not info:
        return None
    info = _ptr(info)
    name = ctypes.c_char_p()
    capi.call("MemoryInfoGetName", info, ctypes.byref(name))
    device_type, device_id = ctypes.c_int(-1), ctypes.c_int(-1)
    capi.call("MemoryInfoGetDeviceType", info, ctypes.byref(device_type))
    capi.call("MemoryInfoGetId", info, ctypes.byref(device_id))
    memory_type = capi.call("MemoryInfoGetDeviceMemType", info)
    return {"name": (name.value or b"").decode(), "device_type": DEVICE_TYPES.get(device_type.value, str(device_type.value)),
            "memory_type": DEVICE_MEMORY_TYPES.get(memory_type, str(memory_type)), "vendor_id": int(capi.call("MemoryInfoGetVendorId", info)),
            "device_id": device_id.value}


def data_address(capi: CApi, value: Any) -> int:
    address = _ptr()
    capi.call("GetTensorMutableData", value, ctypes.byref(address))
    return address.value or 0


def cpu_tensor(capi: CApi, buffer: Any, shape: tuple[int, ...], element_type: int) -> ctypes.c_void_p:
    """An OrtValue over `buffer` (a ctypes array), CPU memory, no copy."""
    return cpu_tensor_at(capi, ctypes.addressof(buffer), ctypes.sizeof(buffer), shape, element_type)


def cpu_tensor_at(capi: CApi, address: int, size: int, shape: tuple[int, ...], element_type: int) -> ctypes.c_void_p:
    """An OrtValue over the `size` bytes at `address` (memory the caller keeps alive), CPU memory, no copy."""
    info = _ptr()
    capi.call("CreateCpuMemoryInfo", 0, 0, ctypes.byref(info))  # OrtArenaAllocator, OrtMemTypeDefault
    dims = (ctypes.c_int64 * len(shape))(*shape)
    value = _ptr()
    try:
        capi.call("CreateTensorWithDataAsOrtValue", info, _ptr(address), size, dims, len(shape), element_type, ctypes.byref(value))
    finally:
        capi.call("ReleaseMemoryInfo", info)
    return value


def device_tensor(capi: CApi, env: Environment, device: int, kind: str, shape: tuple[int, ...], element_type: int) -> ctypes.c_void_p:
    """A new OrtValue in the EP device's memory of `kind`, from the environment's shared allocator
    for it: onnxruntime makes one for each memory info of every EP device (GetSharedAllocator's
    documentation), and it stays the environment's, so only the value is released."""
    code = {v: k for k, v in DEVICE_MEMORY_TYPES.items()}[kind]
    info = capi.call("EpDevice_MemoryInfo", _ptr(device), code)
    if not info:
        raise Unavailable(f"the EP device has no {kind} memory info")
    allocator = _ptr()
    capi.call("GetSharedAllocator", env.env, _ptr(info), ctypes.byref(allocator))
    if not allocator.value:
        raise Unavailable(f"the environment has no shared allocator for the EP device's {kind} memory")
    dims = (ctypes.c_int64 * len(shape))(*shape)
    value = _ptr()
    capi.call("CreateTensorAsOrtValue", allocator, dims, len(shape), element_type, ctypes.byref(value))
    return value


class _AllocatorHead(ctypes.Structure):
    """The first members of OrtAllocator, laid out as onnxruntime_c_api.h declares the struct (public:
    an EP's allocator is one): `version`, then the function pointers up to `GetStats`."""
    _fields_ = [("version", ctypes.c_uint32), ("Alloc", _ptr), ("Free", _ptr), ("Info", _ptr), ("Reserve", _ptr), ("GetStats", _ptr)]


GET_STATS_SINCE = 23  # OrtAllocator::GetStats is a member of allocators of this version and newer
NO_GET_STATS = ("its OrtAllocator::GetStats is NULL, which onnxruntime_c_api.h allows ('Implementation of this function is optional'); "
                "not called, since onnxruntime 1.32's AllocatorGetStats calls through it unchecked (a jump to address 0)")


def allocator_version(allocator: Any) -> int:
    """The `version` member of the OrtAllocator at `allocator` (0 for NULL): the API version its
    struct was built against, which says how many members it has."""
    address = allocator.value if isinstance(allocator, ctypes.c_void_p) else allocator
    return int(_AllocatorHead.from_address(address).version) if address else 0


def implements_stats(allocator: Any) -> bool:
    """Whether the OrtAllocator at `allocator` has a GetStats of its own. Read from the struct
    itself, member by member (`version` first: an allocator older than GET_STATS_SINCE may end
    before the member), because AllocatorGetStats is not safe to ask: in onnxruntime 1.32 it is a
    bare jump through the member, so a NULL one, which the header allows, kills the process."""
    address = allocator.value if isinstance(allocator, ctypes.c_void_p) else allocator
    if not address:
        return False
    head = _AllocatorHead.from_address(address)
    return head.version >= GET_STATS_SINCE and bool(head.GetStats)


def allocator_stats(capi: CApi, allocator: Any) -> dict[str, str] | None:
    """What AllocatorGetStats says of the allocator, as text pairs ({} where it says nothing);
    None where the allocator implements no GetStats (then AllocatorGetStats is not called: see
    `implements_stats`). OrtError where it refuses."""
    if not implements_stats(allocator):
        return None
    pairs = _ptr()
    capi.call("AllocatorGetStats", allocator, ctypes.byref(pairs))
    if not pairs.value:
        return {}
    keys, values, count = ctypes.POINTER(ctypes.c_char_p)(), ctypes.POINTER(ctypes.c_char_p)(), _size()
    try:
        capi.call("GetKeyValuePairs", pairs, ctypes.byref(keys), ctypes.byref(values), ctypes.byref(count))
        return {(keys[i] or b"").decode(errors="replace"): (values[i] or b"").decode(errors="replace") for i in range(count.value)}
    finally:
        capi.call("ReleaseKeyValuePairs", pairs)


def copy_tensors(capi: CApi, env: Environment, sources: list, destinations: list) -> None:
    count = len(sources)
    capi.call("CopyTensors", env.env, (_ptr * count)(*sources), (_ptr * count)(*destinations), None, count)
