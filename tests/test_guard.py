"""conformance.testbed.guard: canaries around host arrays show writes past either end and into the
gaps of a strided array, and stay quiet when nothing strayed."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.testbed.guard import ALIGNMENT, GuardedArray, Overrun, canary_pattern


def test_an_untouched_array_reports_nothing_and_is_an_aligned_c_array():
    guarded = GuardedArray.holding(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert guarded.check() == []
    assert guarded.address % ALIGNMENT == 0 and guarded.array.flags.c_contiguous
    assert guarded.array.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_writes_inside_the_array_are_not_overruns():
    guarded = GuardedArray(np.int64, (4,))
    guarded.array[...] = -1
    assert guarded.check() == []


@pytest.mark.parametrize("offset, side", [(-1, "before"), (-64, "before"), (24, "after"), (24 + 63, "after")])
def test_a_byte_changed_past_either_end_is_named_with_its_offset(offset, side):
    guarded = GuardedArray(np.float32, (2, 3))
    guarded.buffer[guarded.before + offset] ^= 0xFF
    assert guarded.check() == [Overrun(side, offset, 1)]


def test_one_element_written_past_the_end_reads_as_its_bytes():
    guarded = GuardedArray(np.float32, (3,))
    np.frombuffer(guarded.buffer, dtype=np.float32, count=4, offset=guarded.before)[3] = 7.0
    (overrun,) = guarded.check()
    assert overrun.describe() == "wrote 4 bytes after the end (at +12)"


def test_a_strided_array_has_canaries_in_its_gaps():
    guarded = GuardedArray.holding(np.arange(6, dtype=np.int16).reshape(2, 3), step=2, writeable=False)
    assert not guarded.array.flags.c_contiguous and not guarded.array.flags.writeable
    assert guarded.check() == []
    guarded.buffer[guarded.before + 2] = 0  # the gap after element 0
    assert guarded.check() == [Overrun("gap", 2, 1)]


def test_empty_and_scalar_arrays_are_guarded_too():
    empty = GuardedArray(np.uint8, (0,))
    empty.buffer[empty.before] ^= 1
    assert empty.check() == [Overrun("after", 0, 1)]
    scalar = GuardedArray.holding(np.array(3.5, dtype=np.float64))
    assert scalar.array.shape == () and scalar.check() == []


def test_the_canary_pattern_differs_from_a_shifted_copy_of_itself():
    pattern = canary_pattern(0xC3, 64)
    assert not np.array_equal(pattern[1:], pattern[:-1]) and pattern[0] == 0xC3


def test_what_cannot_be_guarded_is_refused():
    with pytest.raises(ValueError, match="object"):
        GuardedArray(object, (2,))
    with pytest.raises(ValueError, match="step"):
        GuardedArray(np.float32, (), step=2)


def test_a_tail_guard_makes_the_unused_end_of_a_packed_types_storage_canaries():
    guarded = GuardedArray.holding(np.zeros(7, dtype=np.uint8))  # 7 4-bit elements: 4 bytes of tensor
    guarded.guard_tail(4)
    guarded.array[:4] = 1
    assert guarded.check() == []
    guarded.array[4] = 1  # one byte past the tensor's, inside the array's storage
    assert guarded.check() == [Overrun("after", 4, 1)]


def test_a_record_of_the_guard_whose_size_changed_is_reported_not_compared():
    # a copy landing after its call returned, into memory numpy had since reused for one of the
    # guard's own arrays: comparing it would fail in numpy ("could not be broadcast together")
    guarded = GuardedArray(np.float32, (2, 3))
    guarded._margins = (np.zeros(3, np.uint8), guarded._margins[1])
    (overrun,) = guarded.check()
    assert overrun == Overrun("record", 0, 1)
    assert overrun.describe().startswith("overwrote 1 of the guard's own records of its buffer")
    guarded.buffer = guarded.buffer[:10]
    assert guarded.check() == [Overrun("record", 0, 2)]


def test_a_tail_guard_keeps_its_records_consistent():
    guarded = GuardedArray(np.uint8, (7,))
    guarded.array[...] = 1
    guarded.guard_tail(4)
    assert guarded.check() == []
