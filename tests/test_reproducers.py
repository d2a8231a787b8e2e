"""Reproducers reproduce: the scripts a run of the reference EP in a fault mode writes to
`reports/repro/` fail, run on their own from another folder, under that broken build (an
AssertionError, or the signal that ends the process) and pass under the good one; they need
onnxruntime and numpy only.

The library is built by the `refdev_library` fixture (tests/conftest.py); where that is not
possible the tests skip with the build's own reason.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, conformance_run

from conformance.report import repro_files as repro

# The copy, update and session fault modes of refdev (refdev/README.md), the crash and the hang, and cpu-default.
FAULTS = ["corrupt", "short-copy", "no-data-transfer", "no-d2d", "no-d2h", "no-h2d", "slow-d2d", "wrong-compute", "abort", "hang",
          "cpu-default"]  # DEFAULT memory said to be CPU memory: a script reads it as its value says, not as the run saw it
# How a script ends under the broken build: killed by the fault's signal, else its AssertionError.
SIGNALS = {"abort": signal.SIGABRT, "hang": signal.SIGALRM}
PER_MODE = 5  # scripts run per mode: one of each failing contract first
HANG_SECONDS = 4  # the scripts' own alarm (REPRO_TIMEOUT_SECONDS) under the broken build: it ends a hang by SIGALRM
GOOD_SECONDS = 60  # and under the good one, where nothing hangs


def _run(library: Path, folder: Path, fault: str | None) -> dict:
    timeout = "5" if fault == "hang" else "20"  # a hang costs the run twice that
    # slow-d2d sleeps 20 ms in each device-to-device copy: the stress tier's 10,000 of them would take minutes
    tier = ("-m", "not stress") if fault == "slow-d2d" else ()
    run = conformance_run(folder, "--ep-library", str(library), "--ep", "refdev", "--conformance-timeout", timeout, *tier,
                          env={"ORT_REFDEV_FAULT": fault})
    return run.report | {"_folder": str(run.reports)}


def _key(result: dict) -> tuple:
    return result["contract"], result["device"], tuple(sorted(result["params"].items()))


@pytest.fixture(scope="module")
def good_failures(refdev_library, tmp_path_factory) -> set[tuple]:
    """The cases that fail under the good build too: onnxruntime's own findings, not the fault's."""
    report = _run(refdev_library, tmp_path_factory.mktemp("good"), None)
    return {_key(r) for r in report["results"] if r["outcome"] in repro.FAILING}


def run_script(path: Path, cwd: Path, fault: str) -> subprocess.CompletedProcess:
    """`python -I SCRIPT` in `cwd`, without the kit on its path, refdev in mode `fault`."""
    alarm = HANG_SECONDS if fault == "hang" else GOOD_SECONDS
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ORT_REFDEV_FAULT")}
    env.update(ORT_REFDEV_FAULT=fault, REPRO_TIMEOUT_SECONDS=str(alarm))
    return subprocess.run([sys.executable, "-I", str(path)], cwd=cwd, env=env, capture_output=True, text=True, timeout=alarm + 30)


def sample(report: dict, good: set[tuple]) -> list[Path]:
    """Up to PER_MODE scripts of the cases the fault broke, one per contract first."""
    folder = Path(report["_folder"]) / repro.FOLDER
    chosen, seen = [], set()
    broken = [r for r in report["results"] if r["outcome"] in repro.FAILING and _key(r) not in good
              and (r["outcome"] == "fail" or "call" in r["details"])]  # a crash or timeout in a call to the EP, not a slow machine
    for first_of_each in (True, False):
        for result in broken:
            path = folder / repro.script_name(result)
            if path in chosen or (first_of_each and result["contract"] in seen) or not path.exists():
                continue
            seen.add(result["contract"])
            chosen.append(path)
    return chosen[:PER_MODE]


@pytest.mark.parametrize("fault", FAULTS)
def test_the_scripts_of_a_fault_run_fail_on_the_broken_build_and_pass_on_the_good_one(refdev_library, tmp_path, good_failures, fault):
    (tmp_path / "run").mkdir()
    report = _run(refdev_library, tmp_path / "run", fault)
    scripts = sample(report, good_failures)
    assert scripts, f"fault {fault}: no script under repro/ for the cases it broke"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        imported = {alias.name.split(".")[0] for node in ast.walk(ast.parse(text)) if isinstance(node, (ast.Import, ast.ImportFrom))
                    for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])}
        assert imported <= {"ctypes", "os", "signal", "sys", "time", "gc", "numpy", "onnxruntime"}, f"{script.name} imports {imported}"
        assert "register_execution_provider_library" in text and str(refdev_library.resolve()) in text, script.name
        broken = run_script(script, elsewhere, fault)
        if fault in SIGNALS:
            failed_right = broken.returncode == -SIGNALS[fault]
        else:
            failed_right = broken.returncode == 1 and "AssertionError: " in broken.stderr
        assert failed_right, f"{script.name} under {fault}: exit {broken.returncode}\n{broken.stdout[-1500:]}\n{broken.stderr[-1500:]}"
        good = run_script(script, elsewhere, "none")
        assert good.returncode == 0, f"{script.name} on the good build: exit {good.returncode}\n{good.stdout[-1500:]}\n{good.stderr[-1500:]}"


def test_only_failing_cases_get_a_script_and_an_earlier_run_s_are_removed(tmp_path):
    fail = {"contract": "copy.direction", "device": "x", "params": {"direction": "cpu>default"}, "outcome": "fail",
            "details": {"violations": [{"reproducer": "# Reproduces: a copy\nassert False\n"}]}}
    passed = dict(fail, outcome="pass", params={"direction": "default>cpu"})
    kit_script = "from conformance.engine.runner import Runner\n"
    through_the_kit = dict(fail, params={"direction": "default>default"}, details={"violations": [{"reproducer": kit_script}]})
    (tmp_path / "repro").mkdir()
    (tmp_path / "repro" / "old.py").write_text("# an earlier run's\n")
    written = repro.write({"results": [fail, passed, through_the_kit]}, tmp_path)
    assert [p.name for p in written] == ["copy.direction_x-cpu_default.py"]
    assert sorted(p.name for p in (tmp_path / "repro").iterdir()) == ["copy.direction_x-cpu_default.py"]
    assert repro.write({"results": [passed]}, tmp_path) == [] and not list((tmp_path / "repro").iterdir())


# Loaded before the script (sitecustomize): an onnxruntime whose OrtValue.ortvalue_from_shape_and_type
# takes no memory_info (as onnxruntime-openvino 1.24.1), and, with CORRUPT=1, whose
# OrtValue.update_inplace flips a bit of the destination's middle byte.
OLD_AND_BROKEN = '''
import ctypes, os
import onnxruntime as ort

_allocate, _update = ort.OrtValue.ortvalue_from_shape_and_type, ort.OrtValue.update_inplace

def ortvalue_from_shape_and_type(shape, element_type, device_type="cpu", device_id=0, vendor_id=-1, **kwargs):
    if "memory_info" in kwargs:
        raise TypeError("ortvalue_from_shape_and_type() got an unexpected keyword argument 'memory_info'")
    return _allocate(shape, element_type, device_type, device_id, vendor_id)

def update_inplace(self, source):
    _update(self, source)
    if os.environ.get("CORRUPT") == "1" and self.tensor_size_in_bytes():
        byte = ctypes.c_uint8.from_address(self.data_ptr() + self.tensor_size_in_bytes() // 2)
        byte.value ^= 1

ort.OrtValue.ortvalue_from_shape_and_type = staticmethod(ortvalue_from_shape_and_type)
ort.OrtValue.update_inplace = update_inplace
'''


@pytest.mark.parametrize("step", ["update_from_ortvalue", "update_from_numpy", "session_run"])
def test_a_cpu_script_asks_for_no_memory_info_and_fails_when_the_update_is_wrong(tmp_path, step):
    from conformance.testbed import tensors
    from conformance.checks import session, update_inplace
    from conformance.engine.runner import Runner

    runner = Runner("cpu", models_dir=str(tmp_path / "models"))
    ctx = runner.context(0)
    int32 = tensors.DTYPES["int32"]
    if step == "update_from_ortvalue":
        script = update_inplace._from_ortvalue_script(ctx.snippets, "cpu", "default", int32, (2, 3))
    elif step == "update_from_numpy":
        script = update_inplace._from_numpy_script(ctx.snippets, int32, (2, 3), "default", "strided")
    else:
        _, model = runner.models.get("relu", tensors.DTYPES["float32"], (3, 5))
        script = session._session_run_script(ctx.snippets, model, "relu", ("x",), tensors.DTYPES["float32"], (3, 5))
    assert "import conformance" not in script and "from conformance" not in script
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(OLD_AND_BROKEN)
    (tmp_path / "repro.py").write_text(script)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def run(corrupt: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "CORRUPT": corrupt}
        return subprocess.run([sys.executable, str(tmp_path / "repro.py")], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)

    good = run("0")
    assert good.returncode == 0, good.stderr
    if step != "session_run":  # (a session does not call update_inplace)
        broken = run("1")
        assert broken.returncode == 1 and "AssertionError: " in broken.stderr and "expected 0x" in broken.stderr, broken.stderr


def _plain(script: Path, cwd: Path, **env: str | None) -> subprocess.CompletedProcess:
    """The script run as a user runs it, the refdev variables of this process replaced by `env`."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("ORT_REFDEV_")}
    environ.update({k: v for k, v in env.items() if v is not None})
    return subprocess.run([sys.executable, "-I", str(script)], cwd=cwd, env=environ, capture_output=True, text=True, timeout=120)


