"""Mutation tests: the reference EP (refdev/) in each fault mode is caught by the contract
meant to catch it, asserted by contract id; in its correct mode it is conformant.

The library is built by the `refdev_library` fixture (tests/conftest.py); where that is not
possible the tests skip with the build's own reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path

import pytest
from conftest import build_failure_reason, conformance_run

from conformance.calls import Call

ROOT = Path(__file__).resolve().parents[1]

# fault mode -> (verdict, contracts that must be broken, outcome they must end in)
FAULTS = {
    "no-data-transfer": ("non_conformant", {"copy.required-directions", "copy.device-to-device", "streams.sync-stream"}, "fail"),
    "corrupt": ("non_conformant", {"copy.roundtrip-exact", "copy.required-directions", "copy.c-api-roundtrip", "update-inplace.from-numpy",
                                   "update-inplace.from-numpy-read-only"}, "fail"),
    "short-copy": ("non_conformant", {"copy.roundtrip-exact", "copy.roundtrip-large", "update-inplace.from-numpy-large"}, "fail"),
    "no-d2d": ("non_conformant", {"copy.device-to-device", "update-inplace.from-ortvalue"}, "fail"),
    "no-d2h": ("non_conformant", {"copy.required-directions", "copy.c-api-roundtrip"}, "fail"),
    "no-h2d": ("non_conformant", {"copy.required-directions", "copy.c-api-roundtrip"}, "fail"),
    "wrong-memory": ("non_conformant", {"memory-info.declaration"}, "fail"),
    "cpu-default": ("non_conformant", {"memory-info.declaration", "session.nodes-on-ep", "iobinding.in-place", "copy.cpu-default-optional"}, "fail"),
    "alloc-fail": ("non_conformant", {"memory-info.allocatable", "create.from-shape-and-type", "create.from-shape-and-type-shapes"}, "fail"),
    "wrong-compute": ("non_conformant", {"session.nodes-on-ep"}, "fail"),
    # one element past each CPU destination of a device>cpu copy: the guard memory around it
    "overrun": ("non_conformant", {"copy.roundtrip-exact", "copy.required-directions", "copy.c-api-roundtrip", "update-inplace.from-numpy"}, "fail"),
    # Every kernel fails with ORT_EP_FAIL: the kit's sessions do not let onnxruntime rerun the
    # model on the CPU EP, so every check that runs one fails (see test_kernel_failures_are_never_retried_elsewhere).
    "kernel-fails": ("non_conformant", {"session.nodes-on-ep", "iobinding.in-place", "lifecycle.plugin-library"}, "fail"),
    # CopyTensors aborts or never returns: the first copy to the device and the first session
    # run (which copies its inputs there) are lost; see test_a_crashing_call_is_quarantined_alone.
    # The first run with inputs in CPU memory is ordering.run-outputs' (the families run in the
    # order of their files); session.nodes-on-ep then stops before that call.
    "abort": ("non_conformant", {"copy.required-directions", "ordering.run-outputs"}, "crash"),
    "hang": ("non_conformant", {"copy.required-directions", "ordering.run-outputs"}, "timeout"),
    "unregister-crash": ("non_conformant", {"lifecycle.plugin-library"}, "crash"),
    # Also advertises HOST_ACCESSIBLE memory, which refdev's spec does not declare.
    "host-accessible-as-device": ("non_conformant", {"iobinding.host-accessible-in-place", "memory-info.declaration"}, "fail"),
    # Named for a violation C API 23 cannot produce (refdev/README.md); what it breaks instead:
    # the DEFAULT allocator describes itself as HOST_ACCESSIBLE memory.
    "host-accessible-inputs": ("non_conformant", {"memory-info.allocatable", "memory-info.declaration"}, "fail"),
}

# Findings against onnxruntime 1.32 itself, whatever the EP does: copy_tensors and
# update_inplace(numpy) accept a source of another element type, a rebind after a refused
# input binding aborts the process, a value made from a read-only array writes into it, and
# update_inplace(numpy) into HOST_ACCESSIBLE memory is refused.
RUNTIME_FINDINGS = {"copy.bad-requests", "create.read-only-source", "update-inplace.from-numpy-host-accessible",
                    "update-inplace.rejects-mismatch", "iobinding.rejects-bad-output", "iobinding.rebind-after-failure",
                    # copy_tensors between CPU values has no data transfer; a CPU node's output
                    # reaches an EP kernel in CPU memory (tests at the end of this file)
                    "cpu-memory.copy-paths", "placement.kernel-inputs",
                    # update_inplace(numpy) refuses a HOST_ACCESSIBLE destination (where advertised)
                    "cpu-memory.host-accessible-writes",
                    # refusals that name neither sizes nor types; bind_output(device) naming no vendor; device_name() saying "cuda"
                    "errors.copy-refusal", "errors.update-inplace-refusal", "errors.iobinding-refusal", "iobinding.bind-calls", "memory-info.identity",
                    # CopyTensors through the C API takes a source of another element type of the same size
                    "copy.c-api-bad-requests"}


def refdev_run(library: Path, tmp_path: Path, fault: str | None = None, extra_env: dict[str, str] | None = None) -> dict:
    """A conformance run of the reference EP in `fault` mode (none: a correct EP): its report,
    with pytest's exit code as report["_exit"]."""
    # A short timeout only where a call hangs on purpose; elsewhere the default, so that a check
    # slowed by a loaded machine is never taken for a hung one (a timeout instead of its failure).
    timeout = ("--conformance-timeout", "5") if fault == "hang" else ()
    run = conformance_run(tmp_path, "--ep-library", str(library), "--ep", "refdev", *timeout, *without_the_stress_tier(fault),
                          env={**(extra_env or {}), "ORT_REFDEV_FAULT": fault or None})
    return dict(run.report, _exit=run.exit_code)


