"""Guard memory: host arrays the kit hands to onnxruntime, with canary bytes around them.

A copy that writes one element past its destination, or reads past its source, corrupts or
reads memory the kit cannot otherwise see: numpy's allocation has slack, so nothing crashes and
the values compared look right. A `GuardedArray` puts the array in the middle of a larger buffer
whose other bytes hold a known canary pattern:

    guarded = GuardedArray(np.float32, (2, 3))      # canaries on both sides
    guarded.array[...] = values                     # .array is a plain numpy view
    ort.copy_tensors([device_value], [ort.OrtValue.ortvalue_from_numpy(guarded.array)], None)
    for overrun in guarded.check():                 # [] when the canaries are intact
        print(overrun.describe())                   # "wrote 4 bytes after the end (at +24)"

A destination shows a write past either end; a source shows a read past its end only in what
the read delivered (canary bytes in the result), which the caller's byte comparison sees.
`step=2` lays the array out as every other element of its last dimension, canaries in the
gaps: a copy that treats a strided source as contiguous reads canaries, and a strided
destination written as contiguous shows in `check()` as writes into the gaps.

Only numpy is imported: any part of the kit, or another tool, may use it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_CANARY = 0xC3  # unlike the kit's destination sentinels (0x5A, 0xA5) and common fill values
DEFAULT_MARGIN = 64  # bytes on each side: a whole cache line, more than one element of any type
ALIGNMENT = 64  # the array starts this aligned, as an allocator's buffer would


@dataclass(frozen=True)
class Overrun:
    """Canary bytes that changed. `side` is "before" (offset < 0), "after" (offset ≥ the
    array's size) or "gap" (between the elements of a strided array); `offset` is the first
    changed byte's position relative to the array's first byte, `count` how many changed.
    "record" (offset 0): `count` of the guard's own arrays no longer have the size they were
    made with, which only a write into the process's memory elsewhere (a copy landing after
    its call returned, into memory since reused) can do."""

    side: str
    offset: int
    count: int

    def describe(self) -> str:
        if self.side == "record":
            return (f"overwrote {self.count} of the guard's own records of its buffer (their sizes changed): "
                    "memory of the process outside the buffer was written")
        where = {"before": "before the start", "after": "after the end", "gap": "between the elements"}[self.side]
        return f"wrote {self.count} byte{'s' * (self.count != 1)} {where} (at {self.offset:+d})"


def canary_pattern(canary: int, nbytes: int, start: int = 0) -> np.ndarray:
    """The canary bytes of `nbytes` from position `start` of a buffer: `canary` XOR the byte's
    position modulo 256, so that a shifted copy of canaries is no canary, and no element type
    reads it as zero."""
    return (np.arange(start, start + nbytes, dtype=np.int64) % 256).astype(np.uint8) ^ np.uint8(canary)


class GuardedArray:
    """A C-ordered numpy array of `dtype` and `shape` (`step` > 1: every `step`-th element of
    the last dimension of a wider one) between `margin_bytes` of canaries on each side.
    `.array` is the view to hand out; `.check()` lists what changed around it. Its elements
    start as whatever the allocation held: fill them (`.array[...] = values`, or
    `GuardedArray.holding`)."""

    def __init__(self, dtype, shape: tuple[int, ...], *, canary: int = DEFAULT_CANARY, margin_bytes: int = DEFAULT_MARGIN,
                 step: int = 1):
        self.dtype, self.shape, self.step = np.dtype(dtype), tuple(shape), step
        if self.dtype.hasobject:
            raise ValueError("an object array holds pointers, not its values: nothing to guard")
        if step < 1 or (step > 1 and not self.shape):
            raise ValueError(f"step {step} needs a last dimension to stride along (shape {self.shape})")
        wide_shape = self.shape[:-1] + (self.shape[-1] * step,) if step > 1 else self.shape
        span = int(np.prod(wide_shape, dtype=np.int64)) * self.dtype.itemsize
        self.before = -(-margin_bytes // ALIGNMENT) * ALIGNMENT
        self.raw = np.empty(self.before + span + margin_bytes + ALIGNMENT, dtype=np.uint8)
        start = (-self.raw.ctypes.data) % ALIGNMENT  # numpy aligns to 16 at most
        self.buffer = self.raw[start:start + self.before + span + margin_bytes]
        # canaries where they are compared: the margins, and a strided array's whole span (its
        # gaps); a contiguous array's elements are left as allocated, for the caller to fill
        end = self.before + span
        self.buffer[:self.before] = canary_pattern(canary, self.before)
        self.buffer[end:] = canary_pattern(canary, self.buffer.size - end, end)
        if step > 1:
            self.buffer[self.before:end] = canary_pattern(canary, span, self.before)
        wide = self.buffer[self.before:self.before + span].view(self.dtype).reshape(wide_shape)
        self.array: np.ndarray = wide[..., ::step] if step > 1 else wide
        self._span, self._canary, self._used, self._margin = span, canary, span, margin_bytes
        # what the canaries hold, kept only where they are compared: a contiguous array's
        # elements are not canaries, so a 64 MiB one costs no 64 MiB copy to check
        self._margins = self.buffer[:self.before].copy(), self.buffer[self.before + span:].copy()
        self._gaps = self.buffer[self.before:self.before + span].copy() if step > 1 else None

    @classmethod
    def holding(cls, values: np.ndarray, *, writeable: bool = True, **options) -> GuardedArray:
        """A guarded array holding a copy of `values` (read-only if not `writeable`)."""
        guarded = cls(values.dtype, values.shape, **options)
        guarded.array[...] = values
        guarded.array.flags.writeable = writeable
        return guarded

    def guard_tail(self, used_bytes: int) -> None:
        """Only the first `used_bytes` of the array are the tensor's: the rest become canaries,
        checked as "after" (4-bit types, whose storage holds one element a byte while the
        tensor packs two a byte). Call it once the array is filled."""
        if self.step > 1 or not 0 <= used_bytes <= self._span:
            raise ValueError(f"a tail guard needs a contiguous array and 0 <= {used_bytes} <= {self._span}")
        start = self.before + used_bytes
        self.buffer[start:self.before + self._span] = canary_pattern(self._canary, self._span - used_bytes, start)
        self._used = used_bytes
        self._margins = self._margins[0], self.buffer[start:].copy()

    @property
    def address(self) -> int:
        """The address of the array's first element, as data_ptr() of a value over it reads."""
        return self.array.ctypes.data

    def check(self) -> list[Overrun]:
        """Each guarded region whose canaries changed: before, gaps (strided arrays), after; or,
        where the guard's own arrays changed size, that alone (comparing them would compare
        memory that is not theirs, or fail in numpy)."""
        before, after = self._margins
        total = self.before + self._span + self._margin  # sizes from plain integers, not from the arrays checked
        records = [(self.buffer, total), (before, self.before), (after, total - self.before - self._used)]
        if self._gaps is not None:
            records.append((self._gaps, self._span))
        if changed := sum(record.ndim != 1 or record.size != size for record, size in records):
            return [Overrun("record", 0, changed)]
        found = [self._region("before", self.buffer[:self.before] != before, -self.before)]
        if self._gaps is not None:
            inside = self.buffer[self.before:self.before + self._span] != self._gaps
            # each group of `step` elements starts with one of the array's, then its gaps
            inside.reshape(-1, self.step * self.dtype.itemsize)[:, :self.dtype.itemsize] = False
            found.append(self._region("gap", inside, 0))
        found.append(self._region("after", self.buffer[self.before + self._used:] != after, self._used))
        return [overrun for overrun in found if overrun]

    def _region(self, side: str, changed: np.ndarray, origin: int) -> Overrun | None:
        where = np.flatnonzero(changed)
        return Overrun(side, origin + int(where[0]), int(where.size)) if where.size else None
