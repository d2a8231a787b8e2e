"""Reproducers of the import family: standalone scripts, ctypes over the wheel's
libonnxruntime.so (the interop API exists only in C), as `copy.c-api`'s are.

A script needs onnxruntime (and nothing of the kit): it carries the slot indices the kit read
from onnxruntime's header, the producer's own source (`conformance.testbed.interop.host` or
`.vulkan`, which import nothing of the kit), registers the EP library in a C environment, takes
the EP device's importer, and redoes the case with a fresh handle for every import; it ends in
an `assert` that prints expected against actual. A broken importer makes it exit non-zero (an
AssertionError, or the signal that ends the process), a good one exit 0.
"""

from __future__ import annotations

import inspect
import os

from conformance.testbed.interop import capi as C
from conformance.testbed.interop import host, mapping, slots, vulkan
from conformance.testbed.interop.rig import HANDLE_KINDS
from conformance.checks.context import CheckContext

CALLS = ["GetErrorMessage", "CreateEnv", "RegisterExecutionProviderLibrary", "UnregisterExecutionProviderLibrary", "GetEpDevices",
         "EpDevice_EpName", "GetInteropApi", "CreateCpuMemoryInfo", "CreateTensorWithDataAsOrtValue", "ReleaseValue", "GetTensorMutableData",
         "GetTensorMemoryInfo", "MemoryInfoGetDeviceMemType", "MemoryInfoGetDeviceType", "CopyTensors", "CreateSessionOptions",
         "SetSessionGraphOptimizationLevel", "SessionOptionsAppendExecutionProvider_V2", "CreateSessionFromArray", "Run"]

