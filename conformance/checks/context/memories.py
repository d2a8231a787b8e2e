"""The EP device's memories and values on them, as a check places, copies and reads them.

Memory kinds are named as the contracts name them: `cpu` (plain CPU memory), `default` (the EP
device's DEFAULT memory; plain CPU memory when it advertises none) and `host_accessible`.
"""

from __future__ import annotations

from collections import Counter

import ctypes

import numpy as np

from conformance.testbed import tensors
from conformance.calls import Call
from conformance.testbed.guard import GuardedArray
from conformance.checks.context.device import DeviceUnderTest
from conformance.checks.context.progress import CallGuard
from conformance.facts import MemoryFacts
from conformance.testbed.eps import memory_label
from conformance.findings import ImpossibleResult, NotApplicable, NotRun, Violation


# The copy_tensors calls that worked in this process, by direction ('cpu>default'): a copy that
# fails after these is an EP that stopped copying after repetition, not one that never could
# (endurance.copies judges it so).
COPIES_WORKED: Counter[str] = Counter()


class Memories:
    def __init__(self, under_test: DeviceUnderTest, guard: CallGuard):
        self.under_test, self.guard = under_test, guard
        # The memory kinds the running check placed, allocated, wrapped or read values in: whose
        # promise a case is depends on them (`only_plain_cpu`). CheckContext.begin clears it.
        self.touched: set[str] = set()
        # The host buffers this check handed to onnxruntime, each between canaries
        # (conformance.testbed.guard), with what it was for: `overruns()` reads them when it ends.
        # A buffer a copy with the EP's own memory wrote past is the EP's defect (its CopyTensors
        # wrote it), whatever the contract's subject: "ep" for those.
        self.guarded: list[tuple[str, str, GuardedArray]] = []

    def only_plain_cpu(self) -> bool:
        """Whether every value the check made was in onnxruntime's plain CPU memory (no memory
        info of the EP device at either end): what is done with them is onnxruntime's own work."""
        return bool(self.touched) and all(self.memory_facts(kind) is None for kind in self.touched)

    # --- guard memory ----------------------------------------------------------------------

    def guarded_copy(self, storage: np.ndarray, role: str, subject: str = "") -> np.ndarray:
        """`storage`'s values in a new host array between canaries, kept for `overruns()`:
        what onnxruntime writes past it, or reads past it into a result, shows."""
        guarded = GuardedArray.holding(storage, writeable=storage.flags.writeable)
        self.watch(guarded, role, subject)
        return guarded.array

    def watch(self, guarded: GuardedArray, role: str, subject: str = "") -> None:
        """Reads `guarded`'s canaries when the check ends, as those of `guarded_copy`."""
        self.guarded.append((role, subject, guarded))

    def overruns(self) -> list[Violation]:
        """A violation for each guarded host buffer whose canaries changed; forgets them all
        (the next check starts with none). Empty buffers and strings are not guarded."""
        found = [Violation(f"a copy wrote outside the host buffer of the {role}: " + "; ".join(o.describe() for o in overruns),
                           expected="the canaries around the buffer unchanged", actual=overruns[0].describe(), subject=subject)
                 for role, subject, guarded in self.guarded if (overruns := guarded.check())]
        self.guarded = []
        return found

    # --- what the memories are -------------------------------------------------------------

    def memory_info(self, kind: str):
        """The OrtMemoryInfo of a memory kind; None means plain CPU memory. A check that asks
        for it works with that memory, even where it allocates through its own call."""
        self.touched.add(kind)
        return self.under_test.memory_info(kind)

    def memory_facts(self, kind: str) -> MemoryFacts | None:
        return None if kind == "cpu" else self.under_test.facts.memory(kind)

    def is_cpu_memory(self, kind: str) -> bool:
        facts = self.memory_facts(kind)
        return facts is None or facts.on_cpu

    def require_memory(self, kind: str) -> None:
        self.touched.add(kind)
        if kind == "host_accessible" and self.memory_facts(kind) is None:
            raise NotApplicable("the EP device advertises no HOST_ACCESSIBLE memory")

    def describe_memory(self, kind: str) -> str:
        return f"{kind}: {memory_label(self.memory_facts(kind))}"

    # --- values on them --------------------------------------------------------------------

    def wrap_cpu(self, storage: np.ndarray, dtype: tensors.DType):
        """A CPU OrtValue over `storage` itself (no copy): what a copy writes into it shows in numpy."""
        ort = self.under_test.ort
        self.touched.add("cpu")
        if dtype.name == "string":
            raise NotApplicable("onnxruntime's Python API creates no OrtValue from a string array")
        if dtype.numpy_native:
            value = ort.OrtValue.ortvalue_from_numpy(storage)
        else:
            value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(storage, dtype.onnx_type)
        if storage.size and value.data_ptr() != storage.ctypes.data:
            raise NotRun("onnxruntime copied the numpy array instead of wrapping it; bytes cannot be observed")
        return value

    def allocate(self, kind: str, dtype: tensors.DType, shape: tuple[int, ...]):
        """A new value in memory `kind`, allocated by onnxruntime from the EP's allocator."""
        ort, info = self.under_test.ort, self.memory_info(kind)
        self.touched.add(kind)
        if info is None:
            return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype.onnx_type)
        self.under_test.require_api("memory_info_alloc", "cannot allocate from an EP memory info")
        with self.guard.calling(Call("allocate", kind)):
            return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype.onnx_type, memory_info=info)

    def copy(self, sources: list, destinations: list, direction: str = "", stream=None, *, note: str = "") -> None:
        """copy_tensors; `direction` ('cpu>default', ...) and `note` ('bad request size-mismatch')
        name the call in flight precisely."""
        self.under_test.require_api("copy_tensors", "has no copy_tensors")
        with self.guard.calling(Call("copy_tensors", direction, note)):
            self.under_test.ort.copy_tensors(sources, destinations, stream)
        COPIES_WORKED[direction] += 1

    def read(self, value, kind: str, dtype: tensors.DType, shape: tuple[int, ...]) -> tensors.Bytes | list[str]:
        """The bytes of `value`: CPU values directly, device values through a copy to a
        CPU buffer pre-filled with a sentinel, so a copy that did nothing cannot look right."""
        self.touched.add(kind)
        if self.is_cpu_memory(kind):
            # The value's shape and size are read back from onnxruntime after EP calls: checked
            # against what the kit made before numpy or ctypes reads that many bytes.
            self._as_made(value, kind, dtype, shape)
            if dtype.numpy_native:
                array = value.numpy()
                if dtype.name != "string" and array.nbytes != dtype.nbytes(tensors.element_count(shape)):
                    self._impossible(kind, dtype, shape, f"numpy() of it holds {array.nbytes} bytes ({array.dtype} {list(array.shape)})")
                return tensors.payload(array, dtype)
            # numpy() has no bfloat16, float8 or 4-bit type: read the CPU buffer the value owns
            # through its data_ptr(), for exactly tensor_size_in_bytes() bytes.
            size = value.tensor_size_in_bytes()
            return ctypes.string_at(value.data_ptr(), size) if size else b""
        landing = self._host(tensors.sentinel(dtype, shape, 0xA5), dtype, kind, f"read of {kind} memory")
        if dtype.bits == 4 and landing.size:
            self.guarded[-1][2].guard_tail(dtype.nbytes(landing.size))  # the packed tensor's bytes, then canaries
        self.copy([value], [self.wrap_cpu(landing, dtype)], f"{kind}>cpu")
        return tensors.payload(landing, dtype)

    def _as_made(self, value, kind: str, dtype: tensors.DType, shape: tuple[int, ...]) -> None:
        """Raises ImpossibleResult where `value` no longer reads as the `dtype` `shape` it was made."""
        nbytes = None if dtype.name == "string" else value.tensor_size_in_bytes()
        if wrong := tensors.unlike_made(dtype, shape, value.shape(), nbytes):
            self._impossible(kind, dtype, shape, wrong)

    def _impossible(self, kind: str, dtype: tensors.DType, shape: tuple[int, ...], wrong: str) -> None:
        made = f"{dtype.name} {list(shape)}"
        raise ImpossibleResult(Violation(f"a value in {kind} memory, made {made}, reads back otherwise after the EP's calls: {wrong}",
                                         expected=f"the value as made ({made}, {dtype.nbytes(tensors.element_count(shape))} bytes)",
                                         actual=wrong, memory={kind: self.memory_facts(kind)} if self.memory_facts(kind) else {}, subject="ep"))

    def place(self, storage: np.ndarray, kind: str, dtype: tensors.DType):
        """A value in memory `kind` holding `storage`'s bytes (device values via copy_tensors)."""
        self.touched.add(kind)
        storage = self._host(storage, dtype, kind, f"value placed in {kind} memory")
        if kind == "cpu" or (self.memory_info(kind) is None):
            return self.wrap_cpu(storage, dtype)
        value = self.allocate(kind, dtype, storage.shape)
        self.copy([self.wrap_cpu(storage, dtype)], [value], f"cpu>{kind}")
        return value

    def _host(self, storage: np.ndarray, dtype: tensors.DType, kind: str, role: str) -> np.ndarray:
        """The host buffer to hand onnxruntime for a copy with memory `kind`: a guarded copy of
        `storage`, where there are bytes to guard (an object array holds pointers, not its strings)."""
        if dtype.name == "string" or not storage.size:
            return storage
        return self.guarded_copy(storage, role, "" if self.is_cpu_memory(kind) else "ep")