def test_the_scripts_of_a_host_accessible_run_exit_non_zero_without_its_set_up_and_say_what_differs(refdev_library, tmp_path):
    """The refdev-host lane's set-up (ORT_REFDEV_HOST_ACCESSIBLE=1, lanes/refdev-host/refdev.yaml),
    broken by `corrupt`: every script it writes exits 2 without ORT_REFDEV_HOST_ACCESSIBLE,
    naming the variable; a script whose set-up line is removed (a spec naming no variable)
    still stops, at the HOST_ACCESSIBLE memory it no longer finds advertised, instead of
    testing plain CPU memory; with the set-up, the broken build fails it and the script says
    the fault variable its run had."""
    (tmp_path / "run").mkdir()
    run = conformance_run(tmp_path / "run", "--ep-library", str(refdev_library), "--ep", "refdev", str(ROOT / "lanes/refdev-host/refdev.yaml"),
                          "-k", "host-accessible or host_accessible", env={"ORT_REFDEV_HOST_ACCESSIBLE": "1", "ORT_REFDEV_FAULT": "corrupt"})
    scripts = sorted((run.reports / repro.FOLDER).glob("*.py"))
    host_cases = [s for s in scripts if "host_accessible" in s.name or "host-accessible" in s.name]
    assert len(host_cases) >= 10, [s.name for s in scripts]
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        assert "# How the run set the EP up:" in text and "ORT_REFDEV_HOST_ACCESSIBLE=1" in text and "ORT_REFDEV_FAULT=corrupt" in text, script.name
        without = _plain(script, tmp_path, ORT_REFDEV_FAULT="corrupt")
        assert without.returncode == 2 and "precondition not met: environment variable ORT_REFDEV_HOST_ACCESSIBLE" in without.stderr, \
            f"{script.name}: exit {without.returncode}\n{without.stdout[-800:]}\n{without.stderr[-800:]}"
    for script in host_cases[:6]:
        unrecorded = tmp_path / ("unrecorded-" + script.name)
        unrecorded.write_text("".join(line for line in script.read_text(encoding="utf-8").splitlines(keepends=True)
                                      if not line.startswith("environment_as_in_the_run(")), encoding="utf-8")
        stopped = _plain(unrecorded, tmp_path)
        assert stopped.returncode == 2 and "HOST_ACCESSIBLE memory: expected advertised" in stopped.stderr, f"{script.name}: {stopped.stderr[-800:]}"
    copy = next(s for s in host_cases if s.name.startswith("copy.host-accessible-directions"))
    broken = _plain(copy, tmp_path, ORT_REFDEV_HOST_ACCESSIBLE="1", ORT_REFDEV_FAULT="corrupt")
    assert broken.returncode == 1 and "AssertionError: " in broken.stderr, broken.stderr[-800:]
    good = _plain(copy, tmp_path, ORT_REFDEV_HOST_ACCESSIBLE="1")
    assert good.returncode == 0 and "the run had ORT_REFDEV_FAULT=corrupt" in good.stdout, good.stdout[-800:] + good.stderr[-800:]


