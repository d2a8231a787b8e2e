"""What the size family copies and where it looks: the large tensors, the bytes a source holds,
and the regions of a destination that are compared.

The large tensors are sized from the two boundaries a 32-bit count breaks at (`INT32_BOUNDARY`,
`UINT32_BOUNDARY`), a few bytes past them and odd on purpose, so that a byte or element count
that passed through an int32 or a uint32 truncates, wraps or turns negative. The kit's tests
shrink the boundaries to see the logic work without gigabytes.

A source's bytes (`pattern`) are a 64 KiB table of random bytes XOR a tag per 64 KiB block; the
tags of blocks 2^31 and 2^32 bytes apart differ, so a copy that reads from an offset wrapped at
either boundary delivers other bytes, and so does one shifted by any amount.

In the bounded form a destination is compared where a 32-bit count shows (`regions`): its head,
both sides of each boundary it passes, its middle, pages spread over it, its tail up to its last
byte, and the bytes just past its end, which must stay as they were; under a soak every byte.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from conformance.checks.size_room import size_text
from conformance.testbed import tensors

INT32_BOUNDARY = 1 << 31  # a byte or element count at or past it is negative in an int32
UINT32_BOUNDARY = 1 << 32  # ... and wraps to a small number in a uint32

TABLE_BYTES = 1 << 16
WINDOW = 256 << 10  # bytes compared on each side of a boundary, and at the head, middle and tail
SAMPLES = 16  # pages spread over the tensor
SAMPLE_BYTES = 64 << 10
CHUNK = 16 << 20  # the most bytes staged at once between the host and the device
PAST_END = 4096  # bytes just past a destination that must stay unchanged (where the memory holds them)


@dataclass(frozen=True)
class LargeTensor:
    """One tensor of the large case: its element type and count, and the bytes it takes."""

    dtype: str
    count: int

    @property
    def nbytes(self) -> int:
        return tensors.DTYPES[self.dtype].nbytes(self.count)

    @property
    def half_used_last_byte(self) -> bool:
        """A 4-bit tensor of an odd count: its last byte's high nibble is no element's."""
        return tensors.DTYPES[self.dtype].bits == 4 and self.count % 2 == 1

    def describe(self) -> str:
        return f"{self.dtype} [{self.count}] ({size_text(self.nbytes)})"


def large_tensors() -> list[LargeTensor]:
    """A uint8 tensor of 4 GiB + 4 KiB + 3 bytes (byte and element counts past both boundaries),
    and an int4 tensor of 2^32 + 8197 elements (its element count past the uint32 boundary, its
    2 GiB + 4 KiB + 3 bytes past the int32 one, its last byte half used). Read at each call: the
    tests shrink the boundaries."""
    return [LargeTensor("uint8", UINT32_BOUNDARY + 4096 + 3), LargeTensor("int4", UINT32_BOUNDARY + 8192 + 5)]


def boundaries_within(nbytes: int) -> list[int]:
    return [b for b in (INT32_BOUNDARY, UINT32_BOUNDARY) if b < nbytes]


def pattern(start: int, count: int, seed: int) -> np.ndarray:
    """The `count` source bytes from position `start` of a tensor filled with `seed`."""
    if count <= 0:
        return np.empty(0, np.uint8)
    table = np.random.default_rng(seed).integers(0, 256, TABLE_BYTES, dtype=np.uint8)
    first, last = start // TABLE_BYTES, (start + count - 1) // TABLE_BYTES
    blocks = np.arange(first, last + 1, dtype=np.int64)
    # blocks 2^15 apart (2^31 bytes) differ by 101 in their tag, 2^16 apart by 202: never 0 mod 256
    tags = ((blocks * 37 + (blocks >> 15) * 101 + seed) & 0xFF).astype(np.uint8)
    spread = (table[None, :] ^ tags[:, None]).reshape(-1)
    offset = start - first * TABLE_BYTES
    return spread[offset:offset + count]


@dataclass(frozen=True)
class Region:
    """Bytes of a destination compared after a copy: `start` and `length` from the tensor's first
    byte; `inside`: the tensor's own bytes (they must equal the source's), else bytes past its
    end (they must be as they were)."""

    start: int
    length: int
    inside: bool = True

    @property
    def end(self) -> int:
        return self.start + self.length


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged if end > start]


def regions(nbytes: int, *, every_byte: bool, past_end: int) -> list[Region]:
    """Where a destination of `nbytes` is compared: every byte in chunks (`every_byte`), else the
    head, both sides of each boundary, the middle, `SAMPLES` pages, and the tail; then the
    `past_end` bytes after it (as many as the memory around it holds), which must be unchanged.
    Each region is at most `CHUNK` bytes."""
    if every_byte:
        spans = [(0, nbytes)]
    else:
        spans = [(0, WINDOW), (nbytes // 2 - WINDOW // 2, nbytes // 2 + WINDOW // 2), (nbytes - WINDOW, nbytes)]
        spans += [(b - WINDOW, b + WINDOW) for b in boundaries_within(nbytes)]
        for index in range(SAMPLES):  # deterministic, spread, page-aligned
            at = (nbytes * (2 * index + 1) // (2 * SAMPLES)) // 4096 * 4096
            spans.append((at, at + SAMPLE_BYTES))
        spans = [(max(0, start), min(nbytes, end)) for start, end in spans]
    found = [Region(start, min(CHUNK, end - start)) for span_start, span_end in _merged(spans)
             for start in range(span_start, span_end, CHUNK) for end in (span_end,)]
    if past_end > 0:
        found.append(Region(nbytes, past_end, inside=False))
    return found


def compared_bytes(found: list[Region]) -> int:
    return sum(region.length for region in found)
