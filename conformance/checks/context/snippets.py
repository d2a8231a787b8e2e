"""Reproducers: standalone Python scripts that redo what a check did and fail exactly when the
contract is broken.

A script needs onnxruntime and numpy only (never this kit), names the EP library and the models
by absolute path, uses only the API the installed onnxruntime has (no `memory_info=` for CPU
memory), sets the EP up as the check context does (the EP device, its provider options, session
config entries; sessions with fallback disabled), fills sources with distinct, type-revealing
bytes and ends in an `assert` that prints expected against actual. A call that kills the process
kills the script the same way, and a call that never returns ends it by SIGALRM: a broken build
makes it exit non-zero, a good one exit 0.

Each script is `Snippets.script(title, body)`: the same header (imports, helpers, the EP's
set-up) around the body of one kind of step, which the check's family builds beside it (what
families share is in `conformance.checks.context.steps`).
"""

from __future__ import annotations

import os
from pathlib import Path

from conformance.testbed import tensors
from conformance.testbed.interop import capi as C
from conformance.testbed.interop import slots
from conformance.checks.context.device import DeviceUnderTest

ASSIGNMENT_CONFIG = "session.record_ep_graph_assignment_info"
ALARM_SECONDS = 120  # longer than any check's own calls take on a healthy build
# The OrtApi functions the C-path scripts call by slot (`Snippets.c_api_setup`).
C_PATH_FUNCTIONS = ("GetErrorMessage", "CreateEnv", "RegisterExecutionProviderLibrary", "GetEpDevices", "EpDevice_EpName",
                    "EpDevice_MemoryInfo", "GetSharedAllocator", "CreateTensorAsOrtValue", "CreateCpuMemoryInfo",
                    "CreateTensorWithDataAsOrtValue", "GetTensorMutableData", "CopyTensors", "ReleaseValue",
                    "AllocatorGetStats", "GetKeyValuePairs", "ReleaseKeyValuePairs")