# the helpers every script has, after the producer's source and before the case
HELPERS = '''
signal.alarm(int(os.environ.get("REPRO_TIMEOUT_SECONDS", "120")))  # a call that never returns ends the script by SIGALRM
P = ctypes.c_void_p
CAPI = os.path.join(os.path.dirname(ort.__file__), "capi")  # the wheel's C library, beside its Python extension
lib = ctypes.CDLL(os.path.join(CAPI, sorted(f for f in os.listdir(CAPI) if f.startswith("libonnxruntime.so"))[0]))
lib.OrtGetApiBase.restype = ctypes.POINTER(P * 2)
api = ctypes.cast(ctypes.CFUNCTYPE(P, ctypes.c_uint32)(lib.OrtGetApiBase().contents[0])(API_VERSION), ctypes.POINTER(P))
assert api, f"onnxruntime {ort.__version__} has no C API {API_VERSION} (the interop API needs >= 1.24)"
interop = ctypes.cast(ctypes.CFUNCTYPE(P)(api[SLOT["GetInteropApi"]])(), ctypes.POINTER(P))


class OrtError(Exception):
    pass


def _function(table, index, restype, args):
    return ctypes.CFUNCTYPE(restype, *[type(a) if isinstance(a, ctypes._SimpleCData) else P for a in args])(table[index])


def _checked(name, status):
    if status:
        raise OrtError(name + ": " + ctypes.CFUNCTYPE(ctypes.c_char_p, P)(api[SLOT["GetErrorMessage"]])(status).decode())


def call(name, *args):  # an OrtApi function that returns a status
    _checked(name, _function(api, SLOT[name], P, args)(*args))


def icall(name, *args):  # an OrtInteropApi function that returns a status
    _checked(name, _function(interop, INTEROP_SLOT[name], P, args)(*args))


def ivoid(name, *args):  # an OrtInteropApi function that returns nothing
    _function(interop, INTEROP_SLOT[name], None, args)(*args)


class MemoryDescriptor(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("handle_type", ctypes.c_int), ("native_handle", P), ("size_bytes", ctypes.c_size_t),
                ("offset_bytes", ctypes.c_size_t)]


class TensorDescriptor(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("element_type", ctypes.c_int), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("rank", ctypes.c_size_t), ("offset_bytes", ctypes.c_size_t)]


def devices_of(env, ep_name):
    array, count = ctypes.POINTER(P)(), ctypes.c_size_t()
    call("GetEpDevices", env, ctypes.byref(array), ctypes.byref(count))
    name_of = ctypes.CFUNCTYPE(ctypes.c_char_p, P)(api[SLOT["EpDevice_EpName"]])
    return [array[i] for i in range(count.value) if name_of(array[i]) == ep_name.encode()]


def importer_of(device):
    made = P()
    icall("CreateExternalResourceImporterForDevice", P(device), ctypes.byref(made))
    assert made.value, "CreateExternalResourceImporterForDevice: expected an importer, got none"
    return made


def can_import(handle_type, imp=None):
    answer = ctypes.c_bool()
    icall("CanImportMemory", imp or importer, ctypes.c_int(handle_type), ctypes.byref(answer))
    return answer.value


def fresh(values=b"", size=ALLOCATION, at=0):  # a producer allocation holding `values` at `at`
    allocation = producer.allocate(size)
    if values:
        producer.write(allocation, values, at)
    return allocation


def imported(allocation, size=None, offset=0, handle_type=HANDLE_TYPE, version=24, imp=None):  # ImportMemory of a handle exported for it alone
    descriptor = MemoryDescriptor(version, handle_type, P(producer.export(allocation)), size or allocation.size, offset)
    handle = P()
    icall("ImportMemory", imp or importer, ctypes.byref(descriptor), ctypes.byref(handle))
    assert handle.value, "ImportMemory returned OK and no handle"
    return handle


def tensor(handle, count, offset=0, version=24, imp=None):
    dims = (ctypes.c_int64 * 1)(count)
    descriptor = TensorDescriptor(version, 1, dims, 1, offset)  # float32
    value = P()
    icall("CreateTensorFromMemory", imp or importer, handle, ctypes.byref(descriptor), ctypes.byref(value))
    assert value.value, "CreateTensorFromMemory returned OK and no tensor: expected an error status, or a tensor"
    return value


def memory_of(value):  # (device type, memory type) of a tensor: ('gpu', 'default'), ...
    info, kind = P(), ctypes.c_int(-1)
    call("GetTensorMemoryInfo", value, ctypes.byref(info))
    ctypes.CFUNCTYPE(None, P, ctypes.POINTER(ctypes.c_int))(api[SLOT["MemoryInfoGetDeviceType"]])(info, ctypes.byref(kind))
    memory = ctypes.CFUNCTYPE(ctypes.c_int, P)(api[SLOT["MemoryInfoGetDeviceMemType"]])(info)
    return {0: "cpu", 1: "gpu", 3: "npu"}.get(kind.value, str(kind.value)), {0: "default", 5: "host_accessible"}.get(memory, str(memory))


def cpu_tensor(buffer):
    info, value = P(), P()
    call("CreateCpuMemoryInfo", ctypes.c_int(0), ctypes.c_int(0), ctypes.byref(info))
    dims = (ctypes.c_int64 * 1)(ctypes.sizeof(buffer))
    call("CreateTensorWithDataAsOrtValue", info, P(ctypes.addressof(buffer)), ctypes.c_size_t(ctypes.sizeof(buffer)), dims, ctypes.c_size_t(1),
         ctypes.c_int(2), ctypes.byref(value))  # uint8
    return value


def address_of(value):
    address = P()
    call("GetTensorMutableData", value, ctypes.byref(address))
    return address.value


def read(value, size):  # what the CPU sees: directly where the tensor's memory is CPU-readable, else through CopyTensors
    if "cpu" in memory_of(value)[0] or memory_of(value)[1] == "host_accessible":
        return ctypes.string_at(address_of(value), size)
    landing = (ctypes.c_uint8 * size)(*([0xA5] * size))
    call("CopyTensors", env, (P * 1)(value), (P * 1)(cpu_tensor(landing)), None, ctypes.c_size_t(1))
    return bytes(landing)


def write(value, data):  # through the data pointer where the CPU may write, else through CopyTensors
    if "cpu" in memory_of(value)[0] or memory_of(value)[1] == "host_accessible":
        return ctypes.memmove(address_of(value), data, len(data))
    source = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    call("CopyTensors", env, (P * 1)(cpu_tensor(source)), (P * 1)(value), None, ctypes.c_size_t(1))


def pattern(seed, count=COUNT):  # float32 bytes, distinct per seed, negatives and positives
    import struct
    return struct.pack(f"{count}f", *[(i - count / 2) * 0.25 + seed for i in range(count)])


def same(what, expected, got):
    assert got == expected, f"{what}: expected {expected[:16].hex()}..., got {got[:16].hex()}..."
    print(f"{what}: the {len(expected)} bytes are right")
'''


