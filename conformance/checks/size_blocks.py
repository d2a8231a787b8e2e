"""The size family's memory, on the C path: blocks of the EP device's DEFAULT memory (tensors of
bytes from the C environment's shared allocator, a guard of canary bytes on each side) and of
host memory (mapped by the kit, with the same guards), a tensor of any element type over the start of a block, and
bytes written into and read out of any part of a block in chunks, each chunk through a small
tensor over that part (CreateTensorWithDataAsOrtValue with the block's memory info at an offset):
the kit holds no more than a chunk of a device tensor in its own memory, and sees the bytes
around a destination in device memory as well as in host memory.

Where the EP's DEFAULT data pointers are handles rather than addresses (`size_probe`), no
tensor can be placed at an offset in device memory: `DeviceTensor` is then a DEFAULT tensor the
shared allocator makes with the element type and count copied, filled and read whole.

`copy_pair` is the copy a check judges (the kit's tests put stand-ins there); the chunks go
through `capi.copy_tensors` itself, as the means of seeing it, in host buffers that are guarded
too (`CPath.staging_overruns`).
"""

from __future__ import annotations

import ctypes
import mmap
import time
from typing import Any

import numpy as np

from conformance.calls import Call
from conformance.findings import NotApplicable, NotRun
from conformance.checks.size_plan import CHUNK
from conformance.testbed.guard import DEFAULT_CANARY, GuardedArray, canary_pattern
from conformance.testbed.interop import capi as C

ELEMENT_TYPES = {**C.ELEMENT_TYPES, "uint4": 21, "int4": 22}  # ONNXTensorElementDataType
GUARD = 256  # canary bytes on each side of a block, host or device: an arena's alignment
READ_SENTINEL = 0xA5  # what a staging buffer holds before a device chunk is read into it


def canaries(start: int, length: int) -> np.ndarray:
    """A guard's bytes at positions start.. from a block's first byte (negative: before it), laid
    out as guard.py lays them out from the start of the guard before the block."""
    return canary_pattern(DEFAULT_CANARY, length, start + GUARD)


def copy_pair(api: C.CApi, env: C.Environment, source: Any, destination: Any) -> None:
    """CopyTensors of one pair: the copy under judgement."""
    C.copy_tensors(api, env, [source], [destination])


class Ticker:
    """Announces a long loop's step to the worker at most once a second (its timeout counts
    from the last announcement; one per call would flood the pipe)."""

    def __init__(self, ctx):
        self.ctx, self.last = ctx, 0.0

    def __call__(self, step: str) -> None:
        now = time.monotonic()
        if now - self.last >= 1.0:
            self.ctx.attempt(step)
            self.last = now