# The helpers every script has: values, placing and reading them, and the two endings of a step.
HELPERS = '''\
import ctypes, os, signal, sys
import numpy as np
import onnxruntime as ort

signal.alarm(int(os.environ.get("REPRO_TIMEOUT_SECONDS", "%d")))  # a call that never returns ends the script by SIGALRM
NATIVE = (1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13)  # onnx element types numpy has


def filled(shape, storage, seed, specials=()):  # distinct, type-revealing: nonzero random bytes, special values first
    storage, count = np.dtype(storage), int(np.prod(shape, dtype=np.int64))
    raw = np.random.default_rng(seed).integers(1, 256, size=count * storage.itemsize, dtype=np.uint8)
    if storage == np.bool_:
        return (raw %% 2).astype(np.bool_).reshape(shape)
    bits, n = raw.view(f"u{storage.itemsize}"), min(count, len(specials))
    bits[:n] = np.array(specials[:n], dtype=np.uint64).astype(bits.dtype)
    return raw.view(storage).reshape(shape)


def sentinel(shape, storage, byte=0x5A):  # one byte throughout: a copy that did nothing leaves it visible
    if np.dtype(storage) == np.bool_:
        return np.full(shape, bool(byte & 1))
    array = np.empty(shape, storage)
    array.reshape(-1).view(np.uint8)[:] = byte
    return array


def cpu_value(array, onnx_type=1):  # a CPU OrtValue over the array itself: what is copied into it shows there
    value = ort.OrtValue.ortvalue_from_numpy(array) if onnx_type in NATIVE else ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array, onnx_type)
    assert not array.size or value.data_ptr() == array.ctypes.data, "onnxruntime copied the array instead of wrapping it"
    return value


def place(array, memory, onnx_type):  # a value in `memory` (None: the array itself) holding the array's bytes
    if memory is None:
        return cpu_value(array, onnx_type)
    value = works("allocating from the EP memory info", ort.OrtValue.ortvalue_from_shape_and_type, list(array.shape), onnx_type, memory_info=memory)
    works("copy_tensors CPU > EP memory", ort.copy_tensors, [cpu_value(array, onnx_type)], [value], None)
    return value


def canaries(start, stop):  # the canary bytes of positions start..stop of a guarded buffer (as conformance/testbed/guard.py writes them)
    return (np.arange(start, stop) %% 256).astype(np.uint8) ^ np.uint8(0xC3)


def guarded(array, margin=64):  # the array's values between canary bytes: a write past it shows
    raw = np.empty(array.nbytes + 2 * margin, np.uint8)
    raw[:margin], raw[raw.size - margin:] = canaries(0, margin), canaries(raw.size - margin, raw.size)
    view = raw[margin:margin + array.nbytes].view(array.dtype).reshape(array.shape)
    view[...] = array
    return raw, view


def intact(what, raw, margin=64):  # the assertion that nothing was written around a guarded array
    before = np.count_nonzero(raw[:margin] != canaries(0, margin))
    after = np.count_nonzero(raw[raw.size - margin:] != canaries(raw.size - margin, raw.size))
    assert not before and not after, (f"{what}: expected the canaries around the buffer unchanged, "
                                      f"got {before} bytes changed before its start, {after} after its end")


def read(value, like, onnx_type):  # the value's bytes: directly where the CPU reads them, else copied into another sentinel
    if value.device_name().lower() == "cpu":
        size = value.tensor_size_in_bytes()
        return np.frombuffer(ctypes.string_at(value.data_ptr(), size) if size else b"", np.uint8)
    raw, landing = guarded(sentinel(like.shape, like.dtype, 0xA5))
    works("copy_tensors EP memory > CPU", ort.copy_tensors, [value], [cpu_value(landing, onnx_type)], None)
    if landing.size:
        intact("copy_tensors EP memory > CPU", raw)
    if onnx_type in (21, 22):  # 4-bit types: one element a byte in the array, two a byte in the tensor
        tail = landing.reshape(-1).view(np.uint8)[value.tensor_size_in_bytes():]
        assert (tail == 0xA5).all(), f"copy_tensors EP memory > CPU: expected nothing written past the tensor's bytes, got {np.count_nonzero(tail != 0xA5)}"
    return landing


def same_bytes(what, expected, actual, nbytes=None):  # the assertion: expected against actual, byte for byte
    e = np.frombuffer(np.ascontiguousarray(expected).tobytes(), np.uint8)[:nbytes]
    a = np.frombuffer(np.ascontiguousarray(actual).tobytes(), np.uint8)[:nbytes]
    where = np.flatnonzero(e[:min(e.size, a.size)] != a[:min(e.size, a.size)])
    shown = ", ".join(f"@{i}: expected 0x{e[i]:02x} got 0x{a[i]:02x}" for i in where[:5])
    assert e.size == a.size and not where.size, f"{what}: {where.size + abs(e.size - a.size)} of {e.size} bytes differ (got {a.size}); first: {shown}"
    print(f"{what}: the {e.size} bytes are right")


def works(what, call, *args, **kwargs):  # a call that must succeed: its error is the assertion that fails
    try:
        return call(*args, **kwargs)
    except Exception as error:
        raise AssertionError(f"{what}: expected it to succeed, got {type(error).__name__}: {error}") from None


def precondition(holds, what, expected, actual):  # the set-up the run had: where it differs the script would test something else, so it stops
    if not holds:
        print(f"precondition not met: {what}: expected {expected}, got {actual}. "
              "This script tests nothing without the set-up of the run it comes from (see its first lines).", file=sys.stderr)
        raise SystemExit(2)


def environment_as_in_the_run(setup, faults):  # setup: variables as the run had them (None: unset); faults: said, not required
    for name, value in setup.items():
        now = os.environ.get(name) or None
        precondition(now == value, f"environment variable {name}, which sets the EP up", "unset" if value is None else repr(value),
                     "unset" if now is None else repr(now))
    for name, value in faults.items():
        now = os.environ.get(name) or None
        if value is not None and now != value:
            here = "unset" if now is None else repr(now)
            print(f"note: the run had {name}={value} (its failing build); here it is {here}: this tests the build without that fault. "
                  f"Run it as `{name}={value} python {os.path.basename(sys.argv[0] or 'this.py')}` to see the failure.")


def device_as_in_the_run(provider, index, hardware):  # the EP device the run tested: its index among the EP's devices, its hardware type
    devices = [d for d in ort.get_ep_devices() if d.ep_name == provider]
    precondition(len(devices) > index, f"EP devices of {provider}", f"at least {index + 1}", len(devices))
    seen = devices[index].device.type.name.lower()
    precondition(hardware is None or seen == hardware, f"the hardware type of {provider}'s device {index}", hardware, seen)
    return devices[index]


def memory_as_in_the_run(device, kind):  # the EP device's memory info of `kind`, which the run saw advertised
    info = device.memory_info(getattr(ort.OrtDeviceMemoryType, kind))
    precondition(info is not None, f"the EP device's {kind} memory", "advertised (the run used it)", "none advertised")
    precondition(info.device_mem_type.name == kind, f"the memory type of the EP device's {kind} memory info", kind, info.device_mem_type.name)
    return info


def nodes_as_in_the_run(session, provider, expected):  # the op types the EP took, as in the run (None: the run did not see them; some)
    assignment = [(g.ep_name, [n.op_type for n in g.get_nodes()]) for g in session.get_provider_graph_assignment_info()]
    taken = sorted(op for ep, ops in assignment if ep == provider for op in ops)
    assert taken, f"{provider} took no node of the model: expected some, got {assignment!r}"
    precondition(expected is None or taken == expected, f"the nodes {provider} took", expected, taken)


def refused(what, call, *args):  # a call that must be refused, with a message
    try:
        call(*args)
    except Exception as error:
        assert str(error).strip(), f"{what}: expected an error message, got {error!r}"
        return print(f"{what}: refused as expected: {str(error).splitlines()[0]}")
    raise AssertionError(f"{what}: expected an error, got: accepted")
''' % ALARM_SECONDS


