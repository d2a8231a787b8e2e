"""lanes/run's lane preparation: the reason a lane is skipped is the one that says why, taken
from stand-ins of the commands it runs (make, lanes/softgpu/exec); and refdev/smoke.py runs
every fault mode of the EP."""

from __future__ import annotations

import subprocess
import sys
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_file_location, spec_from_loader
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def lanes(monkeypatch, tmp_path):
    """lanes/run loaded as a module (it has no .py suffix), writing its reports under tmp_path."""
    loader = SourceFileLoader("lanes_run_mend", str(REPO / "lanes" / "run"))
    module = module_from_spec(spec_from_loader("lanes_run_mend", loader))
    monkeypatch.setitem(sys.modules, "lanes_run_mend", module)  # its dataclasses look their module up there
    loader.exec_module(module)
    monkeypatch.setattr(module, "REPORTS", tmp_path / "reports")
    return module


def stand_in(monkeypatch, lanes, outputs: dict[str, tuple[int, str, str]]):
    """Replace the commands lanes/run runs quietly: the last part of the program's path picks
    (exit status, stdout, stderr), and any other command fails the test; returns the commands seen."""
    seen = []

    def run_quietly(command, **kwargs):
        seen.append(command)
        if Path(command[0]).name not in outputs:
            pytest.fail(f"lanes/run went on to run {command}")
        status, stdout, stderr = outputs[Path(command[0]).name]
        return subprocess.CompletedProcess(command, status, stdout, stderr)

    monkeypatch.setattr(lanes, "run_quietly", run_quietly)
    return seen


def lane(lanes, name: str):
    return next(lane for lane in lanes.LANES if lane.name == name)


# What `make -C refdev` prints when the headers are not there (stdout, stderr).
MAKE_OUT = "make: Entering directory '/repo/refdev'\nmake: Leaving directory '/repo/refdev'\n"
MAKE_ERR = ("refdev: onnxruntime_c_api.h / onnxruntime_ep_c_api.h not found in /nowhere\n"
            "make: *** [Makefile:31: build/libort_refdev_ep.so] Error 3\n")


def test_a_refdev_lane_that_cannot_build_is_skipped_with_the_builds_own_reason(monkeypatch, lanes, tmp_path):
    stand_in(monkeypatch, lanes, {"make": (2, MAKE_OUT, MAKE_ERR)})
    outcome = lanes.run_lane(lane(lanes, "refdev"))
    reason = "refdev: onnxruntime_c_api.h / onnxruntime_ep_c_api.h not found in /nowhere"
    assert outcome.status == "skipped" and outcome.detail.endswith(reason), outcome.detail
    assert (tmp_path / "reports/refdev/skipped.txt").read_text().strip().endswith(reason)


def test_the_last_fetch_or_makefile_line_is_the_reason_else_the_last_line(lanes):
    fetch = "fetch-headers.sh: cannot fetch onnxruntime headers: apt-get not found"
    assert lanes.build_failure_reason(f"{fetch}\nmake: *** [Makefile:31: x] Error 3\n{MAKE_OUT}") == fetch
    assert lanes.build_failure_reason("cc: fatal error: no input files\n" + MAKE_OUT) == "make: Leaving directory '/repo/refdev'"


NOT_ROOT = "softgpu exec: needs root: it makes a private mount namespace (unshare -m) and mounts over /sys/class there; running as uid 1000\n"


def test_a_webgpu_lane_whose_namespace_cannot_be_entered_is_skipped_with_execs_reason(monkeypatch, lanes, tmp_path):
    seen = stand_in(monkeypatch, lanes, {"setup": (0, "", ""), "exec": (3, "", NOT_ROOT)})
    outcome = lanes.run_lane(lane(lanes, "webgpu"))
    assert [Path(command[0]).name for command in seen] == ["setup", "exec"]
    assert outcome.status == "skipped" and outcome.detail.endswith(NOT_ROOT.strip()), outcome.detail
    assert (tmp_path / "reports/webgpu/skipped.txt").read_text().strip().endswith(NOT_ROOT.strip())


def test_a_webgpu_lane_whose_namespace_can_be_entered_goes_on(monkeypatch, lanes):
    seen = stand_in(monkeypatch, lanes, {"setup": (0, "", ""), "exec": (0, "", "")})
    lane(lanes, "webgpu").prepare()
    assert seen[-1] == [str(REPO / "lanes/softgpu/exec"), "true"]


@pytest.mark.parametrize("gpus, has_gpu", [(None, False), ([], False), (["0000:01:00.0"], True)])
def test_the_cuda_lanes_agree_on_whether_there_is_an_nvidia_gpu(monkeypatch, lanes, tmp_path, gpus, has_gpu):
    folder = tmp_path / "gpus"
    if gpus is not None:
        folder.mkdir()
        for gpu in gpus:
            (folder / gpu).mkdir()
    monkeypatch.setattr(lanes, "NVIDIA_GPUS", folder)
    skipped = []
    for name in ("cuda", "cuda-absent"):
        try:
            lane(lanes, name).prepare()
        except lanes.Skip:
            skipped.append(name)
    assert skipped == (["cuda-absent"] if has_gpu else ["cuda"])


def load_smoke():
    spec = spec_from_file_location("refdev_smoke", REPO / "refdev" / "smoke.py")
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_smoke_test_takes_every_fault_mode_of_the_ep_but_unregister_crash_and_knows_what_each_shows():
    smoke = load_smoke()
    assert "host-accessible-as-device" in smoke.FAULT_MODES and "unregister-crash" not in smoke.FAULT_MODES
    assert len(smoke.FAULT_MODES) == len(set(smoke.FAULT_MODES)) > 10
    assert set(smoke.FAULT_MODES) == set(smoke.EXPECTED)


def test_the_smoke_test_says_when_it_cannot_read_the_fault_modes(monkeypatch, tmp_path):
    smoke = load_smoke()
    monkeypatch.setattr(smoke, "HERE", str(tmp_path))
    with pytest.raises(SystemExit, match="smoke.py: cannot read the fault modes: .*refdev_ep.c"):
        smoke.fault_modes()
    (tmp_path / "refdev_ep.c").write_text("int main(void) { return 0; }\n")
    with pytest.raises(SystemExit, match="no k_fault_names array in"):
        smoke.fault_modes()
