"""CopyTensors through the C API: a copy path of its own, beside Python's copy_tensors.

The CPU ends are tensors over guarded host buffers (CreateTensorWithDataAsOrtValue), so a copy
that reads or writes past them is seen; the device ends are tensors in the EP device's DEFAULT
memory from the C environment's shared allocator (GetSharedAllocator, CreateTensorAsOrtValue).
A device tensor is filled and read back with CopyTensors too: the direction under test is the
one named, the others are the means of seeing it, as in copy.direction.
"""

from __future__ import annotations

import ctypes
from typing import Iterator

import numpy as np

from conformance.testbed import tensors
from conformance.calls import Call
from conformance.checks.registry import check
from conformance.findings import NotApplicable, Violation
from conformance.testbed.guard import GuardedArray
from conformance.testbed.interop import capi as C
from conformance.testbed.interop import rig
from conformance.checks.context import CheckContext
from conformance import proofs

SENTINEL = 0x5A  # what a CPU destination holds before the copy
READ_BACK = "the read-back destination (default>cpu)"


class _Copier:
    """The C objects of one case: every tensor made is released by `close`, every guarded
    buffer's canaries are checked by `overruns`."""

    def __init__(self, ctx, api: C.CApi, env: C.Environment, device: int, dtype: tensors.DType, shape: tuple[int, ...]):
        self.ctx, self.api, self.env, self.device = ctx, api, env, device
        self.shape, self.element_type = shape, C.ELEMENT_TYPES[dtype.name]
        self.values: list[ctypes.c_void_p] = []
        self.guards: dict[str, GuardedArray] = {}

    def cpu(self, name: str, array: np.ndarray, dtype: tensors.DType | None = None) -> ctypes.c_void_p:
        """A tensor over `array` between canaries (of the case's shape and type, or of the array's and `dtype`)."""
        guarded = GuardedArray.holding(array)
        self.guards[name] = guarded
        shape, element_type = (self.shape, self.element_type) if dtype is None else (tuple(array.shape), C.ELEMENT_TYPES[dtype.name])
        value = C.cpu_tensor_at(self.api, guarded.address, guarded.array.nbytes, shape, element_type)
        self.values.append(value)
        return value

    def device_tensor(self, dtype: tensors.DType | None = None, shape: tuple[int, ...] | None = None) -> ctypes.c_void_p:
        """A tensor in the EP device's DEFAULT memory (of the case's shape and type, or of `dtype` and `shape`)."""
        element_type = self.element_type if dtype is None else C.ELEMENT_TYPES[dtype.name]
        with self.ctx.calling(Call("CreateTensorAsOrtValue", "default")):
            value = C.device_tensor(self.api, self.env, self.device, "default", shape or self.shape, element_type)
        self.values.append(value)
        return value

    def copy(self, source: ctypes.c_void_p, destination: ctypes.c_void_p, direction: str, note: str = "") -> None:
        with self.ctx.calling(Call("CopyTensors", direction, note)):
            C.copy_tensors(self.api, self.env, [source], [destination])

    def overruns(self) -> list[str]:
        return [f"{name}: {overrun.describe()}" for name, guarded in self.guards.items() for overrun in guarded.check()]

    def overrun_violations(self, what: str, snippet: str, subject: str = "") -> Iterator[Violation]:
        """`what` (the copies made) wrote outside a host tensor: the canaries of every guarded buffer, proved intact or not."""
        overruns = self.overruns()
        self.ctx.prove(proofs.CANARIES_INTACT, not overruns)
        if overruns:
            yield Violation(f"{what} wrote outside a host tensor: {'; '.join(overruns)}", expected="canaries intact", actual="; ".join(overruns),
                            reproducer=snippet, subject=subject)

    def close(self) -> None:
        for value in self.values:
            self.api.call("ReleaseValue", value)