def without_the_stress_tier(fault: str | None) -> tuple[str, ...]:
    """slow-d2d sleeps 20 ms in each device-to-device copy: the stress tier's 10,000 of them
    would take minutes, and the mode is about staging through the host, not about load."""
    return ("-m", "not stress") if fault == "slow-d2d" else ()


def broken(report: dict, outcome: str) -> set[str]:
    return {r["contract"] for r in report["results"] if r["outcome"] == outcome and r["subject"] == "ep"}


def test_correct_reference_ep_is_conformant(refdev_library, tmp_path):
    report = refdev_run(refdev_library, tmp_path)
    assert report["verdict"] == "conformant", report["verdict_reasons"]
    assert report["_exit"] == 0
    assert report["ep"]["library_sha256"] and len(report["ep"]["library_sha256"]) == 64
    assert (tmp_path / "reports" / "worker-refdev-own.log").exists()  # the lifecycle ran in a process of its own
    passed = {r["contract"] for r in report["results"] if r["outcome"] == "pass"}
    # The device contracts really ran on device memory, not only the CPU-side ones.
    assert {"copy.required-directions", "copy.device-to-device", "copy.roundtrip-exact", "update-inplace.from-ortvalue",
            "session.nodes-on-ep", "memory-info.declaration", "lifecycle.plugin-library", "iobinding.rejects-bad-output",
            "iobinding.rebind-after-failure"} <= passed
    statuses = {(p["source"], p["destination"]): p["status"] for p in report["capabilities"][0]["pairs"]}
    assert statuses[("cpu", "default")] == statuses[("default", "cpu")] == statuses[("default", "default")] == "supported"
    assert "update-inplace.no-host-staging" in passed
    # Each pass says what it proved: on the device, bytes compared and nodes that ran there.
    evidence = {r["nodeid"]: r["details"]["evidence"] for r in report["results"] if r["outcome"] == "pass"}
    assert all(evidence.values())
    nodes = [e for n, e in evidence.items() if "session.nodes-on-ep" in n]
    assert nodes and all(e["nodes_on_ep"] and e["runs_on_ep"] == 1 and e["bytes_compared"] > 0 for e in nodes)
    assert any(e.get("memory", {}).get("destination", "").startswith("RefDev") for n, e in evidence.items() if "update-inplace.from-ortvalue" in n)
    # Every supported direction carries its throughput per size class (figures, not asserted speeds).
    for pair in report["capabilities"][0]["pairs"]:
        if pair["status"] == "supported":
            assert set(pair["throughput"]["copy_tensors"]) == {"4KiB", "1MiB", "64MiB"}
            assert pair["throughput"]["copy_tensors"]["4KiB"] > 0
    # onnxruntime's copy_tensors does not check element types: a real finding, reported apart.
    findings = {(f["contract"], f["params"].get("request")) for f in report["findings"]}
    assert ("copy.bad-requests", "type-mismatch") in findings
    # Every kind of bad copy request was tried on the device, each as its own case.
    tried = {r["params"]["request"]: r["outcome"] for r in report["results"] if r["contract"] == "copy.bad-requests"}
    assert tried == {"size-mismatch": "pass", "fewer-elements": "pass", "type-mismatch": "fail", "other-element-size": "pass", "mixed-memory": "pass",
                     "unequal-lists": "pass", "empty-lists": "pass"}
    # the C path too: CopyTensors through the C API takes the same element-type mismatch
    assert ("copy.c-api-bad-requests", "type-mismatch") in findings


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_mode_is_caught_by_its_contract(refdev_library, tmp_path, fault):
    verdict, contracts, outcome = FAULTS[fault]
    report = refdev_run(refdev_library, tmp_path, fault)
    assert report["verdict"] == verdict, report["verdict_reasons"]
    assert report["_exit"] != 0
    caught = broken(report, outcome)
    assert caught, f"no contract ended in {outcome}"
    assert contracts <= caught, f"expected {sorted(contracts)} among {sorted(caught)}"
    # A broken EP does not produce findings against onnxruntime: runtime-subject checks whose
    # valid set-up already fails on the EP are not_run, not blamed on the runtime.
    assert {f["contract"] for f in report["findings"]} <= RUNTIME_FINDINGS
    if outcome in ("crash", "timeout"):
        # The run survived: every collected check has a result, and the lost ones are listed.
        assert len(report["results"]) == report["run"]["collected"]
        assert report["run"]["lost"] and all(one["outcome"] == outcome for one in report["run"]["lost"])


