"""The reference EP's stress fault modes (refdev/) bite, and only with the fault: each
demonstration of refdev/stress_smoke.py runs in a child with ORT_REFDEV_FAULT=MODE and in one
without it, and the figures of both are compared.

size32 is left out: its demonstration holds a copy of 4 GiB + 4 KiB + 3 bytes on each side
(about 8.5 GiB); `python refdev/stress_smoke.py --fault size32` runs it where memory allows.
The library is built by the `refdev_library` fixture (tests/conftest.py).
"""

from __future__ import annotations

from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stress_smoke():
    spec = spec_from_file_location("refdev_stress_smoke", ROOT / "refdev" / "stress_smoke.py")
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def demonstrate(stress_smoke, library: Path, mode: str) -> tuple[dict, dict]:
    """The figures of `mode`'s demonstration with its fault, and without it."""
    faulty = stress_smoke.run_child(str(library), mode, mode, 120)
    good = stress_smoke.run_child(str(library), mode, None, 120)
    assert "error" not in faulty and "error" not in good, (faulty, good)
    return faulty, good


def test_leak_grows_rss_by_16_kib_per_copy_and_the_good_build_by_nothing(stress_smoke, refdev_library):
    faulty, good = demonstrate(stress_smoke, refdev_library, "leak")
    assert faulty["calls"] == 2000 and 16 * 1024 <= faulty["growth_per_call_bytes"] < 17 * 1024, faulty
    assert good["growth_per_call_bytes"] < 1024, good


def test_leak_of_the_bytes_each_copy_moves(stress_smoke, refdev_library, monkeypatch):
    monkeypatch.setenv("ORT_REFDEV_LEAK_BYTES", "tensor")  # the demonstration copies 4 KiB a call
    faulty, _ = demonstrate(stress_smoke, refdev_library, "leak")
    assert 4 * 1024 <= faulty["growth_per_call_bytes"] < 5 * 1024, faulty


def test_race_gives_wrong_bytes_to_threads_copying_at_once_and_the_good_build_right_ones(stress_smoke, refdev_library):
    faulty, good = demonstrate(stress_smoke, refdev_library, "race")
    assert faulty["errors"] == [] and faulty["overlapping_pairs"] > 0 and faulty["wrong_bytes"] > 0, faulty
    assert good["errors"] == [] and good["wrong_bytes"] == 0 and good["bytes_checked"] == 4 * 100 * 64 * 1024, good


def test_race_kernel_gives_wrong_outputs_to_sessions_run_at_once_and_the_good_build_right_ones(stress_smoke, refdev_library):
    faulty, good = demonstrate(stress_smoke, refdev_library, "race-kernel")
    assert faulty["errors"] == [] and faulty["wrong_runs"] > 0, faulty
    assert good["errors"] == [] and good["wrong_elements"] == 0 and good["runs"] == 4 * 40, good


def test_affinity_refuses_a_copy_from_another_thread_and_names_it(stress_smoke, refdev_library):
    faulty, good = demonstrate(stress_smoke, refdev_library, "affinity")
    assert faulty["registering_thread"] == "ok", faulty
    assert "fault 'affinity'" in faulty["new_thread"] and faulty["message_names_thread"], faulty
    assert good["registering_thread"] == good["new_thread"] == "ok", good


def test_nth_fails_the_copy_after_the_pools_last_handle_and_allocations_from_then_on(stress_smoke, refdev_library, monkeypatch):
    monkeypatch.setenv("ORT_REFDEV_NTH", "300")
    faulty, good = demonstrate(stress_smoke, refdev_library, "nth")
    assert faulty["first_failed_call"] == 301 and "handle pool exhausted: call 301" in faulty["message"], faulty
    assert faulty["allocation_after"].startswith("a value with NULL data"), faulty
    assert good["first_failed_call"] is None and good["allocation_after"] == "ok", good