class CPath:
    """The C objects of one case: the EP device's DEFAULT memory info and its shared allocator,
    and every block and tensor made, released by `close`."""

    def __init__(self, ctx, api: C.CApi, env: C.Environment, device: int):
        self.ctx, self.api, self.env = ctx, api, env
        info = api.call("EpDevice_MemoryInfo", ctypes.c_void_p(device), 0)
        if not info:
            raise NotApplicable("the EP device advertises no DEFAULT memory: no device end to copy to")
        self.info = ctypes.c_void_p(info)
        allocator = ctypes.c_void_p()
        api.call("GetSharedAllocator", env.env, self.info, ctypes.byref(allocator))
        if not allocator.value:
            raise NotRun("the C environment has no shared allocator for the EP device's DEFAULT memory")
        self.allocator = allocator
        self.tick = Ticker(ctx)
        self.staging_overruns: list[str] = []
        self._values: list[ctypes.c_void_p] = []
        self._blocks: list[DeviceBlock | HostBlock | DeviceTensor] = []

    def allocator_caps(self) -> dict[str, int]:
        """What the shared allocator's statistics say caps an allocation ('Limit', 'MaxAllocSize'),
        where it reports them (above 0); {} where it reports none or has no statistics."""
        try:
            stats = C.allocator_stats(self.api, self.allocator) or {}
        except C.OrtError:
            return {}
        return {name: int(stats[name]) for name in ("Limit", "MaxAllocSize") if stats.get(name, "").isdigit() and int(stats[name]) > 0}

    def tensor_at(self, address: int, nbytes: int, element_type: int, shape: tuple[int, ...], *, device: bool) -> ctypes.c_void_p:
        """A tensor over the `nbytes` at `address` (no copy), in DEFAULT memory or CPU memory."""
        if not device:
            value = C.cpu_tensor_at(self.api, address, nbytes, shape, element_type)
        else:
            dims = (ctypes.c_int64 * len(shape))(*shape)
            value = ctypes.c_void_p()
            self.api.call("CreateTensorWithDataAsOrtValue", self.info, ctypes.c_void_p(address), nbytes, dims, len(shape), element_type,
                          ctypes.byref(value))
        self._values.append(value)
        return value

    def size_of(self, value: Any) -> int:
        """GetTensorSizeInBytes: what onnxruntime says the tensor's bytes are."""
        size = ctypes.c_size_t()
        self.api.call("GetTensorSizeInBytes", value, ctypes.byref(size))
        return size.value

    def release(self, value: Any) -> None:
        """Releases a value `tensor_at` made; a `DeviceTensor`'s own value, which its `tensor` lends, goes with the block."""
        if value in self._values:
            self._values.remove(value)
            self.api.call("ReleaseValue", value)

    def device_block(self, size: int, note: str = "") -> "DeviceBlock":
        block = DeviceBlock(self, size, note)
        self._blocks.append(block)
        return block

    def host_block(self, size: int) -> "HostBlock":
        block = HostBlock(self, size)
        self._blocks.append(block)
        return block

    def device_tensor(self, element_type: int, count: int, nbytes: int, note: str = "") -> "DeviceTensor":
        block = DeviceTensor(self, element_type, count, nbytes, note)
        self._blocks.append(block)
        return block

    def free(self, block: "DeviceBlock | HostBlock | DeviceTensor") -> None:
        if block in self._blocks:
            self._blocks.remove(block)
        block.close()

    def close(self) -> None:
        for value in list(self._values):
            self.release(value)
        for block in list(self._blocks):
            self.free(block)

    def stage(self, source: Any, destination: Any) -> None:
        """A copy that fills or reads a block: the means, not the copy judged."""
        C.copy_tensors(self.api, self.env, [source], [destination])

    def staging(self, what: str, direction: str) -> Any:
        """Around a loop of chunk copies (`what` they do, the first of them in `direction`):
        announced once, as one call in flight, not once a chunk. The call is CopyTensors in that
        direction, as the functional tier's C-path copies are: one that crashed there is not made
        again here (the quarantine knows calls by kind and direction)."""
        self.ctx.attempt(f"{what}, a chunk at a time")
        return self.ctx.calling(Call("CopyTensors", direction))

    def check_staging(self, staging: GuardedArray, role: str) -> None:
        for overrun in staging.check():
            self.staging_overruns.append(f"{role}: {overrun.describe()}")