class Snippets:
    def __init__(self, under_test: DeviceUnderTest):
        self.under_test = under_test
        # {model path: the op types the EP took of it}, filled as sessions are made
        # (`Sessions.session`), so that a script requires the nodes its run saw on the EP.
        self.taken: dict[str, list[str]] = {}

    def script(self, title: str, body: str) -> str:
        """A complete script: what it reproduces, the helpers, the EP's set-up, then `body`."""
        return (f"# Reproduces: {title}\n# Exits non-zero (an AssertionError, or the signal that ends the process) when it is broken.\n"
                f"{HELPERS}\n{self.preamble()}\n\n{body.rstrip()}\n")

    def preamble(self) -> str:
        """The EP set up as the worker sets it up, and the run's set-up required: the
        environment variables the EP's spec names as its set-up with the values the run had,
        the plugin library registered by its absolute path, `dev` the EP device under test (its
        index and hardware type as in the run), `DEFAULT` and `HOST_ACCESSIBLE` its memory
        infos where the run saw them advertised. A script run without that set-up exits 2 and
        says what differs, instead of testing something else (plain CPU memory for a memory the
        EP no longer advertises)."""
        target, lines = self.under_test.target, self.setup_record()
        if target.registration and target.library:
            lines.append(f"ort.register_execution_provider_library({target.registration!r}, {os.path.abspath(target.library)!r})")
        if self.under_test.device is not None:
            hardware = self.under_test.facts.hardware.type if self.under_test.facts.hardware else None
            lines.append(f"dev = device_as_in_the_run({target.provider!r}, {self.under_test.index}, {hardware!r})")
            lines += [f"{kind.upper()} = memory_as_in_the_run(dev, {kind.upper()!r})" for kind in ("default", "host_accessible")
                      if self.under_test.memory_info(kind) is not None]
        return "\n".join(lines)

    def setup_record(self) -> list[str]:
        """Comment lines that say how the run set the EP up (library, its hash, EP options,
        session config, the environment variables its spec names), and the line that requires
        the set-up variables as the run had them."""
        target = self.under_test.target
        setup_names, fault_names = (target.spec.environment_setup, target.spec.environment_faults) if target.spec else ((), ())
        setup = {name: os.environ.get(name) or None for name in setup_names}
        faults = {name: os.environ.get(name) or None for name in fault_names}
        lines = ["# How the run set the EP up:",
                 f"#   EP: {target.provider}, device {self.under_test.index}",
                 f"#   library: {os.path.abspath(target.library) if target.library else '(built in)'}"
                 + (f" (sha256 {target.library_sha256})" if target.library_sha256 else ""),
                 f"#   EP options: {target.provider_options!r}; session config: {target.session_config!r}"]
        lines += [f"#   environment (set-up, required): {name}={'<unset>' if value is None else value}" for name, value in setup.items()]
        lines += [f"#   environment (fault, the run's build): {name}={'<unset>' if value is None else value}" for name, value in faults.items()]
        if setup or faults:
            lines.append(f"environment_as_in_the_run({setup!r}, {faults!r})")
        return lines

    def c_api_setup(self) -> str:
        """The lines a C-path script begins with, after `preamble` (the copy, size and
        concurrency families share them): ctypes over the wheel's libonnxruntime.so (the slot
        indices the kit read from onnxruntime's header), `error(status)` and `call(name, *args)`
        (an AssertionError naming the function when it returns a status), the EP library
        registered in a C environment `env`, `device` the EP device under test, `info` its
        DEFAULT memory (which the run saw advertised), `allocator` its shared allocator and
        `cpu_info` plain CPU memory."""
        target = self.under_test.target
        register = (f"call('RegisterExecutionProviderLibrary', env, ctypes.c_char_p({target.registration!r}.encode()), "
                    f"ctypes.c_char_p({os.path.abspath(target.library)!r}.encode()))"
                    if target.registration and target.library else "# a built-in EP: nothing to register")
        return f"""P = ctypes.c_void_p
SLOT = {({name: slots.ORT_API[name][0] for name in C_PATH_FUNCTIONS})!r}  # OrtApi slot indices, from onnxruntime_c_api.h
CAPI = os.path.join(os.path.dirname(ort.__file__), 'capi')  # the wheel's C library, beside its Python extension
lib = ctypes.CDLL(os.path.join(CAPI, sorted(f for f in os.listdir(CAPI) if f.startswith('libonnxruntime.so'))[0]))
lib.OrtGetApiBase.restype = ctypes.POINTER(P * 2)
api = ctypes.cast(ctypes.CFUNCTYPE(P, ctypes.c_uint32)(lib.OrtGetApiBase().contents[0])({C.API_VERSION}), ctypes.POINTER(P))
error = lambda status: ctypes.CFUNCTYPE(ctypes.c_char_p, P)(api[SLOT['GetErrorMessage']])(status).decode()
def call(name, *args):
    status = ctypes.CFUNCTYPE(P, *[type(a) if isinstance(a, ctypes._SimpleCData) else P for a in args])(api[SLOT[name]])(*args)
    if status:
        raise AssertionError(name + ': ' + error(status))
env = P()
call('CreateEnv', ctypes.c_int(3), ctypes.c_char_p(b'repro'), ctypes.byref(env))
{register}
devices, count = ctypes.POINTER(P)(), ctypes.c_size_t()
call('GetEpDevices', env, ctypes.byref(devices), ctypes.byref(count))
name_of = ctypes.CFUNCTYPE(ctypes.c_char_p, P)(api[SLOT['EpDevice_EpName']])
device = [devices[i] for i in range(count.value) if name_of(devices[i]) == {target.provider!r}.encode()][{self.under_test.index}]
info = P(ctypes.CFUNCTYPE(P, P, ctypes.c_int)(api[SLOT['EpDevice_MemoryInfo']])(device, 0))  # DEFAULT
assert info, 'the EP device advertises no DEFAULT memory (the run saw one)'
allocator, cpu_info = P(), P()
call('GetSharedAllocator', env, info, ctypes.byref(allocator))
call('CreateCpuMemoryInfo', ctypes.c_int(0), ctypes.c_int(0), ctypes.byref(cpu_info))
"""

    def session_snippet(self, model_path: Path | str | None, intra_op_threads: int = 1, config: dict[str, str] | None = None) -> str:
        """Lines that create `s`, a session of the model on the EP under test (after `preamble`),
        made as `Sessions.create_session` makes it (its node assignment recorded, the EP's
        options given, one thread unless `intra_op_threads` says more), with fallback to the CPU
        EP disabled, and that assert the EP took nodes of it."""
        target = self.under_test.target
        options = target.provider_options
        path = os.path.abspath(model_path) if model_path is not None else "<the model: not saved in this run>"
        threads = "so.intra_op_num_threads = so.inter_op_num_threads = 1" if intra_op_threads == 1 else \
            f"so.intra_op_num_threads, so.inter_op_num_threads = {intra_op_threads}, 1"
        lines = ["so = ort.SessionOptions()", "so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL",
                 threads, f"so.add_session_config_entry({ASSIGNMENT_CONFIG!r}, '1')"]
        lines += [f"so.add_session_config_entry({k!r}, {v!r})" for k, v in {**target.session_config, **(config or {})}.items()]
        if self.under_test.device is not None:
            lines += [f"so.add_provider_for_devices([dev], {options!r})",
                      f"s = works('creating the session', ort.InferenceSession, {path!r}, so, enable_fallback=0)"]
        else:
            lines.append(f"s = works('creating the session', ort.InferenceSession, {path!r}, so, "
                         f"providers=[({target.provider!r}, {options!r}), 'CPUExecutionProvider'], enable_fallback=0)")
        lines.append("s.disable_fallback()  # an EP failure at run time is an error, not a silent rerun on the CPU EP")
        if target.has_api("graph_assignment_info"):
            lines.append(f"nodes_as_in_the_run(s, {target.provider!r}, {self.taken.get(path)!r})")
        else:
            lines.append(f"assert {target.provider!r} in s.get_providers(), f'expected {target.provider} among the providers, got {{s.get_providers()}}'")
        return "\n".join(lines)

    def memory_expr(self, kind: str) -> str:
        """The expression of memory `kind`'s OrtMemoryInfo in a script ('None': plain CPU memory)."""
        return "None" if self.under_test.memory_info(kind) is None else kind.upper()

    def values(self, name: str, dt: tensors.DType, shape: tuple[int, ...], seed: int) -> str:
        """`name = ...`: distinct, type-revealing values of `dt` and `shape` (a storage array)."""
        specials = tensors._FLOAT_SPECIALS.get(dt.name)
        return f"{name} = filled({list(shape)}, np.{dt.storage.name}, {seed}{f', {specials}' if specials else ''})"

    def sentinel(self, name: str, dt: tensors.DType, shape: tuple[int, ...], byte: int) -> str:
        return f"{name} = sentinel({list(shape)}, np.{dt.storage.name}, {byte:#x})"

    def place(self, name: str, array: str, kind: str, dt: tensors.DType) -> str:
        return f"{name} = place({array}, {self.memory_expr(kind)}, {dt.onnx_type})"

    def read(self, value: str, like: str, kind: str, dt: tensors.DType) -> str:
        """The expression of `value`'s bytes (`like`: an array of its shape and storage). The
        script decides as the kit does (`Memories.read`), from what the value says of its
        device: directly where it is CPU memory, else through copy_tensors."""
        return f"read({value}, {like}, {dt.onnx_type})"

    def nbytes(self, dt: tensors.DType, shape: tuple[int, ...]) -> str:
        """same_bytes' `nbytes` argument: only 4-bit types compare fewer bytes than their storage."""
        return f", {dt.nbytes(tensors.element_count(shape))}" if dt.bits == 4 else ""
