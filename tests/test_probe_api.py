"""conformance.probe() as a library: a typed CapabilityMatrix, its JSON against the published
probe schema, a caller's process kept free of pytest, onnx, jsonschema and onnxruntime, and
`ort-conformance probe --fail-on` / `--no-throughput`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from jsonschema import Draft202012Validator

import conformance
from conformance import cli
from conformance.data import schemas_dir
from conformance.errors import NotMeasured
from conformance.matrix import SCHEMA, STATUSES, CapabilityMatrix, Device, Ep, Pair, UnknownMemory


def probe_schema() -> dict:
    return json.loads((schemas_dir() / "probe.schema.json").read_text(encoding="utf-8"))


def schema_problems(instance) -> list[str]:
    return [f"{e.json_path}: {e.message}" for e in Draft202012Validator(probe_schema()).iter_errors(instance)]


def test_the_probe_schema_is_a_valid_schema_of_this_version():
    schema = probe_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"] == {"const": SCHEMA}
    assert schema["$defs"]["pair"]["properties"]["status"]["enum"] == list(STATUSES)
    from conformance.engine import capabilities  # the worker's side, which decides the statuses

    assert capabilities.STATUSES == STATUSES


def test_the_cpu_probe_is_a_typed_matrix_whose_json_the_schema_accepts():
    matrix = conformance.probe("cpu", throughput=False)
    assert isinstance(matrix, CapabilityMatrix)
    (device,) = matrix.devices
    assert isinstance(device, Device) and device.ep == "CPUExecutionProvider" and device.error is None
    (pair,) = device.pairs
    assert isinstance(pair, Pair) and (pair.source, pair.destination, pair.status) == ("cpu", "cpu", "not_required")
    assert pair.figures == {}  # throughput=False: no GB/s figures measured
    # a not_required cell explains itself in the kit's words; onnxruntime's refusal is kept apart
    assert pair.detail.startswith("no copy needed") and "not supported" not in pair.detail
    assert pair.refusal
    assert not matrix.supports("cpu", "cpu") and not matrix.supports("cpu", "default")
    data = json.loads(matrix.to_json())
    assert data["schema"] == SCHEMA and schema_problems(data) == []
    assert CapabilityMatrix.from_dict(data) == matrix


def test_supports_answers_per_device_and_for_every_device():
    good = Device("RefDev", "refdev:0", (Pair("cpu", "default", "supported", True, "4096 bytes intact"),))
    bad = Device("RefDev", "refdev:1", (Pair("cpu", "default", "broken", True, "byte 3 differs"),))
    matrix = CapabilityMatrix((Ep("RefDev", "refdev", "1.32.0", True, (good, bad)),))
    assert good.supports("cpu", "default") and not bad.supports("cpu", "default")
    assert matrix.supports("cpu", "default", device="refdev:0")
    assert not matrix.supports("cpu", "default")  # one device lacks it
    assert not matrix.supports("default", "cpu", device="refdev:0")  # a direction not in the matrix
    assert not matrix.supports("cpu", "default", ep="nosuch")  # no device matches
    # A name that is no memory is an error, not a "no": a typo would otherwise read as unsupported.
    for ask in (lambda: matrix.supports("xx", "yy"), lambda: good.supports("cpu", "defualt"), lambda: matrix.supports("cpu", "gpu", ep="nosuch")):
        with pytest.raises(UnknownMemory, match=r"is not a memory; the memories are: cpu, default, host_accessible"):
            ask()
    assert matrix.statuses() == {"supported", "broken"}
    assert schema_problems(matrix.to_dict()) == []


def test_supports_of_an_ep_that_get_ep_devices_does_not_list_is_not_known_for_its_own_memory():
    plain = Device("CUDAExecutionProvider", "cuda", (Pair("cpu", "cpu", "not_required", False, "no copy needed"),), {"cpu": None})
    refdev = Device("RefDev", "refdev:0", (Pair("cpu", "default", "broken", True, "byte 3 differs"),))
    matrix = CapabilityMatrix((Ep("CUDAExecutionProvider", "cuda", "1.31.1", False, (plain,)), Ep("RefDev", "refdev", "1.32.0", True, (refdev,))))
    for source, destination in (("cpu", "default"), ("default", "cpu"), ("host_accessible", "cpu")):
        with pytest.raises(NotMeasured, match=f"{source} -> {destination} on CUDAExecutionProvider is not known: get_ep_devices"):
            matrix.supports(source, destination, ep="cuda")
    assert matrix.supports("cpu", "cpu", ep="cuda") is False  # plain CPU memory was probed: copy_tensors declined it
    assert matrix.supports("cpu", "default") is False  # a device that was probed says no: that is known


def test_the_schema_refuses_what_a_reader_could_not_use():
    data = CapabilityMatrix((Ep("X", "x", "1", True, (Device("X", "x", (Pair("cpu", "cpu", "not_required", False, "d"),)),)),)).to_dict()
    assert schema_problems(data) == []
    data["eps"][0]["devices"][0]["pairs"][0]["status"] = "fine"
    assert any("status" in p for p in schema_problems(data))
    assert schema_problems({"schema": "ort-ep-conformance/probe/2", "eps": []})
    lost = {"schema": SCHEMA, "eps": [{"ep": "X", "label": "x", "onnxruntime": "1", "ep_device": True, "unusable": None,
                                         "devices": [{"ep": "X", "device": "x", "error": "crash: SIGSEGV",
                                                      "pairs": [{"source": "cpu", "destination": "cpu", "status": "supported", "required": False,
                                                                 "detail": ""}]}]}]}
    assert schema_problems(lost)  # a lost device has no pairs


def test_importing_and_calling_the_probe_loads_no_pytest_onnx_or_jsonschema():
    code = ("import sys, conformance\n"
            "matrix = conformance.probe('cpu', throughput=False)\n"
            "assert matrix.devices, matrix\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pytest', '_pytest', 'onnx', 'jsonschema', 'onnxruntime', 'yaml'}))\n")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "[]"


def run_probe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance.cli", "probe", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_probe_json_follows_the_published_schema_without_figures():
    completed = run_probe("--ep", "cpu", "--json", "--no-throughput")
    assert completed.returncode == 0, completed.stderr
    data = json.loads(completed.stdout)
    assert schema_problems(data) == []
    assert all("throughput" not in p for d in data["eps"][0]["devices"] for p in d["pairs"])
    assert not data["eps"][0]["devices"][0]["host_memcpy"]


def test_fail_on_a_status_the_matrix_has_exits_1_naming_it():
    completed = run_probe("--ep", "cpu", "--no-throughput", "--fail-on", "not_required,broken")
    assert completed.returncode == 1
    assert "pairs that are not_required (--fail-on not_required,broken)" in completed.stderr
    assert run_probe("--ep", "cpu", "--no-throughput", "--fail-on", "none").returncode == 0


@pytest.mark.parametrize("value", ["fine", "broken,fine", ","])
def test_fail_on_an_unknown_status_is_a_usage_error(value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["probe", "--ep", "cpu", "--fail-on", value])
    assert exit_info.value.code == 2
    assert "not a status" in capsys.readouterr().err


def test_a_broken_pair_fails_the_probe_by_default(refdev_library):
    completed = run_probe("--ep", "RefDev", "--ep-library", str(refdev_library), "--no-throughput", env={"ORT_REFDEV_FAULT": "corrupt"})
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert "broken" in completed.stdout and "pairs that are broken" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_the_readmes_application_example_runs_against_the_cpu_ep(capsys):
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### The copy-capability matrix in an application", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert 'conformance.probe("cuda", throughput=False)' in code
    exec(compile(code.replace('"cuda"', '"cpu"'), "README.md", "exec"), {})
    assert "cpu cpu -> cpu not_required no copy needed" in capsys.readouterr().out