class HostBlock:
    """`size` bytes of host memory between GUARD canary bytes on each side, mapped by the kit
    itself (anonymous mmap): the OS gives a page when it is first touched, a page no one wrote
    costs nothing to read, and numpy's large-array allocation, which asks for huge pages (and so,
    where the kernel defragments on demand, can stall on compaction), is not in the way."""

    device = False
    guard = GUARD

    def __init__(self, path: CPath, size: int):
        self.path, self.size = path, size
        self._map: mmap.mmap | None = mmap.mmap(-1, size + 2 * GUARD)
        self._bytes: np.ndarray | None = np.frombuffer(self._map, np.uint8)
        self._bytes[:GUARD] = canaries(-GUARD, GUARD)
        self._bytes[GUARD + size:] = canaries(size, GUARD)

    @property
    def array(self) -> np.ndarray:
        assert self._bytes is not None, "the block was freed"
        return self._bytes[GUARD:GUARD + self.size]

    def tensor(self, element_type: int, count: int, nbytes: int) -> ctypes.c_void_p:
        return self.path.tensor_at(self.array.ctypes.data, nbytes, element_type, (count,), device=False)

    def write(self, offset: int, data: np.ndarray, what: str = "") -> None:
        self.array[offset:offset + data.size] = data

    def fill(self, byte: int, what: str) -> None:
        """Every byte set to `byte`, a chunk at a time: the OS gives the pages now, announced, and
        not one by one inside a copy into the block (a single call that could outlast the
        worker's timeout)."""
        for at in range(0, self.size, CHUNK):
            self.path.tick(f"setting every byte of {what}")
            self.array[at:at + CHUNK] = byte

    def read(self, offset: int, length: int, what: str = "") -> np.ndarray:
        return self.array[offset:offset + length].copy()

    def outside(self) -> list[str]:
        """What was written into the guards since they were last looked at (laid again once seen)."""
        assert self._bytes is not None, "the block was freed"
        found = []
        for side, start, guard in (("before the start", -GUARD, self._bytes[:GUARD]), ("after the end", self.size, self._bytes[GUARD + self.size:])):
            changed = np.flatnonzero(guard != canaries(start, GUARD))
            if changed.size:
                found.append(f"wrote {changed.size} byte{'s' * (changed.size != 1)} {side} (at {start + int(changed[0]):+d})")
                guard[...] = canaries(start, GUARD)
        return found

    def close(self) -> None:
        if self._map is not None:
            self._bytes = None  # the map cannot close while an array exports its buffer
            self._map.close()
            self._map = None


class DeviceBlock:
    """`size` bytes of the EP device's DEFAULT memory, the start of a tensor of GUARD +
    size + GUARD bytes from the shared allocator, with canaries in both guards."""

    device = True
    guard = GUARD

    def __init__(self, path: CPath, size: int, note: str = ""):
        self.path, self.size = path, size
        total = size + 2 * GUARD
        dims = (ctypes.c_int64 * 1)(total)
        value = ctypes.c_void_p()
        with path.ctx.calling(Call("CreateTensorAsOrtValue", "default", note or f"{total} bytes")):
            path.api.call("CreateTensorAsOrtValue", path.allocator, dims, 1, ELEMENT_TYPES["uint8"], ctypes.byref(value))
        self.value: ctypes.c_void_p | None = value
        self.start = C.data_address(path.api, value) + GUARD
        with path.staging("filling the guard bytes of a block of device memory", "cpu>default"):
            self.write(-GUARD, canaries(-GUARD, GUARD), "the guard before the block")
            self.write(size, canaries(size, GUARD), "the guard after the block")

    def tensor(self, element_type: int, count: int, nbytes: int) -> ctypes.c_void_p:
        return self.path.tensor_at(self.start, nbytes, element_type, (count,), device=True)

    def _view(self, offset: int, length: int) -> ctypes.c_void_p:
        if not -GUARD <= offset <= offset + length <= self.size + GUARD:
            raise ValueError(f"bytes {offset}..{offset + length} are outside the block of {self.size} bytes and its guards")
        return self.path.tensor_at(self.start + offset, length, ELEMENT_TYPES["uint8"], (length,), device=True)

    def write(self, offset: int, data: np.ndarray, what: str = "") -> None:
        """`data` into the block from `offset` (negative: into the guard before it), a chunk at a time."""
        path = self.path
        for at in range(0, data.size, CHUNK):
            path.tick(f"filling {what or 'device memory'} (cpu>default, a chunk at a time)")
            piece = data[at:at + CHUNK]
            staging = GuardedArray.holding(np.ascontiguousarray(piece, np.uint8))
            source = path.tensor_at(staging.address, piece.size, ELEMENT_TYPES["uint8"], (piece.size,), device=False)
            destination = self._view(offset + at, piece.size)
            try:
                path.stage(source, destination)
            finally:
                path.release(source)
                path.release(destination)
            path.check_staging(staging, f"a host buffer read to fill {what or 'device memory'} (cpu>default)")

    def read(self, offset: int, length: int, what: str = "") -> np.ndarray:
        """The block's bytes from `offset`, as the EP's copy to the CPU delivers them, a chunk at a time."""
        path, out = self.path, np.empty(length, np.uint8)
        for at in range(0, length, CHUNK):
            path.tick(f"reading {what or 'device memory'} back (default>cpu, a chunk at a time)")
            size = min(CHUNK, length - at)
            staging = GuardedArray(np.uint8, (size,))
            staging.array[...] = READ_SENTINEL
            source = self._view(offset + at, size)
            destination = path.tensor_at(staging.address, size, ELEMENT_TYPES["uint8"], (size,), device=False)
            try:
                path.stage(source, destination)
            finally:
                path.release(source)
                path.release(destination)
            path.check_staging(staging, f"a host buffer {what or 'device memory'} was read into (default>cpu)")
            out[at:at + size] = staging.array
        return out

    def outside(self) -> list[str]:
        """What was written into the guards since they were last looked at, as GuardedArray says
        it (a changed guard is laid again, so that each copy is held to what it wrote itself);
        read back through the EP's copies, as every byte of device memory is."""
        found = []
        for side, start in (("before the start", -GUARD), ("after the end", self.size)):
            changed = np.flatnonzero(self.read(start, GUARD, "a guard") != canaries(start, GUARD))
            if changed.size:
                found.append(f"wrote {changed.size} byte{'s' * (changed.size != 1)} {side} (at {start + int(changed[0]):+d})")
                self.write(start, canaries(start, GUARD), "a guard")
        return found

    def close(self) -> None:
        if self.value is not None:
            self.path.api.call("ReleaseValue", self.value)
            self.value = None