def test_kernel_failures_are_never_retried_elsewhere(refdev_library, tmp_path):
    """kernel-fails: each check that runs a session on the EP fails with the kernel's own error
    (Python's InferenceSession would rerun it on the CPU EP and pass); none of them passes."""
    report = refdev_run(refdev_library, tmp_path, "kernel-fails")
    runs = {"session.nodes-on-ep", "iobinding.in-place", "lifecycle.plugin-library"}
    results = [r for r in report["results"] if r["contract"] in runs and r["outcome"] not in ("not_applicable", "not_run")]
    assert results and all(r["outcome"] == "fail" for r in results), [(r["nodeid"], r["outcome"]) for r in results]
    assert all("fault 'kernel-fails': the kernel fails on purpose" in r["message"] for r in results), [r["message"] for r in results]
    assert not any("Falling back" in (tmp_path / "reports" / log).read_text(errors="replace")
                   for log in os.listdir(tmp_path / "reports") if log.endswith(".log"))


# Checks that never make the call refdev's CopyTensors crashes or hangs in: they give real
# results in the abort and hang modes, however many checks were lost before them.
NO_DEVICE_COPY = {("memory-info.declaration", ()), ("memory-info.allocatable", ("default",)),
                  ("memory-info.session-inputs", ("add", "float32"))}


@pytest.mark.parametrize("fault", ["abort", "hang"])
def test_a_crashing_call_is_quarantined_alone(refdev_library, tmp_path, fault):
    report = refdev_run(refdev_library, tmp_path, fault)
    outcome = FAULTS[fault][2]
    lost = [r for r in report["results"] if r["outcome"] == outcome]
    # One loss per call, each naming the call it was in (its details carry the call's wire dict).
    calls = [str(Call.from_wire(r["details"]["call"])) for r in lost]
    # The C API's CopyTensors (copy.c-api-roundtrip) is a call of its own beside Python's copy_tensors;
    # so is a run of each empty shape (session.empty-tensors), whose inputs onnxruntime copies to the device too.
    assert sorted(calls) == ["CopyTensors cpu>default", "InferenceSession.run, inputs in cpu", "InferenceSession.run, inputs in cpu, shape [0, 3]",
                             "InferenceSession.run, inputs in cpu, shape [2, 0, 4]", "copy_tensors cpu>default"]
    assert all(call in r["message"] for call, r in zip(calls, lost, strict=True))
    outcomes = {(r["contract"], tuple(r["params"].values())): r["outcome"] for r in report["results"]}
    assert {case: outcomes[case] for case in NO_DEVICE_COPY} == {case: "pass" for case in NO_DEVICE_COPY}
    # A check reaching a lost call stops there, naming the call and the check that lost it.
    first_copy = next(r for call, r in zip(calls, lost, strict=True) if call == "copy_tensors cpu>default")
    stopped = [r for r in report["results"] if r["details"].get("quarantined_call") == "copy_tensors cpu>default"]
    assert len(stopped) > 100 and all(r["outcome"] == "not_run" for r in stopped)
    assert all(f"stopped before copy_tensors cpu>default: that call ended in {outcome} in the earlier check "
               f"{first_copy['nodeid'].split('::')[-1]}" in r["message"] for r in stopped)
    stream = next(r for r in report["results"] if r["contract"] == "streams.sync-stream")
    assert stream["outcome"] == "not_run" and "copy_tensors cpu>default" in stream["message"]  # created the stream, then stopped
    lifecycle = next(r for r in report["results"] if r["contract"] == "lifecycle.plugin-library")
    assert lifecycle["outcome"] == "not_run" and "copy_tensors cpu>default" in lifecycle["message"]