def test_a_session_script_requires_the_nodes_its_run_saw_on_the_ep(refdev_library, tmp_path):
    """A script of a session of Add and Relu, run where the EP takes Relu alone (ORT_REFDEV_OPS,
    its set-up line removed so that the nodes are what stops it), exits 2 naming the nodes."""
    (tmp_path / "run").mkdir()
    run = conformance_run(tmp_path / "run", "--ep-library", str(refdev_library), "--ep", "refdev", "-k", "session.nodes-on-ep",
                          env={"ORT_REFDEV_FAULT": "wrong-compute"})
    script = next(s for s in sorted((run.reports / repro.FOLDER).glob("*.py")) if "add_relu" in s.name)
    text = script.read_text(encoding="utf-8")
    assert "nodes_as_in_the_run(s, 'RefDevExecutionProvider', ['Add', 'Relu'])" in text
    stripped = tmp_path / "stripped.py"
    stripped.write_text("".join(line for line in text.splitlines(keepends=True) if not line.startswith("environment_as_in_the_run(")), encoding="utf-8")
    narrow = _plain(stripped, tmp_path, ORT_REFDEV_OPS="Relu")
    assert narrow.returncode == 2 and "precondition not met: the nodes RefDevExecutionProvider took: expected ['Add', 'Relu'], got ['Relu']" in narrow.stderr, \
        narrow.stderr[-800:]
    assert _plain(stripped, tmp_path, ORT_REFDEV_FAULT="wrong-compute").returncode == 1
    assert _plain(stripped, tmp_path).returncode == 0