@check("copy.c-api")
def c_api_copy(ctx: CheckContext, direction: str, dtype: str = "float32", shape: str = "7x13") -> Iterator[Violation]:
    source_kind, destination_kind = direction.split(">")
    dt = tensors.DTYPES[dtype]
    shp = tensors.parse_shape(shape, dt)
    api, env, device = rig.c_device(ctx)
    with ctx.calling(Call("EpDevice_MemoryInfo", "default")):
        advertised = C.ep_device_memory(api, device, "default")
    if advertised is None or advertised["device_type"] == "cpu":
        where = "none" if advertised is None else f"{advertised['name']}, a CPU device's"
        raise NotApplicable(f"the EP device's DEFAULT memory is plain CPU memory ({where}): CopyTensors has no device end to reach")
    values = tensors.sample(dt, shp, seed=6)
    expected = tensors.payload(values, dt)
    snippet = _snippet(ctx, direction, dt, shp)
    ctx.attempt(f"CopyTensors {direction} through the C API", snippet)
    copier = _Copier(ctx, api, env, device, dt, shp)
    try:
        with ctx.precondition("allocating the DEFAULT tensors and filling the source (CopyTensors cpu>default)"):
            if source_kind == "cpu":
                source = copier.cpu("source", values)
            else:
                source = copier.device_tensor()
                copier.copy(copier.cpu("filling", values), source, "cpu>default")
            if destination_kind == "cpu":
                landing = destination = copier.cpu("destination", tensors.sentinel(dt, shp, SENTINEL))
            else:
                destination = copier.device_tensor()
                landing = copier.cpu(READ_BACK, tensors.sentinel(dt, shp, SENTINEL))
        try:
            copier.copy(source, destination, direction)
        except C.OrtError as exc:
            yield Violation(f"CopyTensors {direction} through the C API failed: {exc.message}", expected="the copy",
                            actual=f"status {exc.code}: {exc.message}", reproducer=snippet)
            return
        if destination is not landing:
            with ctx.precondition("reading the destination back (CopyTensors default>cpu)"):
                copier.copy(destination, landing, "default>cpu")
        got = copier.guards["destination" if destination_kind == "cpu" else READ_BACK].array
        ctx.prove(proofs.MEMORY, {"device": f"{advertised['name']} ({advertised['device_type']}, {advertised['memory_type']})", "direction": direction})
        diff = ctx.compare(expected, tensors.payload(got, dt))
        if diff:
            yield Violation(f"CopyTensors {direction} through the C API did not deliver the source bytes: {diff.describe()}",
                            expected="byte-identical destination", actual=diff.describe(), reproducer=snippet)
        yield from copier.overrun_violations(f"CopyTensors {direction} through the C API", snippet)
    finally:
        copier.close()


def c_script_header(ctx: CheckContext, dtype: tensors.DType, shape: tuple[int, ...]) -> str:
    """The lines a C-path script of the family begins with: the C API set up
    (`Snippets.c_api_setup`), then helpers: `device_tensor` and `cpu_tensor` (SHAPE and TYPE,
    from `dtype` and `shape`, unless given others), `guarded` host bytes between canaries, `copy`
    (CopyTensors of one pair)."""
    return ctx.snippets.c_api_setup() + f"""\
SHAPE, TYPE, NBYTES = {list(shape)!r}, {C.ELEMENT_TYPES[dtype.name]}, {tensors.element_count(shape) * np.dtype(dtype.storage).itemsize}
def device_tensor(shape=SHAPE, type_=TYPE):
    v = P()
    call('CreateTensorAsOrtValue', allocator, (ctypes.c_int64 * len(shape))(*shape), ctypes.c_size_t(len(shape)), ctypes.c_int(type_), ctypes.byref(v))
    return v
def cpu_tensor(buffer, shape=SHAPE, type_=TYPE):  # over the bytes between the canaries of a `guarded` buffer
    v = P()
    call('CreateTensorWithDataAsOrtValue', cpu_info, P(ctypes.addressof(buffer) + 64), ctypes.c_size_t(len(buffer) - 128),
         (ctypes.c_int64 * len(shape))(*shape), ctypes.c_size_t(len(shape)), ctypes.c_int(type_), ctypes.byref(v))
    return v
def guarded(fill):  # 64 canary bytes (0xC3) on each side of the tensor's bytes
    return (ctypes.c_uint8 * (len(fill) + 128))(*([0xC3] * 64 + list(fill) + [0xC3] * 64))
def copy(src, dst):
    call('CopyTensors', env, (P * 1)(src), (P * 1)(dst), None, ctypes.c_size_t(1))
"""


def _snippet(ctx: CheckContext, direction: str, dtype: tensors.DType, shape: tuple[int, ...]) -> str:
    """A script of its own: the C path's set-up (`c_script_header`), then the copy."""
    source_kind, destination_kind = direction.split(">")
    body = c_script_header(ctx, dtype, shape) + f"""data = bytes((i * 37 + 11) % 256 for i in range(NBYTES))
source_buffer, landing = guarded(data), guarded([{SENTINEL}] * NBYTES)
"""
    if source_kind == "cpu":
        body += "source = cpu_tensor(source_buffer)\n"
    else:
        body += "source = device_tensor()\ncopy(cpu_tensor(source_buffer), source)  # fill it: CPU > DEFAULT\n"
    if destination_kind == "cpu":
        body += f"copy(source, cpu_tensor(landing))  # {direction}\n"
    else:
        body += (f"destination = device_tensor()\ncopy(source, destination)  # {direction}\n"
                 "copy(destination, cpu_tensor(landing))  # read it back: DEFAULT > CPU\n")
    body += ("got = bytes(landing)\n"
             "bad = next((i for i in range(NBYTES) if got[64 + i] != data[i]), None)\n"
             "assert bad is None, f'CopyTensors " + direction + ": {NBYTES} bytes, byte {bad} expected 0x{data[bad]:02x}, got 0x{got[64 + bad]:02x}'\n"
             "assert got[:64] == got[-64:] == bytes([0xC3] * 64), 'CopyTensors " + direction + " wrote outside the host tensor'\n"
             "print('CopyTensors " + direction + " delivered the bytes')")
    return ctx.snippets.script(f"CopyTensors {direction} through the C API delivers the bytes exactly", body)