def script(ctx: CheckContext, kind: str, title: str, body: str, *, register: bool = True) -> str:
    """A complete script for handle kind `kind`: the producer's source, the helpers, the EP's
    importer (`importer`, of `device` in `env`; not made when `register` is False), then `body`."""
    target = ctx.target
    module = host if kind == "host-allocation" else vulkan
    # the producer's source, standing alone: its imports of the kit become what they name
    kit_imports = {"from __future__ import annotations": "", "from conformance.testbed.interop.mapping import Mapped": "",
                   "from conformance.errors import KitError": "class KitError(Exception):\n    pass"}
    source = "\n".join(kit_imports.get(line, line) for line in (inspect.getsource(mapping) + inspect.getsource(module)).splitlines())
    maker = "producer = HostProducer()" if kind == "host-allocation" else "producer = open_producer()"
    slot = {name: slots.ORT_API[name][0] for name in CALLS}
    interop_slot = {name: index for name, (index, _) in slots.ORT_INTEROP_API.items()}
    library = os.path.abspath(target.library) if target.library else ""
    setup = ["env = P()", "call('CreateEnv', ctypes.c_int(3), ctypes.c_char_p(b'repro'), ctypes.byref(env))"]
    if register:
        setup += [f"call('RegisterExecutionProviderLibrary', env, ctypes.c_char_p({target.registration!r}.encode()), ctypes.c_char_p({library!r}.encode()))"
                  if target.registration and library else "# a built-in EP: nothing to register",
                  "device = devices_of(env, EP)[DEVICE]", "importer = importer_of(device)"]
    constants = (f"API_VERSION = {C.API_VERSION}\nSLOT = {slot!r}  # OrtApi slot indices, from onnxruntime_c_api.h\n"
                 f"INTEROP_SLOT = {interop_slot!r}  # OrtInteropApi slot indices\n"
                 f"HANDLE_TYPE = {C.HANDLE_TYPES[HANDLE_KINDS[kind]]}  # {HANDLE_KINDS[kind].upper()}\n"
                 f"HANDLE_TYPES = {C.HANDLE_TYPES!r}\nCOUNT, ALLOCATION = 24, 4 * 4096\n"
                 f"EP, DEVICE = {target.provider!r}, {ctx.device_index}\n")
    return (f"# Reproduces: {title}\n# Exits non-zero (an AssertionError, or the signal that ends the process) when it is broken.\n"
            "import ctypes, os, signal\nimport onnxruntime as ort\n\n"
            f"# --- the producer: {module.__name__}, as the kit has it ---\n{source}\n# --- the C API ---\n{constants}{HELPERS}\n"
            + "\n".join(setup) + f"\n{maker}\n\n{body.rstrip()}\n")


# --- the body of each check's script -------------------------------------------------------------

def capability(handle_type: str) -> str:
    return f'''T = HANDLE_TYPES[{handle_type!r}]
claimed = can_import(T)
try:
    imported(fresh(size=4096), handle_type=T)
    answer = "accepted it"
except OrtError as error:
    answer = f"refused it ({{error}})"
assert claimed == answer.startswith("accepted"), f"CanImportMemory says {{claimed}} for {handle_type.upper()}, but ImportMemory {{answer}}"
print("CanImportMemory and ImportMemory agree")'''


HOST_ACCESSIBLE = '''values = pattern(1)
allocation = fresh(values)
t = tensor(imported(allocation), COUNT)
if memory_of(t)[1] != "host_accessible":
    print(f"imported tensors report {memory_of(t)} memory: the contract is about HOST_ACCESSIBLE ones (nothing to reproduce)")
    raise SystemExit(0)
same("a CPU read of the imported HOST_ACCESSIBLE tensor", values, ctypes.string_at(address_of(t), len(values)))
written = pattern(7)
ctypes.memmove(address_of(t), written, len(written))
same("the producer's memory after a CPU write into the tensor", written, producer.read(allocation, len(written)))'''