# fault mode -> the copy directions the probe must report with this status
MATRIX = {
    "no-d2d": {("default", "default"): "required_but_missing", ("cpu", "default"): "supported"},
    # With no way back to the CPU, a copy to the device cannot be checked: it is not "supported".
    "no-d2h": {("default", "cpu"): "required_but_missing", ("cpu", "default"): "unverified"},
    "corrupt": {("cpu", "default"): "broken"},
}


@pytest.mark.parametrize("fault", sorted(MATRIX))
def test_copy_matrix_reports_what_the_fault_broke(refdev_library, monkeypatch, fault):
    import conformance
    import conformance.engine.capabilities  # noqa: F401  (the library call must survive its module's import)

    monkeypatch.setenv("ORT_REFDEV_FAULT", fault)
    matrix = conformance.probe("refdev", library=str(refdev_library), timeout=30)
    statuses = {(p.source, p.destination): p.status for p in matrix.devices[0].pairs}
    for pair, status in MATRIX[fault].items():
        assert statuses[pair] == status, statuses


def test_device_copy_staged_through_the_host_is_caught_by_the_recommended_contract(refdev_library, tmp_path):
    report = refdev_run(refdev_library, tmp_path, "slow-d2d")
    assert "update-inplace.no-host-staging" in broken(report, "fail")
    # Values stay right, so only the recommended contract fails: the verdict is not changed,
    # the run still exits non-zero (a failed check), and the message gives both timings.
    assert report["verdict"] == "conformant", report["verdict_reasons"]
    assert report["_exit"] != 0
    failed = [r for r in report["results"] if r["outcome"] == "fail" and r["subject"] == "ep"]
    assert {r["contract"] for r in failed} == {"update-inplace.no-host-staging"}
    assert "round trip" in failed[0]["message"]


def test_ep_claiming_no_node_is_incomplete_not_conformant(refdev_library, tmp_path):
    report = refdev_run(refdev_library, tmp_path, "claim-nothing")
    assert report["verdict"] == "incomplete"
    not_run = {r["contract"] for r in report["results"] if r["outcome"] == "not_run"}
    assert "session.nodes-on-ep" in not_run
    assert "lifecycle.plugin-library" in not_run  # its session ran no node on the EP: nothing of the library was used


def test_host_accessible_memory_is_checked_when_advertised(refdev_library, tmp_path):
    report = refdev_run(refdev_library, tmp_path, extra_env={"ORT_REFDEV_HOST_ACCESSIBLE": "1"})
    outcomes = {(r["contract"], r["params"].get("memory", r["params"].get("dtype"))): r["outcome"] for r in report["results"]}
    assert outcomes[("copy.host-accessible-alias", "float32")] == "pass"
    assert outcomes[("memory-info.allocatable", "host_accessible")] == "pass"
    assert outcomes[("iobinding.host-accessible-in-place", "float32")] == "pass"
    assert len([r for r in report["results"] if r["contract"] == "iobinding.host-accessible-in-place" and r["outcome"] == "pass"]) == 2
    # refdev's spec declares no HOST_ACCESSIBLE memory, so the build now contradicts it.
    assert "memory-info.declaration" in broken(report, "fail")
    # HOST_ACCESSIBLE memory as a copy's source and destination, and as
    # what is allocated; update_inplace(numpy) into it is refused by onnxruntime's Python layer
    for contract in ("copy.host-accessible-directions", "update-inplace.from-ortvalue-host-accessible", "create.from-shape-and-type"):
        assert {r["outcome"] for r in report["results"] if r["contract"] == contract and r["params"].get("memory", "host") != "default"} == {"pass"}
    assert "update-inplace.from-numpy-host-accessible" in {f["contract"] for f in report["findings"]}


