"""Element types, test values and byte-level comparison.

Every tensor the checks move is described by its raw bytes: a numpy *storage* array holds them
(float32 for float32, uint16 for bfloat16, uint8 for the float8 and 4-bit types) and onnx's
element type id says what they mean. Comparisons are byte-exact, so NaN payloads, negative zero
and subnormals must survive a copy unchanged.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

# onnx's element type ids (TensorProto.DataType), fixed by the ONNX standard. Written here rather
# than imported, so that a worker whose models are all cached never imports onnx (about 40 ms of
# its start); tests/test_tensors.py checks them against onnx.
ONNX_TYPE_IDS = {
    "float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6, "int64": 7, "string": 8, "bool": 9,
    "float16": 10, "float64": 11, "uint32": 12, "uint64": 13, "bfloat16": 16, "float8e4m3fn": 17,
    "float8e4m3fnuz": 18, "float8e5m2": 19, "float8e5m2fnuz": 20, "uint4": 21, "int4": 22,
}


@dataclass(frozen=True)
class DType:
    name: str
    onnx_type: int
    storage: np.dtype
    numpy_native: bool  # numpy has this type, so ortvalue_from_numpy works directly
    bits: int

    def nbytes(self, count: int) -> int:
        return (count * self.bits + 7) // 8


def _dt(name: str, storage: Any, native: bool, bits: int) -> DType:
    return DType(name, ONNX_TYPE_IDS[name], np.dtype(storage), native, bits)


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        _dt("float32", np.float32, True, 32),
        _dt("float64", np.float64, True, 64),
        _dt("float16", np.float16, True, 16),
        _dt("bfloat16", np.uint16, False, 16),
        _dt("float8e4m3fn", np.uint8, False, 8),
        _dt("float8e4m3fnuz", np.uint8, False, 8),
        _dt("float8e5m2", np.uint8, False, 8),
        _dt("float8e5m2fnuz", np.uint8, False, 8),
        _dt("int4", np.uint8, False, 4),
        _dt("uint4", np.uint8, False, 4),
        _dt("int8", np.int8, True, 8),
        _dt("int16", np.int16, True, 16),
        _dt("int32", np.int32, True, 32),
        _dt("int64", np.int64, True, 64),
        _dt("uint8", np.uint8, True, 8),
        _dt("uint16", np.uint16, True, 16),
        _dt("uint32", np.uint32, True, 32),
        _dt("uint64", np.uint64, True, 64),
        _dt("bool", np.bool_, True, 8),
        _dt("string", np.object_, True, 0),
    )
}

MIB = 1 << 20
_SHAPE = re.compile(r"^(scalar|[0-9]+(x[0-9]+)*|[0-9]+MiB)$")


def parse_shape(text: str, dtype: DType) -> tuple[int, ...]:
    """'scalar' → (), '3x5' → (3, 5), '64MiB' → a 1-D shape of at least that many bytes."""
    if not _SHAPE.match(text):
        raise ValueError(f"not a shape: {text!r}")
    if text == "scalar":
        return ()
    if text.endswith("MiB"):
        nbytes = int(text[:-3]) * MIB
        return (math.ceil(nbytes * 8 / (dtype.bits or 8)),)  # strings: one element per byte
    return tuple(int(n) for n in text.split("x"))


def element_count(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


# Special values, as raw bit patterns of the storage type, placed at the start of every sample.
_FLOAT_SPECIALS = {
    "float32": [0x7FC00001, 0xFFC12345, 0x80000000, 0x7F800000, 0xFF800000, 0x00000001, 0x007FFFFF, 0x7F7FFFFF, 0xFF7FFFFF],
    "float64": [0x7FF8000000000001, 0xFFF0000000000002, 0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000, 0x1, 0x000FFFFFFFFFFFFF],
    "float16": [0x7E01, 0xFD02, 0x8000, 0x7C00, 0xFC00, 0x0001, 0x03FF, 0x7BFF],
    "bfloat16": [0x7FC1, 0xFFA1, 0x8000, 0x7F80, 0xFF80, 0x0001, 0x007F, 0x7F7F],
}
_BIT_VIEW = {4: np.uint32, 8: np.uint64, 2: np.uint16}


def sample(dtype: DType, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Deterministic test data of `shape`: special values first, then pseudo-random bytes."""
    count = element_count(shape)
    rng = np.random.default_rng(seed)
    if dtype.name == "string":
        return np.array([f"s{i}-\u00e9\u4e2d" * (i % 3) for i in range(count)], dtype=object).reshape(shape)
    if dtype.name == "bool":
        return (rng.integers(0, 2, size=count, dtype=np.uint8).astype(np.bool_)).reshape(shape)
    if dtype.bits == 4:
        # One element per storage byte, as onnxruntime wraps it; only the packed bytes matter.
        raw = rng.integers(0, 256, size=count, dtype=np.uint8)
        return raw.reshape(shape)
    values = _random_bytes(rng, count * dtype.storage.itemsize).view(dtype.storage)
    if dtype.storage.kind in "iu":
        info = np.iinfo(dtype.storage)
        specials = np.array([info.min, info.max, 0, 1, info.max - 1], dtype=dtype.storage)
        values[: min(count, len(specials))] = specials[: min(count, len(specials))]
    bits = _FLOAT_SPECIALS.get(dtype.name)
    if bits:
        view = values.view(_BIT_VIEW[dtype.storage.itemsize])
        n = min(count, len(bits))
        view[:n] = np.array(bits[:n], dtype=view.dtype)
    return values.reshape(shape)