DEFAULT_COPY = '''values = pattern(2)
allocation = fresh(values)
t = tensor(imported(allocation), COUNT)
if memory_of(t)[1] != "default" or memory_of(t)[0] == "cpu":
    print(f"imported tensors report {memory_of(t)} memory: the contract is about device DEFAULT ones (nothing to reproduce)")
    raise SystemExit(0)
same("CopyTensors of the imported tensor to CPU", values, read(t, len(values)))
written = pattern(9)
write(t, written)
same("the producer's memory after CopyTensors CPU > imported tensor", written, producer.read(allocation, len(written)))'''

OFFSETS = '''blocks = [pattern(seed) for seed in (3, 4, 5)]
allocation = fresh()
for index, block in enumerate(blocks):
    producer.write(allocation, block, 256 + index * 1024)
handle = imported(allocation, offset=256)
for index, block in enumerate(blocks):
    same(f"tensor {index} at offset 256 + {index * 1024}", block, read(tensor(handle, COUNT, index * 1024), len(block)))'''


# A session of MODEL on the EP device, its input `source` and preallocated output `output` two
# tensors of one imported handle (the output 8 KiB in): shared by session_io and run_copies.
SESSION_ON_IMPORT = '''allocation = fresh(values)
handle = imported(allocation)
source, output = tensor(handle, COUNT), tensor(handle, COUNT, 8192)
options, session = P(), P()
call("CreateSessionOptions", ctypes.byref(options))
call("SetSessionGraphOptimizationLevel", options, ctypes.c_int(0))
call("SessionOptionsAppendExecutionProvider_V2", options, env, (P * 1)(device), ctypes.c_size_t(1), None, None, ctypes.c_size_t(0))
call("CreateSessionFromArray", env, ctypes.c_char_p(MODEL), ctypes.c_size_t(len(MODEL)), options, ctypes.byref(session))
'''


def session_io(model: bytes) -> str:
    return f'''MODEL = {model!r}  # y = Relu(x), float32 [{24}]
import struct
values = pattern(0)
{SESSION_ON_IMPORT}outputs = (P * 1)(output.value)
call("Run", session, None, (ctypes.c_char_p * 1)(b"x"), (P * 1)(source.value), ctypes.c_size_t(1), (ctypes.c_char_p * 1)(b"y"), ctypes.c_size_t(1), outputs)
assert outputs[0] == output.value, f"Run replaced the preallocated imported output: expected {{output.value:#x}}, got {{outputs[0] or 0:#x}}"
relu = struct.pack(f"{{COUNT}}f", *[max(v, 0.0) for v in struct.unpack(f"{{COUNT}}f", values)])
same("the session's output in the producer's memory", relu, producer.read(allocation, len(relu), 8192))'''


HANDLE_RELEASE = '''class Head(ctypes.Structure):  # OrtExternalMemoryHandle, onnxruntime_ep_c_api.h: what every EP's handle starts with
    _fields_ = [("version", ctypes.c_uint32), ("ep_device", P), ("descriptor", MemoryDescriptor), ("Release", P)]


handle = imported(fresh())
head = Head.from_address(handle.value)
assert head.Release, "the handle ImportMemory returned has no Release function: ReleaseExternalMemoryHandle cannot free it"
assert head.ep_device == device, f"the handle names EP device {head.ep_device or 0:#x}, not {device:#x} whose importer made it"
print("the imported handle has its Release function and names its EP device")'''

SELF_COPY = '''values = pattern(13)
allocation = fresh(values)
handle = imported(allocation)
source, destination = tensor(handle, COUNT), tensor(handle, COUNT)
assert address_of(source) == address_of(destination), "two tensors of one handle at one offset have different addresses"
try:
    call("CopyTensors", env, (P * 1)(source), (P * 1)(destination), None, ctypes.c_size_t(1))
except OrtError as error:
    print("CopyTensors onto the same memory is refused, which the EP may do:", error)
    raise SystemExit(0)
same("the producer's memory after CopyTensors of an imported tensor onto itself", values, producer.read(allocation, len(values)))'''


