"""Element types, test values and byte-exact comparison."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from conformance.testbed import tensors
from conformance.testbed.tensors import DTYPES, MIB, compare, parse_shape, payload, sample, sentinel

F32 = DTYPES["float32"]


@pytest.mark.parametrize("text, shape", [("scalar", ()), ("0", (0,)), ("1", (1,)), ("3x5", (3, 5)), ("2x3x4x5", (2, 3, 4, 5))])
def test_parse_shape(text, shape):
    assert parse_shape(text, F32) == shape


@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8", "int4", "bool"])
def test_parse_shape_mib_covers_at_least_that_many_bytes(dtype):
    dt = DTYPES[dtype]
    (count,) = parse_shape("64MiB", dt)
    assert dt.nbytes(count) >= 64 * MIB
    # No more elements than needed: one element less no longer fills the last byte.
    assert (count - 1) * dt.bits < 64 * MIB * 8


def test_parse_shape_mib_counts_elements_by_their_size():
    assert parse_shape("1MiB", F32) == (MIB // 4,)
    assert parse_shape("1MiB", DTYPES["float64"]) == (MIB // 8,)


def test_parse_shape_mib_of_a_4_bit_type_holds_two_elements_per_byte():
    assert parse_shape("1MiB", DTYPES["int4"]) == (2 * MIB,)


@pytest.mark.parametrize("text", ["", "3 x 5", "-1", "64MB", "3x", "x3"])
def test_parse_shape_rejects_what_is_not_a_shape(text):
    with pytest.raises(ValueError, match="not a shape"):
        parse_shape(text, F32)


def test_shape_label_round_trips_parse_shape():
    for text in ("scalar", "0", "7x13"):
        assert tensors.shape_label(parse_shape(text, F32)) == text


def test_nbytes_packs_4_bit_types():
    assert DTYPES["int4"].nbytes(3) == 2
    assert DTYPES["uint4"].nbytes(4) == 2
    assert DTYPES["float16"].nbytes(3) == 6


def test_float32_sample_starts_with_special_values():
    bits = sample(F32, (7, 13)).reshape(-1).view(np.uint32)
    assert bits[0] == 0x7FC00001  # a quiet NaN with a payload
    values = sample(F32, (7, 13)).reshape(-1)
    assert np.isnan(values[0])
    assert 0x80000000 in bits  # -0.0
    assert np.isposinf(values).any() and np.isneginf(values).any()
    assert 0x00000001 in bits  # the smallest subnormal


def test_float16_and_bfloat16_samples_carry_nan_payloads():
    assert sample(DTYPES["float16"], (10,)).view(np.uint16)[0] == 0x7E01
    bf16 = sample(DTYPES["bfloat16"], (10,))
    assert bf16.dtype == np.uint16 and bf16[0] == 0x7FC1


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_integer_samples_include_the_extremes(dtype):
    values = sample(DTYPES[dtype], (20,))
    info = np.iinfo(DTYPES[dtype].storage)
    assert values[0] == info.min and values[1] == info.max
    assert values.dtype == DTYPES[dtype].storage


def test_samples_are_deterministic_per_seed():
    assert sample(F32, (50,), seed=1).tobytes() == sample(F32, (50,), seed=1).tobytes()
    assert sample(F32, (50,), seed=1).tobytes() != sample(F32, (50,), seed=2).tobytes()


def test_a_large_sample_has_no_two_equal_words_and_small_ones_are_drawn_as_before():
    large = sample(DTYPES["uint64"], (9 * MIB // 8 + 3,), seed=4)[5:]  # past 1 MiB, a partial block last; after the specials
    assert len(np.unique(large)) == large.size
    # Up to 1 MiB a sample is drawn whole, as it always was: models built from it are unchanged.
    rng = np.random.default_rng(4)
    drawn = rng.integers(0, np.iinfo(np.uint64).max, size=MIB // 8, dtype=np.uint64, endpoint=True)
    assert np.array_equal(sample(DTYPES["uint64"], (MIB // 8,), seed=4)[5:], drawn[5:])  # after the 5 specials


def test_samples_have_the_requested_shape_for_every_dtype():
    for dt in DTYPES.values():
        assert sample(dt, (2, 3)).shape == (2, 3), dt.name
        assert sample(dt, ()).shape == (), dt.name
        assert sample(dt, (0,)).size == 0, dt.name


def test_a_short_sample_keeps_only_as_many_specials_as_fit():
    assert sample(F32, (1,)).view(np.uint32)[0] == 0x7FC00001
    assert sample(DTYPES["int8"], (1,))[0] == -128


def test_string_sample_has_non_ascii_values():
    values = sample(DTYPES["string"], (6,))
    assert values.dtype == object
    assert any("\u4e2d" in v for v in values)


def test_compare_equal_is_none():
    assert compare(b"abc", b"abc") is None
    assert compare(["a", "b"], ["a", "b"]) is None


def test_compare_reports_first_differing_offsets_and_values():
    expected = bytes(range(16))
    actual = bytearray(expected)
    actual[3], actual[9] = 0xFF, 0xEE
    diff = compare(expected, bytes(actual))
    assert diff.total == 16 and diff.differing == 2
    assert diff.first == [(3, 3, 0xFF), (9, 9, 0xEE)]
    assert diff.describe() == "2 of 16 bytes differ; first: @3: expected 0x03 got 0xff, @9: expected 0x09 got 0xee"


def test_compare_limits_how_many_differences_it_lists():
    diff = compare(bytes(100), bytes([1]) * 100, limit=3)
    assert diff.differing == 100 and [off for off, _, _ in diff.first] == [0, 1, 2]


def test_compare_counts_a_length_difference():
    diff = compare(b"abcd", b"ab")
    assert diff is not None and diff.differing == 2 and diff.first == []


def test_compare_sees_a_changed_nan_payload():
    a = sample(F32, (4,))
    b = a.copy()
    b.view(np.uint32)[0] = 0x7FC00000  # still NaN, other payload
    diff = compare(payload(a, F32), payload(b, F32))
    assert diff is not None and diff.first[0][0] == 0


def test_compare_strings_reports_differing_indexes():
    diff = compare(["a", "b", "c"], ["a", "x", "c"])
    assert diff.differing == 1 and diff.first == [(1, 0, 0)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "int4", "int16", "uint8"])
def test_sentinel_fills_every_byte(dtype):
    dt = DTYPES[dtype]
    filled = sentinel(dt, (3, 5), 0xA5)
    assert filled.shape == (3, 5) and filled.dtype == dt.storage
    assert set(filled.reshape(-1).view(np.uint8).tolist()) == {0xA5}


def test_sentinel_for_bool_and_string():
    assert not sentinel(DTYPES["bool"], (4,), 0xA4).any()
    assert sentinel(DTYPES["bool"], (4,), 0xA5).all()
    assert set(sentinel(DTYPES["string"], (2,), 0).tolist()) == {"\u2020sentinel"}


def test_payload_of_4_bit_types_is_the_packed_byte_count():
    values = sample(DTYPES["int4"], (5,))
    assert len(payload(values, DTYPES["int4"])) == 3


def test_payload_of_a_non_contiguous_array_is_its_logical_bytes():
    values = np.arange(12, dtype=np.int16).reshape(3, 4)
    assert payload(values.T, DTYPES["int16"]).tobytes() == np.ascontiguousarray(values.T).tobytes()


TENSORPROTO_NAMES = {"float32": "FLOAT", "float64": "DOUBLE"}  # the others are the kit's names in capitals


def test_onnx_type_ids_are_onnx_own():
    from onnx import TensorProto

    for dtype in DTYPES.values():
        assert dtype.onnx_type == getattr(TensorProto, TENSORPROTO_NAMES.get(dtype.name, dtype.name.upper())), dtype.name


def test_payload_is_a_view_and_compare_takes_views_and_bytes():
    values = np.arange(1 << 20, dtype=np.float32)
    view = payload(values, DTYPES["float32"])
    assert view.ctypes.data == values.ctypes.data and not view.flags.writeable  # no copy of 4 MiB
    assert compare(view, values.tobytes()) is None
    changed = values.copy()
    changed[-1] = -1.0  # the last byte pair lies in the 64-bit bulk; an odd length has a tail too
    diff = compare(view, payload(changed, DTYPES["float32"]))
    assert diff is not None and diff.differing >= 1 and diff.first[0][0] >= values.nbytes - 4
    assert compare(b"abcdefghi", b"abcdefghj").first == [(8, ord("i"), ord("j"))]


def test_importing_the_type_table_and_the_model_cache_does_not_import_onnx():
    code = "import sys, conformance.testbed.tensors, conformance.testbed.models, conformance.checks.context; print('onnx' in sys.modules)"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert completed.stdout.strip() == "False", completed.stderr


@pytest.mark.parametrize("dtype, shape, seen_shape, seen_nbytes, said", [
    ("float32", (2, 3), [2, 3], 24, ""),
    ("float32", (2, 3), [0x5A5A5A5A5A5A5A5A], 24, f"its shape reads [{0x5A5A5A5A5A5A5A5A}], made [2, 3]"),
    ("float32", (2, 3), [2, 3], 0x5A5A5A5A, f"its byte size reads {0x5A5A5A5A}, made 24 (float32 [2, 3])"),
    ("float32", (), [], 4, ""),
    ("int4", (7,), [7], 4, ""),
    ("string", (2,), [2], None, ""),  # a string tensor has no byte size to compare
    ("float32", (2,), None, 8, "its shape reads None, not a shape"),
])
def test_unlike_made_names_what_reads_back_otherwise(dtype, shape, seen_shape, seen_nbytes, said):
    assert tensors.unlike_made(DTYPES[dtype], shape, seen_shape, seen_nbytes) == said