def test_copies_with_host_accessible_memory_that_corrupt_fail(refdev_library, tmp_path):
    report = refdev_run(refdev_library, tmp_path, fault="corrupt", extra_env={"ORT_REFDEV_HOST_ACCESSIBLE": "1"})
    assert {"copy.host-accessible-directions", "update-inplace.from-ortvalue-host-accessible", "create.from-shape-and-type",
            "create.from-shape-and-type-shapes"} <= broken(report, "fail")


def test_copy_matrix_includes_the_other_devices_present(refdev_library, monkeypatch):
    """With two virtual devices, each device's matrix has the other's DEFAULT memory as an
    endpoint (the two-GPU case), tried for real in both directions."""
    import conformance

    monkeypatch.setenv("ORT_REFDEV_DEVICES", "2")
    matrix = conformance.probe("refdev", library=str(refdev_library), timeout=30)
    first, second = matrix.devices
    other = "RefDevExecutionProvider:RefDev:1"
    assert first.memories[other]["device_id"] == 1 and first.memories["default"]["device_id"] == 0
    statuses = {(p.source, p.destination): p.status for p in first.pairs}
    assert statuses[("default", other)] == statuses[(other, "default")] == statuses[("cpu", other)] == "supported"
    assert first.supports("default", other) and matrix.supports("cpu", other, device=first.label)
    assert len(first.pairs) == 3 * 3  # cpu, default, the other device
    assert "RefDevExecutionProvider:RefDev:0" in second.memories


def test_ep_without_a_spec_is_checked_against_what_it_advertises(refdev_library, tmp_path):
    """A vendor's library with no EP declaration: the device contracts apply from what its EP
    device advertises (non-CPU DEFAULT memory), and the run says no declaration was given."""
    code = f"""
import json
from conformance.rules import applicability
from conformance import data
from conformance.engine.runner import Runner
runner = Runner("RefDevExecutionProvider", specs=[str(data.contracts_dir())], library={str(refdev_library)!r})
device = runner.facts.devices[0]
out = {{"declared": runner.facts.declared}}
for contract_id in ("memory-info.declaration", "copy.required-directions"):
    skip = applicability.decide(runner.catalogue.contract(contract_id), runner.facts, device, None)
    params = {{"direction": "cpu>default"}} if contract_id.startswith("copy") else {{}}
    out[contract_id] = skip.reason if skip else runner.run(contract_id, 0, params)["outcome"]
print(json.dumps(out))
"""
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    out = json.loads(completed.stdout.strip().splitlines()[-1])
    assert out == {"declared": False, "memory-info.declaration": "no vendor declaration (EP spec) was given for this EP",
                   "copy.required-directions": "pass"}


# --- when the headers cannot be fetched: the skip reason is the fetch script's own --------------

def failed_build(tmp_path: Path, **env: str) -> str:
    """`make -C refdev` into an empty build folder with the given environment; its reason."""
    build = subprocess.run(["make", "-C", str(ROOT / "refdev"), f"BUILD={tmp_path / 'build'}"], capture_output=True, text=True,
                           env=dict(os.environ, **env), timeout=120)
    assert build.returncode != 0 and "Error 3" in build.stderr, build.stderr
    return build_failure_reason(build.stderr)


def test_no_apt_source_is_the_skip_reason(tmp_path):
    (tmp_path / "parts").mkdir()
    reason = failed_build(tmp_path, REFDEV_APT_SOURCES_LIST=str(tmp_path / "none"), REFDEV_APT_SOURCES_PARTS=str(tmp_path / "parts"))
    assert reason == (f"fetch-headers.sh: cannot fetch onnxruntime headers: no Debian mirror found in {tmp_path / 'none'} "
                      f"or {tmp_path / 'parts'}/")