def run_copies(model: bytes) -> str:
    return f'''MODEL = {model!r}  # y = Relu(x), float32 [{24}]
import tempfile
values = pattern(14)
{SESSION_ON_IMPORT}log = os.path.join(tempfile.mkdtemp(), "copies.log")
os.environ["ORT_REFDEV_COPY_LOG"] = log  # refdev writes down every copy it is asked for (no public API shows them)
call("Run", session, None, (ctypes.c_char_p * 1)(b"x"), (P * 1)(source.value), ctypes.c_size_t(1), (ctypes.c_char_p * 1)(b"y"), ctypes.c_size_t(1),
     (P * 1)(output.value))
del os.environ["ORT_REFDEV_COPY_LOG"]
asked = open(log).read().splitlines() if os.path.exists(log) else []
assert not asked, f"a Run on imported {{memory_of(source)[1].upper()}} tensors asked the EP for {{len(asked)}} copies: {{asked}}"
print("the Run asked for no copy")'''


def rejects_bad(request: str, denied: int, what: str) -> str:
    steps = {
        "size-past-allocation": "imported(fresh(), size=ALLOCATION + (1 << 20) if bad else ALLOCATION)",
        "offset-past-end": "imported(fresh(), offset=ALLOCATION if bad else 256)",
        "unsupported-handle-type": f"imported(fresh(), handle_type={denied} if bad else HANDLE_TYPE)",
        "bad-version": "imported(fresh(), version=1 if bad else 24)",
        "bad-tensor-version": "tensor(imported(fresh()), COUNT, version=1 if bad else 24)",
        "tensor-past-end": "tensor(imported(fresh()), ALLOCATION // 4, 64 if bad else 0)",
        "other-device": ("other = importer_of(devices_of(env, EP)[1 - DEVICE])\n"
                         "    tensor(imported(fresh(), imp=importer if bad else other), COUNT, imp=other)"),
    }[request]
    return f'''def attempt(bad):
    {steps}


attempt(False)  # the valid twin, made the same way: it must be accepted, or a refusal below proves nothing
try:
    attempt(True)
except OrtError as error:
    assert str(error).strip(), "refused without a message"
    print("{what}: refused as expected:", error)
    raise SystemExit(0)
raise AssertionError("{what}: expected an error, got: accepted")'''


def lifetime(request: str) -> str:
    if request == "handle-outlives-importer":
        return '''own = importer_of(device)
handle = imported(fresh(), imp=own)
ivoid("ReleaseExternalResourceImporter", own)
ivoid("ReleaseExternalMemoryHandle", handle)
print("the handle was released after its importer")'''
    outlived = request.split("-")[-1]
    return f'''own = importer_of(device)
values = pattern(6)
allocation = fresh(values)
handle = imported(allocation, imp=own)
t = tensor(handle, COUNT, imp=own)
ivoid("ReleaseExternalMemoryHandle", handle)
{'ivoid("ReleaseExternalResourceImporter", own)' if outlived == "importer" else ""}
same("a tensor read after its {outlived} was released", values, read(t, len(values)))
written = pattern(11)
write(t, written)
same("the producer's memory after a write into a tensor that outlived its {outlived}", written, producer.read(allocation, len(written)))'''


def unregister(target_library: str) -> str:
    return f'''name = "refdev-unregistered"
fd = os.memfd_create(name)  # a copy of the library, registered here alone: the unload is then seen
with open({target_library!r}, "rb") as library, os.fdopen(os.dup(fd), "wb") as copy:
    copy.write(library.read())
call("RegisterExecutionProviderLibrary", env, ctypes.c_char_p(name.encode()), ctypes.c_char_p(f"/proc/self/fd/{{fd}}".encode()))
device = devices_of(env, EP)[DEVICE]
importer = importer_of(device)
values = pattern(12)
allocation = fresh(values)
handle = imported(allocation)
t = tensor(handle, COUNT)
ivoid("ReleaseExternalResourceImporter", importer)
try:
    call("UnregisterExecutionProviderLibrary", env, ctypes.c_char_p(name.encode()))
except OrtError as error:
    print("onnxruntime refused to unregister the library while its imports are alive:", error)
    raise SystemExit(0)
mapped = any("/memfd:" + name in line for line in open("/proc/self/maps"))
assert mapped, ("UnregisterExecutionProviderLibrary unloaded the EP library while an imported handle and a tensor of it are alive: "
                "expected an error status, or the library kept until they are released; releasing them now jumps into unmapped code")
_function(api, SLOT["ReleaseValue"], None, [t])(t)
ivoid("ReleaseExternalMemoryHandle", handle)
same("the producer's memory after the unregistration", values, producer.read(allocation, len(values)))'''