class DeviceTensor:
    """A tensor of `count` elements of the EP device's DEFAULT memory made by the shared allocator,
    seen only whole: its data pointer is never offset nor wrapped again, so it holds on an EP
    whose data pointers are handles. No guard bytes in device memory; the bytes are written and
    read by whole-tensor copies with a host tensor of the same type and count."""

    device = True

    def __init__(self, path: CPath, element_type: int, count: int, nbytes: int, note: str = ""):
        self.path, self.element_type, self.count, self.size = path, element_type, count, nbytes
        value = ctypes.c_void_p()
        with path.ctx.calling(Call("CreateTensorAsOrtValue", "default", note or f"{count} elements")):
            path.api.call("CreateTensorAsOrtValue", path.allocator, (ctypes.c_int64 * 1)(count), 1, element_type, ctypes.byref(value))
        self.value: ctypes.c_void_p | None = value

    def tensor(self, element_type: int, count: int, nbytes: int) -> ctypes.c_void_p:
        assert self.value is not None and (element_type, count) == (self.element_type, self.count), "a DEFAULT tensor is used whole"
        return self.value

    def write(self, offset: int, data: np.ndarray, what: str = "") -> None:
        """Every byte at once (`offset` 0, `data` the tensor's size): CopyTensors CPU > DEFAULT of the whole tensor."""
        assert offset == 0 and data.size == self.size, "a DEFAULT tensor is written whole"
        staging = GuardedArray.holding(np.ascontiguousarray(data, np.uint8))
        source = self.path.tensor_at(staging.address, self.size, self.element_type, (self.count,), device=False)
        try:
            self.path.stage(source, self.tensor(self.element_type, self.count, self.size))
        finally:
            self.path.release(source)
        self.path.check_staging(staging, f"a host buffer read to fill {what or 'a DEFAULT tensor'} whole (cpu>default)")

    def read(self, offset: int, length: int, what: str = "") -> np.ndarray:
        """Every byte, by CopyTensors DEFAULT > CPU of the whole tensor."""
        assert offset == 0 and length == self.size, "a DEFAULT tensor is read whole"
        staging = GuardedArray(np.uint8, (self.size,))
        staging.array[...] = READ_SENTINEL
        destination = self.path.tensor_at(staging.address, self.size, self.element_type, (self.count,), device=False)
        try:
            self.path.stage(self.tensor(self.element_type, self.count, self.size), destination)
        finally:
            self.path.release(destination)
        self.path.check_staging(staging, f"a host buffer {what or 'a DEFAULT tensor'} was read into whole (default>cpu)")
        return staging.array.copy()

    def outside(self) -> list[str]:
        return []  # no guard bytes can be placed around it: said in the evidence, not judged

    def close(self) -> None:
        if self.value is not None:
            self.path.api.call("ReleaseValue", self.value)
            self.value = None