def test_an_unreachable_source_is_named_without_its_address(tmp_path):
    (tmp_path / "parts").mkdir()
    missing = tmp_path / "no-such-mirror"
    (tmp_path / "sources.list").write_text(f"deb file://{missing} sid main\n")
    reason = failed_build(tmp_path, REFDEV_APT_SOURCES_LIST=str(tmp_path / "sources.list"), REFDEV_APT_SOURCES_PARTS=str(tmp_path / "parts"))
    assert reason.startswith("fetch-headers.sh: cannot fetch onnxruntime headers: apt-get update for suite sid from "
                             "the Debian mirror of this machine's apt sources failed (E:")
    assert str(missing) not in reason and "file:" not in reason


def test_no_apt_get_is_the_skip_reason(tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "find", "dirname", "make", "gcc", "cc", "mkdir", "sed"):
        found = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if found:
            (tools / tool).symlink_to(found)
    reason = failed_build(tmp_path, PATH=str(tools))
    assert reason == "fetch-headers.sh: cannot fetch onnxruntime headers: apt-get not found"


# --- refdev/smoke.py ---------------------------------------------------------------------------


def load_smoke():
    spec = spec_from_file_location("refdev_smoke", ROOT / "refdev" / "smoke.py")
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
    with pytest.raises(SystemExit, match="smoke.py: cannot read the fault modes: .*faults.c"):
        smoke.fault_modes()
    (tmp_path / "faults.c").write_text("int main(void) { return 0; }\n")
    with pytest.raises(SystemExit, match="no k_fault_names array in"):
        smoke.fault_modes()


# --- CPU memory everywhere, placement --------------


def refdev_subset(library: Path, folder: Path, selection: str, **env: str) -> dict:
    """The results of the contracts `selection` (-k) names, on refdev with `env` set, by id and
    parameter values (in the YAML's order)."""
    folder.mkdir()
    run = conformance_run(folder, "--ep-library", str(library), "--ep", "refdev", "-k", selection, env={"ORT_REFDEV_FAULT": None, **env})
    return {(r["contract"], tuple(r["params"].values())): r for r in run.report["results"]}


def run_script(script: str, **env: str) -> subprocess.CompletedProcess:
    """A reproducer run as a user runs it: its own interpreter, isolated, from another folder."""
    return subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120, cwd="/",
                          env={**os.environ, "ORT_REFDEV_FAULT": "", **env})


def test_placement_reads_the_memory_of_each_kernel_input_and_the_misplaced_inputs_fault_fails_it(refdev_library, tmp_path):
    good = refdev_subset(refdev_library, tmp_path / "good", "placement")
    add = good[("placement.kernel-inputs", ("add",))]
    assert add["outcome"] == "pass" and add["details"]["evidence"]["kernel_inputs_recorded"] == 2, add
    assert add["details"]["evidence"]["declared"] == "gpu default 0xC0DE"
    # onnxruntime 1.32 hands a CPU node's output to the RefDev kernel in CPU memory (its
    # MemcpyFromHost runs on the CPU EP): a finding against onnxruntime, with its script.
    for recipe in ("sub_relu", "relu_neg_add"):
        found = good[("placement.kernel-inputs", (recipe,))]
        assert (found["outcome"], found["subject"]) == ("fail", "runtime") and "cpu default memory of vendor 0x0" in found["message"], found
        assert run_script(found["details"]["violations"][0]["reproducer"]).returncode == 1
    broken = refdev_subset(refdev_library, tmp_path / "broken", "placement", ORT_REFDEV_FAULT="misplaced-inputs")
    failed = broken[("placement.kernel-inputs", ("add",))]
    assert failed["outcome"] == "fail" and "received input 0 in cpu default memory" in failed["message"], failed
    script = failed["details"]["violations"][0]["reproducer"]
    assert run_script(script, ORT_REFDEV_FAULT="misplaced-inputs").returncode == 1
    assert run_script(script).returncode == 0  # the same script passes on the good build


