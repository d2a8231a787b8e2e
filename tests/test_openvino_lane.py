"""The openvino-plugin lane of lanes/run: natively on an Intel CPU, under qemu-user elsewhere
(installed with apt when missing), and its gate, each shown to fail where it must. No emulator
or apt is run here: the commands are stood in for."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import LANES

from conformance.catalogue.spec import load_catalogue, shipped_spec_dirs
from conformance.checks import known_checks


@pytest.fixture
def lanes(monkeypatch, tmp_path):
    monkeypatch.setattr(LANES, "REPORTS", tmp_path / "reports")
    monkeypatch.delenv("OPENVINO_LANE_EMULATE", raising=False)
    return LANES


def cpu(monkeypatch, lanes, tmp_path, vendor: str) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nvendor_id\t: {vendor}\nmodel name\t: a CPU\n")
    monkeypatch.setattr(lanes, "CPUINFO", info)


def commands(monkeypatch, lanes, failing: str = "") -> list[list[str]]:
    """apt-get stood in for: the commands run, the step named `failing` failing."""
    seen: list[list[str]] = []

    def run_quietly(command, **kwargs):
        seen.append(command)
        status = 100 if failing and failing in command else 0
        return subprocess.CompletedProcess(command, status, "", "E: Unable to locate package qemu-user\n" if status else "")

    monkeypatch.setattr(lanes, "run_quietly", run_quietly)
    return seen


def plugin_lane(lanes):
    return next(lane for lane in lanes.LANES if lane.name == "openvino-plugin")


def test_on_an_intel_cpu_the_lane_runs_natively(monkeypatch, lanes, tmp_path):
    cpu(monkeypatch, lanes, tmp_path, "GenuineIntel")
    seen = commands(monkeypatch, lanes)
    plugin_lane(lanes).prepare()
    assert seen == [] and plugin_lane(lanes).environ(Path("python")) == {}
    assert plugin_lane(lanes).pytest_args == ["--ep=openvino"]  # the OpenVINO EP as installed: the plugin


def test_elsewhere_it_installs_qemu_user_with_apt_and_runs_the_eps_processes_under_an_intel_model(monkeypatch, lanes, tmp_path):
    cpu(monkeypatch, lanes, tmp_path, "AuthenticAMD")
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    seen = commands(monkeypatch, lanes)
    # qemu-x86_64 is on the PATH once apt-get has installed it
    monkeypatch.setattr(lanes.shutil, "which", lambda name: "/usr/bin/qemu-x86_64" if ["apt-get", "install", "-y", "-qq", "qemu-user"] in seen else None)
    plugin_lane(lanes).prepare()
    assert seen == [["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "qemu-user"]]
    assert plugin_lane(lanes).environ(Path("python")) == {"ORT_CONFORMANCE_WRAPPER": "qemu-x86_64 -cpu Skylake-Client-v4",
                                                          "PYTEST_ADDOPTS": "--conformance-timeout=300"}


def test_an_emulator_already_there_is_not_installed_again_and_emulation_can_be_asked_for(monkeypatch, lanes, tmp_path):
    cpu(monkeypatch, lanes, tmp_path, "GenuineIntel")
    monkeypatch.setenv("OPENVINO_LANE_EMULATE", "1")
    monkeypatch.setattr(lanes.shutil, "which", lambda name: "/usr/bin/" + name)
    seen = commands(monkeypatch, lanes)
    plugin_lane(lanes).prepare()
    assert seen == [] and plugin_lane(lanes).environ(Path("python"))["ORT_CONFORMANCE_WRAPPER"] == lanes.EMULATOR


def test_an_emulator_that_cannot_be_installed_skips_the_lane_with_apts_reason(monkeypatch, lanes, tmp_path):
    cpu(monkeypatch, lanes, tmp_path, "AuthenticAMD")
    monkeypatch.setattr(lanes.shutil, "which", lambda name: None)
    commands(monkeypatch, lanes, failing="install")
    outcome = lanes.run_lane(plugin_lane(lanes))
    assert outcome.status == "skipped"
    assert outcome.detail == ("qemu-user is needed to emulate an Intel CPU on this AuthenticAMD CPU: apt-get install -y -qq qemu-user failed: "
                              "E: Unable to locate package qemu-user")


# --- the gate ----------------------------------------------------------------------------------


EMPTY_RUN_FAILED = ("OpenVINOExecutionProvider took the nodes of model 'relu' (float32 [0, 3]) and failed to run them on empty inputs: "
                    "RuntimeException: ... Failed to set tensor. ... Tensor data equal nullptr!")


def plugin_report(*, passes=300, emulated=None, package="onnxruntime-ep-openvino", pairs=(("cpu", "host_accessible"), ("host_accessible", "cpu")),
                  host_accessible=True, verdict="non_conformant", errors=0, broken=("session.empty-tensors",), empty_run=EMPTY_RUN_FAILED):
    results = [{"contract": "session.nodes-on-ep", "outcome": "pass", "message": "", "params": {}}]
    results += [{"contract": "copy.x", "outcome": "pass", "message": "", "params": {}} for _ in range(passes - 1)]
    results += [{"contract": "import.capability", "outcome": "error", "message": "the kit failed", "params": {}} for _ in range(errors)]
    results += [{"contract": contract, "outcome": "fail", "message": empty_run if contract == "session.empty-tensors" else "wrong", "params": {}}
                for contract in broken]
    memory = {"name": "OpenVINO_shared_CPU", "device_mem_type": "host_accessible"} if host_accessible else None
    matrix = {"device": "openvino-plugin", "memories": {"cpu": None, "host_accessible": memory},
              "pairs": [{"source": a, "destination": b, "status": "supported"} for a, b in pairs]}
    reasons = [f"required contract broken: {contract}" for contract in broken] if verdict == "non_conformant" else []
    return {"results": results, "run": {"collected": len(results), "emulated": emulated}, "verdict": verdict, "verdict_reasons": reasons,
            "ep": {"plugin_package": {"name": package, "version": "1.8.1"}}, "capabilities": [matrix]}


@pytest.fixture
def intel(monkeypatch, lanes, tmp_path):
    cpu(monkeypatch, lanes, tmp_path, "GenuineIntel")
    return lanes


def test_the_gate_passes_the_plugins_one_finding_with_its_host_accessible_pairs(intel):
    assert intel.openvino_plugin_gate(plugin_report(), 1) == []


def test_the_gate_fails_on_any_verdict_but_the_empty_tensors_finding_alone(intel):
    expected = "expected non_conformant for session.empty-tensors alone: another contract broken, or a release that fixed it"
    assert intel.openvino_plugin_gate(plugin_report(verdict="conformant", broken=()), 0) == [f"verdict conformant (no reasons), {expected}"]
    assert intel.openvino_plugin_gate(plugin_report(broken=("session.empty-tensors", "copy.x")), 1) == [
        f"verdict non_conformant (required contract broken: session.empty-tensors; required contract broken: copy.x), {expected}"]
    assert intel.openvino_plugin_gate(plugin_report(empty_run="the run failed: another error"), 1) == [
        "session.empty-tensors failed, but not with OpenVINO's 'Tensor data equal nullptr'"]


def test_the_gate_fails_without_a_verdict_or_with_a_kit_error(intel):
    assert intel.openvino_plugin_gate(plugin_report(verdict="incomplete"), 0) == [
        "verdict incomplete (no reasons), expected non_conformant for session.empty-tensors alone: another contract broken, or a release that fixed it"]
    [problem] = intel.openvino_plugin_gate(plugin_report(errors=1), 1)
    assert problem.startswith("1 checks ended in a kit error, first: import.capability")


def test_the_gate_fails_on_another_package_too_few_passes_or_a_missing_pair(intel):
    assert intel.openvino_plugin_gate(plugin_report(package="onnxruntime-openvino"), 1) == [
        "the EP did not come from onnxruntime-ep-openvino: {'name': 'onnxruntime-openvino', 'version': '1.8.1'}"]
    assert intel.openvino_plugin_gate(plugin_report(passes=299), 1) == ["299 passes, fewer than 300"]
    assert intel.openvino_plugin_gate(plugin_report(pairs=(("cpu", "host_accessible"),)), 1) == [
        "openvino-plugin: the pair host_accessible>cpu is not in the copy matrix"]
    assert intel.openvino_plugin_gate(plugin_report(host_accessible=False), 1) == ["openvino-plugin: no HOST_ACCESSIBLE memory in the copy matrix"]


def test_the_gate_fails_when_the_report_does_not_say_the_cpu_was_emulated_as_it_was(monkeypatch, intel):
    assert intel.openvino_plugin_gate(plugin_report(emulated="the EP's processes ran under qemu-x86_64"), 1) == [
        "the report says the CPU was emulated, but the lane did not emulate it"]
    monkeypatch.setenv("OPENVINO_LANE_EMULATE", "1")
    assert intel.openvino_plugin_gate(plugin_report(), 1) == [
        "the report does not say the CPU was emulated, but the lane ran under qemu-x86_64 -cpu Skylake-Client-v4"]


def test_openvino_is_the_plugin_where_its_package_is_installed_and_the_built_in_ep_elsewhere(monkeypatch):
    from conformance.testbed import eps

    catalogue = load_catalogue([str(p) for p in shipped_spec_dirs()], known_checks=known_checks())
    legacy = catalogue.ep_spec("openvino")
    plugin_build = type("Ort", (), {"get_available_providers": staticmethod(lambda: ["CPUExecutionProvider"])})
    legacy_build = type("Ort", (), {"get_available_providers": staticmethod(lambda: ["OpenVINOExecutionProvider", "CPUExecutionProvider"])})
    monkeypatch.setattr(eps.importlib.util, "find_spec", lambda name: object() if name == "onnxruntime_ep_openvino" else None)
    assert eps.as_installed(plugin_build, catalogue, legacy).name == "openvino-plugin"
    assert eps.as_installed(legacy_build, catalogue, legacy).name == "openvino"  # onnxruntime-openvino's own EP
    monkeypatch.setattr(eps.importlib.util, "find_spec", lambda name: None)
    assert eps.as_installed(plugin_build, catalogue, legacy).name == "openvino"  # no plugin package: its install hint is the legacy wheel's
    assert eps.as_installed(plugin_build, catalogue, catalogue.ep_spec("cpu")).name == "cpu"
