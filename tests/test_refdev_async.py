"""The reference EP's asynchronous device (refdev/, ORT_REFDEV_ASYNC=1) and its async fault modes:
each case of refdev/async_smoke.py runs in a child per mode, and each mode fails exactly the cases
it is meant to fail (the good build none); which streams are asynchronous follows the switches.

The library is built by the `refdev_library` fixture (tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def async_smoke():
    spec = spec_from_file_location("refdev_async_smoke", ROOT / "refdev" / "async_smoke.py")
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_async_smoke_test_knows_every_async_fault_mode(async_smoke):
    assert set(async_smoke.ASYNC_FAULTS) <= set(async_smoke.smoke.FAULT_MODES)
    assert set(async_smoke.EXPECTED) == {"none", *async_smoke.ASYNC_FAULTS}


@pytest.mark.parametrize("mode", ["none", "drop-stream", "no-wait", "no-drain", "early-return"])
def test_each_async_fault_fails_its_cases_and_the_good_build_none(async_smoke, refdev_library, mode):
    # the library's own hold (work nobody waits for lands after 1 s): a missing wait shows every time
    result = async_smoke.run_child(str(refdev_library), mode, None, 120)
    assert not result["crashed"], result["output"][-3000:]
    assert result["failed"] == async_smoke.EXPECTED[mode], result["output"][-3000:]
    # the device is asynchronous in every mode: copies on a stream have not landed at their return
    assert "PASS stream.read-before-wait" in result["output"], result["output"][-3000:]


def test_work_something_waits_for_runs_at_once_however_long_the_hold(async_smoke, refdev_library):
    """With the longest hold (60 s), the good build's cases pass well inside the child's 50 s: every
    wait onnxruntime makes (a drain, a notification's wait, a stream's release) runs what it waits
    for at once, and only work nothing waits for is held."""
    result = async_smoke.run_child(str(refdev_library), "none", 60000, 50)
    assert not result["crashed"] and result["failed"] == set(), result["output"][-3000:]
    assert "PASS stream.read-before-wait" in result["output"], result["output"][-3000:]


RECORD = textwrap.dedent("""
    import sys
    import numpy as np
    import onnxruntime as ort
    sys.path.insert(0, {refdev!r})
    import smoke
    ort.register_execution_provider_library("refdev", {library!r})
    dev = [d for d in ort.get_ep_devices() if d.ep_name == smoke.EP_NAME][0]
    stream = dev.create_sync_stream()
    del stream
    so = ort.SessionOptions()
    so.add_provider_for_devices([dev], {options!r})
    x = np.ones((2, 3), np.float32)
    out = ort.InferenceSession(smoke.build_model(), sess_options=so).run(None, {{"X": x, "Y": x}})[0]
    assert np.array_equal(out, 2 * x), out
""")


def stream_record(library: Path, tmp_path: Path, options: dict, **env: str) -> list[str]:
    """The `create stream=...` lines of ORT_REFDEV_ASYNC_LOG for a factory stream, then a session run."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "async.log"
    script = RECORD.format(refdev=str(ROOT / "refdev"), library=str(library), options=options)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ORT_REFDEV_")}
    environ.update(env, ORT_REFDEV_ASYNC_LOG=str(log))
    run = subprocess.run([sys.executable, "-c", script], env=environ, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return [line for line in log.read_text().splitlines() if line.startswith("create ")]


def test_streams_are_synchronous_unless_a_switch_says_otherwise(refdev_library, tmp_path):
    assert stream_record(refdev_library, tmp_path / "plain", {}) == ["create stream=1 sync by factory", "create stream=2 sync by ep"]
    # the provider option reaches the session's streams only
    assert stream_record(refdev_library, tmp_path / "option", {"async": "1"}) == ["create stream=1 sync by factory", "create stream=2 async by ep"]
    assert stream_record(refdev_library, tmp_path / "env", {}, ORT_REFDEV_ASYNC="1") == ["create stream=1 async by factory", "create stream=2 async by ep"]
    # an async fault makes the device asynchronous on its own
    assert stream_record(refdev_library, tmp_path / "fault", {}, ORT_REFDEV_FAULT="no-wait") == [
        "create stream=1 async by factory", "create stream=2 async by ep"]