_BLOCK_WORDS = 1 << 17  # 1 MiB of 64-bit words
_BLOCK_KEY = np.uint64(0x9E3779B97F4A7C15)  # odd: block numbers times it are distinct


def _random_bytes(rng: np.random.Generator, nbytes: int) -> np.ndarray:
    """`nbytes` pseudo-random bytes, drawn as 64-bit words (3 times faster than byte by byte),
    in a fresh array aligned for any element type. Past 1 MiB, one drawn MiB is repeated, each
    repeat XORed with its block number times an odd constant: every 8-byte word still differs
    from the others, so bytes copied to the wrong place show, and a 64 MiB sample takes 4 ms
    instead of the 16 ms of drawing it all (the largest single cost of that check)."""
    words = -(-nbytes // 8)
    drawn = rng.integers(0, np.iinfo(np.uint64).max, size=min(words, _BLOCK_WORDS), dtype=np.uint64, endpoint=True)
    if words > _BLOCK_WORDS:
        keys = np.arange(-(-words // _BLOCK_WORDS), dtype=np.uint64) * _BLOCK_KEY
        drawn = (drawn[None, :] ^ keys[:, None]).reshape(-1)[:words]
    return drawn.view(np.uint8)[:nbytes]


def sentinel(dtype: DType, shape: tuple[int, ...], byte: int) -> np.ndarray:
    """A storage array filled with one byte pattern: a copy that did nothing leaves it visible."""
    if dtype.name == "string":
        return np.array(["\u2020sentinel"] * element_count(shape), dtype=object).reshape(shape)
    if dtype.name == "bool":
        return np.full(shape, bool(byte & 1), dtype=np.bool_)
    array = np.empty(shape, dtype=dtype.storage)
    array.reshape(-1).view(np.uint8)[:] = byte
    return array


def payload(array: np.ndarray, dtype: DType) -> np.ndarray | list[str]:
    """The bytes a copy must preserve, as a read-only uint8 view of `array` (a copy only where
    `array` is not contiguous), so that comparing 64 MiB costs no copy of it; strings: the list
    of values. The view shows later writes to `array`: compare it before changing `array`."""
    if dtype.name == "string":
        return [str(x) for x in array.reshape(-1)]
    data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    data.flags.writeable = False
    if dtype.bits == 4:
        return data[: dtype.nbytes(array.size)]
    return data


def unlike_made(dtype: DType, shape: tuple[int, ...], seen_shape: Any, seen_nbytes: Any) -> str:
    """How a value the kit made as `dtype` `shape` reads back otherwise ('' when it does not):
    its shape (`seen_shape`) and byte size (`seen_nbytes`) as onnxruntime reports them after
    an EP call. Checked before numpy or ctypes builds anything on them: a copy that landed after
    it returned may have overwritten the records they come from, and a size read from there
    would make the kit read or compare past the value's memory."""
    try:
        seen = tuple(int(d) for d in seen_shape)
    except (TypeError, ValueError):
        return f"its shape reads {seen_shape!r}, not a shape"
    if seen != tuple(shape):
        return f"its shape reads {list(seen)}, made {list(shape)}"
    if dtype.name != "string" and seen_nbytes != dtype.nbytes(element_count(shape)):
        return f"its byte size reads {seen_nbytes!r}, made {dtype.nbytes(element_count(shape))} ({dtype.name} {list(shape)})"
    return ""


@dataclass(frozen=True)
class ByteDiff:
    total: int
    differing: int
    first: list[tuple[int, int, int]]  # (offset, expected byte, actual byte)

    def describe(self) -> str:
        shown = ", ".join(f"@{off}: expected 0x{exp:02x} got 0x{act:02x}" for off, exp, act in self.first)
        return f"{self.differing} of {self.total} bytes differ; first: {shown}"


Bytes = bytes | np.ndarray  # raw bytes, or a uint8 array (what payload() gives)


def compare(expected: Bytes | list[str], actual: Bytes | list[str], limit: int = 5) -> ByteDiff | None:
    """None when equal; otherwise where the bytes (or strings) first differ."""
    if isinstance(expected, list) or isinstance(actual, list):
        if expected == actual:
            return None
        pairs = list(zip(expected, actual, strict=False))
        first = [(i, 0, 0) for i, (a, b) in enumerate(pairs) if a != b][:limit]
        return ByteDiff(len(expected), sum(a != b for a, b in pairs) + abs(len(expected) - len(actual)), first)
    exp, act = _uint8(expected), _uint8(actual)
    if _equal(exp, act):
        return None
    n = min(len(exp), len(act))
    where = np.flatnonzero(exp[:n] != act[:n])
    differing = int(where.size) + abs(len(exp) - len(act))
    first = [(int(i), int(exp[i]), int(act[i])) for i in where[:limit]]
    return ByteDiff(len(exp), differing, first)


def _uint8(data: Bytes) -> np.ndarray:
    return data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Byte equality without copying either side: the bulk compared as 64-bit words (eight
    times fewer elements, about 3 ms for 64 MiB against 11 ms byte by byte), then the tail."""
    if a.size != b.size:
        return False
    bulk = a.size - a.size % 8
    return np.array_equal(a[:bulk].view(np.uint64), b[:bulk].view(np.uint64)) and np.array_equal(a[bulk:], b[bulk:])


def shape_label(shape: tuple[int, ...]) -> str:
    return "scalar" if shape == () else "x".join(map(str, shape))