def test_cpu_side_writes_into_host_accessible_memory_are_checked_and_a_corrupting_copy_fails_them(refdev_library, tmp_path):
    good = refdev_subset(refdev_library, tmp_path / "good", "host-accessible-writes", ORT_REFDEV_HOST_ACCESSIBLE="1")
    outcomes = {params: r["outcome"] for (contract, params), r in good.items()}
    assert outcomes[("copy_tensors", "float32")] == outcomes[("iobinding-output", "int8")] == outcomes[("update_inplace-ortvalue", "float32")] == "pass"
    # onnxruntime 1.32's update_inplace(numpy) refuses a HOST_ACCESSIBLE destination of a plugin EP.
    refused = good[("cpu-memory.host-accessible-writes", ("update_inplace-numpy", "float32"))]
    assert refused["outcome"] == "fail" and "Unsupported GPU device" in refused["message"], refused
    assert run_script(refused["details"]["violations"][0]["reproducer"], ORT_REFDEV_HOST_ACCESSIBLE="1").returncode == 1
    broken = refdev_subset(refdev_library, tmp_path / "broken", "host-accessible-writes and copy_tensors",
                           ORT_REFDEV_HOST_ACCESSIBLE="1", ORT_REFDEV_FAULT="corrupt")
    failed = broken[("cpu-memory.host-accessible-writes", ("copy_tensors", "float32"))]
    assert failed["outcome"] == "fail" and "the CPU does not see the source bytes" in failed["message"], failed
    script = failed["details"]["violations"][0]["reproducer"]
    assert run_script(script, ORT_REFDEV_HOST_ACCESSIBLE="1", ORT_REFDEV_FAULT="corrupt").returncode == 1
    assert run_script(script, ORT_REFDEV_HOST_ACCESSIBLE="1").returncode == 0


# --- empty tensors --------------


def test_a_taken_node_that_fails_on_an_empty_tensor_breaks_session_empty_tensors(refdev_library, tmp_path):
    """empty-fails: refdev takes Relu and Add of empty shapes and its kernels fail on them, as the
    OpenVINO plugin EP 1.8.1 does. session.empty-tensors fails with the EP's error and a script
    that fails on that build and passes on the correct one; iobinding.bind-calls, whose plain run
    of the same model fails first, stays not_run and names the contract. On plain refdev it passes."""
    good = refdev_subset(refdev_library, tmp_path / "good", "session.empty-tensors")
    taken = good[("session.empty-tensors", ("relu", "float32", "0x3"))]
    assert taken["outcome"] == "pass", taken
    assert taken["details"]["evidence"]["nodes_on_ep"] == ["Relu"] and taken["details"]["evidence"]["output"] == {"shape": [0, 3], "dtype": "float32"}
    declined = good[("session.empty-tensors", ("identity", "float32", "0x3"))]  # refdev takes no Identity: onnxruntime places it on the CPU EP
    assert declined["outcome"] == "not_applicable" and "declines model 'identity'" in declined["message"], declined
    broken = refdev_subset(refdev_library, tmp_path / "broken", "session.empty-tensors or (bind-calls and float32-0x3)", ORT_REFDEV_FAULT="empty-fails")
    failed = broken[("session.empty-tensors", ("add", "float32", "2x0x4"))]
    assert failed["outcome"] == "fail" and failed["subject"] == "ep", failed
    assert "took the nodes of model 'add' (float32 [2, 0, 4]) and failed to run them on empty inputs" in failed["message"]
    assert "fault 'empty-fails': input 0 has no elements" in failed["message"]
    script = failed["details"]["violations"][0]["reproducer"]
    assert run_script(script, ORT_REFDEV_FAULT="empty-fails").returncode == 1
    assert run_script(script).returncode == 0  # the same script passes on the good build
    bound = broken[("iobinding.bind-calls", ("bind-cpu-input", "relu", "float32", "0x3"))]
    assert bound["outcome"] == "not_run" and "session.empty-tensors" in bound["message"], bound


def test_a_copy_landing_after_it_returned_gives_no_kit_error(refdev_library, tmp_path):
    """early-return: a copy with no stream is queued and returns before it lands. Whatever the
    worker reads next (values, shapes, its own records), what makes no sense is the EP's failure
    or crash with the evidence, never `error`, which is kept for defects of the kit (issue 38)."""
    report = refdev_run(refdev_library, tmp_path, "early-return")
    assert report["verdict"] == "non_conformant", report["verdict_reasons"]
    errors = [(r["nodeid"], r["message"]) for r in report["results"] if r["outcome"] == "error"]
    assert errors == []
    assert broken(report, "fail")
