"""Real-EP support: the EP specs, EP loading quirks, a non-functional EP, `ort-conformance found`
and the gates of lanes/run, each shown to fail where it must."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from conftest import LANES

from conformance.facts import DeviceFacts, EpFacts, MemoryFacts, OnnxruntimeFacts
from conformance.rules import applicability

from conformance.testbed import eps

from conformance.tools import found
from conformance.checks import known_checks
from conformance.cli import main as cli
from conformance.catalogue.contracts import CLAIMS
from conformance.outcomes import Outcome, Result, Verdict, verdict
from conformance.catalogue.spec import load_catalogue
from conformance.data import shipped_spec_dirs
from conformance.errors import SpecErrors

REPO = Path(__file__).resolve().parent.parent


def catalogue(*extra: str):
    return load_catalogue([str(p) for p in shipped_spec_dirs()] + list(extra), known_checks=known_checks())


# --- the EP specs ----------------------------------------------------------------------------

ECOSYSTEM = ["cpu", "webgpu", "cuda", "tensorrt", "nv-tensorrt-rtx", "openvino", "openvino-plugin", "directml", "qnn",
             "migraphx", "cann", "coreml", "xnnpack", "vitisai", "ggml"]


@pytest.mark.parametrize("name", ECOSYSTEM)
def test_every_ep_spec_states_its_memory_model_and_whether_each_claim_was_verified(name):
    spec = catalogue().ep_spec(name)
    assert spec is not None and spec.name == name
    assert spec.session_inputs and spec.session_outputs
    assert set(spec.verification) == set(CLAIMS), f"{name}: every claim says whether a run verified it"
    assert all(source.claims for source in spec.sources), f"{name}: every source names the claims it backs"


def test_the_maintainers_table_is_what_the_specs_say():
    specs = catalogue()
    cuda, qnn, openvino = specs.ep_spec("cuda"), specs.ep_spec("qnn"), specs.ep_spec("openvino-plugin")
    assert "host_accessible" in cuda.session_outputs and "host_accessible" not in cuda.session_inputs
    assert qnn.session_inputs == qnn.session_outputs == ("default",)
    # The plugin's HOST_ACCESSIBLE memory is host memory of its CPU device, which copy_tensors reaches both ways (measured by lane openvino-plugin).
    assert openvino.default_memory is None and openvino.host_accessible.device_type == "cpu"
    assert openvino.copy_directions == (("cpu", "host_accessible"), ("host_accessible", "cpu"))


def test_one_provider_may_have_a_built_in_spec_and_a_plugin_spec():
    specs = catalogue()
    assert specs.ep_spec("OpenVINOExecutionProvider").name == "openvino"
    assert specs.ep_spec("openvino-plugin").plugin_module == "onnxruntime_ep_openvino"


def errors_of_variant(tmp_path, shipped: str, *replacements: tuple[str, str]):
    """The errors of a copy of a shipped EP spec with some text replaced, loaded beside the catalogue."""
    text = (REPO / "specs/eps" / shipped).read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    (tmp_path / shipped).write_text(text)
    with pytest.raises(SpecErrors) as info:
        catalogue(str(tmp_path / shipped))
    return info.value.errors


CUDA_RENAMED = (("name: cuda", "name: cuda2"), ("aliases: [CUDA]", "aliases: []"))


def test_a_second_built_in_spec_for_the_same_provider_is_still_an_error(tmp_path):
    errors = errors_of_variant(tmp_path, "cuda.yaml", *CUDA_RENAMED)
    assert any("'cudaexecutionprovider' is already declared" in e.message for e in errors)


def test_a_known_issue_naming_an_unknown_contract_is_an_error(tmp_path):
    errors = errors_of_variant(tmp_path, "cuda.yaml", *CUDA_RENAMED, ("provider: CUDAExecutionProvider", "provider: Cuda2"),
                               ("contract: session.nodes-on-ep", "contract: session.nodes-on-eq"))
    assert [e.key for e in errors] == ["ep.known_issues[0].contract"]


def test_a_verification_without_how_is_rejected(tmp_path):
    errors = errors_of_variant(tmp_path, "ggml.yaml", ("name: ggml", "name: ggml2"), ("provider: ggml", "provider: ggml2"),
                               ("aliases: [onnxruntime-ggml]", "aliases: []"),
                               ('device_type: {verified: true, how: "lane ggml: one EP device on the CPU hardware device"}', "device_type: {verified: true}"))
    assert any("how" in e.message for e in errors)


# --- loading EPs -----------------------------------------------------------------------------


def test_a_plugin_package_with_library_path_and_ep_name_constant_is_understood(monkeypatch):
    module = types.ModuleType("fake_ggml_like")
    module.library_path = lambda: "/opt/lib/libfake.so"
    module.EP_NAME = "fake"
    monkeypatch.setitem(sys.modules, "fake_ggml_like", module)
    assert eps._plugin("fake_ggml_like") == ("/opt/lib/libfake.so", "fake")


@pytest.mark.parametrize("name, package", [("cuda", "pip install onnxruntime-gpu"), ("ggml", "pip install onnxruntime-ggml"),
                                           ("openvino", "pip install onnxruntime-openvino")])
def test_an_ep_whose_package_is_missing_names_the_package(name, package):
    with pytest.raises(eps.EpUnavailable) as info:
        eps.resolve(name, catalogue())
    assert package in str(info.value)


class FallbackRuntime:
    """Stands in for onnxruntime-gpu without a GPU: sessions come back with the CPU EP only."""

    __version__ = "1.31.1"

    def __init__(self, providers):
        self.providers = providers

    class SessionOptions:
        log_severity_level = 0

    def InferenceSession(self, model, options, providers):
        return types.SimpleNamespace(get_providers=lambda: self.providers)


def target():
    return eps.EpTarget("cuda", "CUDAExecutionProvider", None, [], {})


def test_a_silent_fallback_to_cpu_is_reported_as_not_functional():
    reason = eps.fallback_reason(FallbackRuntime(["CPUExecutionProvider"]), target())
    assert "CUDAExecutionProvider" in reason and "not functional" in reason and "fell back to CPUExecutionProvider" in reason


def test_a_provider_that_stays_in_the_session_is_functional():
    assert eps.fallback_reason(FallbackRuntime(["CUDAExecutionProvider", "CPUExecutionProvider"]), target()) is None


def test_every_check_of_a_non_functional_ep_is_not_run_and_the_verdict_says_why():
    contract = catalogue().contract("copy.required-directions")
    run = {"unusable": "CUDAExecutionProvider is not functional here", "api": {}, "onnxruntime": {"version": "1.31.1"}}
    skip = applicability.decide(contract, EpFacts.from_wire(run), DeviceFacts(0, "cuda"), None)
    assert skip.outcome is Outcome.NOT_RUN and skip.reason == run["unusable"]
    results = [Result(c, "CUDAExecutionProvider", "cuda", {}, Outcome.NOT_RUN, run["unusable"], "s:1", "required", "ep")
               for c in ("copy.a", "copy.b")]
    decided, reasons = verdict(results)
    assert decided is Verdict.INCOMPLETE and reasons[0] == f"no check could run: {run['unusable']}"


# --- ort-conformance found -------------------------------------------------------------------


def report(label="openvino", provider="OpenVINOExecutionProvider", results=(), verdict_="conformant"):
    return {
        "schema": "ort-ep-conformance/report/1", "kit_version": "0.1.0", "onnxruntime": {"version": "1.24.1", "package": "onnxruntime-openvino"},
        "ep": {"name": provider, "label": label, "declared": True, "ep_device": False, "version": None},
        "devices": [{"label": label, "hardware": None, "memory": {"default": None, "host_accessible": None}}],
        "verdict": verdict_, "verdict_reasons": [], "summary": {"pass": 1, "fail": len(results)},
        "findings": [r for r in results if r["subject"] == "runtime"], "results": list(results),
        "capabilities": [{"ep": provider, "device": label, "pairs": [
            {"source": "cpu", "destination": "cpu", "status": "not_required", "required": False, "detail": "no data transfer"}]}],
        "run": {"started": "2026-11-29T00:00:00Z", "platform": "Linux", "python": "3.11"},
    }


def failure(contract, message, subject="runtime", params=None):
    return {"contract": contract, "ep": "OpenVINOExecutionProvider", "device": "openvino", "outcome": "fail", "message": message,
            "spec": f"specs/contracts/{contract.split('.')[0]}.yaml:1", "subject": subject, "params": params or {"dtype": "float32"}}


def write_report(folder: Path, lane: str, data: dict) -> str:
    (folder / lane).mkdir()
    path = folder / lane / "report.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_found_names_the_upstream_issue_a_failure_matches_and_the_unverified_claims(tmp_path):
    path = write_report(tmp_path, "openvino", report(results=[
        failure("update-inplace.non-contiguous", "strided numpy source: values differ after update_inplace: 3 of 4 bytes differ"),
        failure("update-inplace.rejects-mismatch", "update_inplace(numpy) accepted a int32 source")]))
    text = found.render(found.load_reports([path]), catalogue())
    assert "## openvino: OpenVINOExecutionProvider" in text
    assert "https://github.com/microsoft/onnxruntime/issues/13548" in text
    row = next(line for line in text.splitlines() if line.startswith("| update-inplace.rejects-mismatch"))
    assert row.endswith("| none found |")
    claims = next(line for line in text.splitlines() if line.startswith("| copy_directions |"))
    assert "| **no** |" in claims  # openvino.yaml leaves its copy directions unverified


def test_found_says_an_ep_without_an_ep_device_advertised_no_memory_info(tmp_path):
    text = found.render(found.load_reports([write_report(tmp_path, "openvino", report())]), catalogue())
    advertised = text.split("### What the build advertises", 1)[1].split("###", 1)[0]
    assert "no memory info was advertised" in advertised
    assert "plain CPU memory" not in advertised
    matrix = text.split("### Copy matrix", 1)[1].split("###", 1)[0]
    assert "only plain CPU memory could be probed" in matrix


def test_found_shows_the_throughput_figures_beside_host_memcpy(tmp_path):
    data = report()
    data["capabilities"][0]["pairs"][0]["throughput"] = {"update_inplace": {"4KiB": 3.0, "64MiB": None}}
    data["capabilities"][0]["host_memcpy"] = {"4KiB": 12.0, "64MiB": 10.0}
    text = found.render(found.load_reports([write_report(tmp_path, "openvino", data)]), catalogue())
    assert "#### Copy throughput of `openvino` (measured, informational)" in text
    assert "| host memcpy (numpy) | | | 12 GB/s | 10 GB/s |" in text
    assert "| cpu | cpu | update_inplace | 3 GB/s (0.25× memcpy) | - |" in text


def test_found_does_not_name_an_issue_whose_text_does_not_match(tmp_path):
    path = write_report(tmp_path, "openvino", report(results=[failure("update-inplace.non-contiguous", "the process crashed")]))
    assert "13548" not in found.render(found.load_reports([path]), catalogue())


def test_found_from_a_file_that_is_not_a_report_is_one_message_and_exit_1(tmp_path, capsys):
    (tmp_path / "x.json").write_text('{"hello": 1}')
    assert cli(["found", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err.strip() == f"ort-conformance: {tmp_path / 'x.json'}: not an ort-ep-conformance report (schema None)"


# --- lanes/run -------------------------------------------------------------------------------


def lane_report(*results, collected=None, verdict_="conformant", reasons=()):
    return {"results": list(results), "run": {"collected": len(results) if collected is None else collected},
            "verdict": verdict_, "verdict_reasons": list(reasons)}


def case(contract, outcome="pass", message="", **params):
    return {"contract": contract, "outcome": outcome, "message": message, "params": params}


def test_a_run_with_missing_results_or_a_broken_exit_fails_every_gate():
    problems = LANES.complete(lane_report(case("session.nodes-on-ep"), collected=3), 2)
    assert problems == ["the run broke (pytest exit 2)", "3 checks collected, 1 results"]


def test_a_device_lane_fails_when_a_copy_it_must_exercise_did_not_pass():
    results = [case("copy.required-directions", direction="cpu>default"), case("copy.required-directions", direction="default>cpu"),
               case("copy.device-to-device", direction="default>default"), case("update-inplace.from-numpy"),
               case("update-inplace.from-ortvalue", "fail", direction="cpu>default")]
    assert LANES.device_copies(lane_report(*results), 1) == [
        "update_inplace(OrtValue) was not exercised with a pass (update-inplace.from-ortvalue)"]
    results[-1] = case("update-inplace.from-ortvalue", direction="default>default")
    assert LANES.device_copies(lane_report(*results), 1) == []


def test_the_webgpu_lane_fails_on_a_stress_failure_that_is_not_one_of_the_eps_known_findings():
    """Issue 36: a broken stress result must be one of the EP's findings (WEBGPU_STRESS_BROKEN, against
    the EP); the kit's own crash (endurance.allocations, before AllocatorGetStats was guarded) fails the lane."""
    copies = [case("copy.required-directions", direction="cpu>default"), case("copy.required-directions", direction="default>cpu"),
              case("copy.device-to-device", direction="default>default"), case("update-inplace.from-numpy"),
              case("update-inplace.from-ortvalue"), case("import.capability", "not_applicable")]
    known = [{**case(contract, "crash" if contract == "size.large-copy" else "fail", "Command encoding already finished"), "subject": "ep"}
             for contract in LANES.WEBGPU_STRESS_BROKEN]
    assert LANES.webgpu_gate(lane_report(*copies, *known, case("endurance.allocations")), 1) == []
    kits = {**case("endurance.allocations", "crash", "killed by SIGSEGV"), "subject": "ep"}
    assert LANES.webgpu_gate(lane_report(*copies, *known, kits), 1) == [
        "endurance.allocations is crash, not one of the EP's known findings: killed by SIGSEGV"]
    runtime = {**known[0], "subject": "runtime"}  # a known contract broken for another reason is news as well
    assert LANES.webgpu_gate(lane_report(*copies, runtime, *known[1:]), 1)[0].startswith("concurrency.copies is fail, not one of")
    fixed = [case("concurrency.sessions"), *[k for k in known if k["contract"] != "concurrency.sessions"]]
    assert LANES.webgpu_gate(lane_report(*copies, *fixed), 1) == [
        "concurrency.sessions no longer breaks (a release that fixed it?): update WEBGPU_STRESS_BROKEN"]
    quarantined = [case("concurrency.copies", "not_run", "stopped before CopyTensors default>cpu"), *known[1:]]
    assert LANES.webgpu_gate(lane_report(*copies, *quarantined), 1) == []  # not shown either way
    assert LANES.webgpu_gate(lane_report(*copies), 1) == []  # a selection without the stress tier asks nothing of it


def test_the_legacy_openvino_lane_needs_a_verdict_naming_its_api_level_and_nothing_not_run():
    above = "needs onnxruntime 1.30's API (memory_info_alloc); onnxruntime 1.24.1 is at API level 1.24, the level this run certifies"
    good = dict(lane_report(case("session.nodes-on-ep"), case("create.from-shape-and-type", "not_applicable", above)),
                api_level="1.24", verdict_text="conformant at onnxruntime 1.24's API")
    assert LANES.openvino_gate(good, 0) == []
    incomplete = dict(good, results=[*good["results"], case("update-inplace.from-ortvalue", "not_run", "needs update_inplace_ortvalue")],
                      run={"collected": 3}, verdict="incomplete", verdict_text="incomplete at onnxruntime 1.24's API",
                      verdict_reasons=["required contract could not run: update-inplace.from-ortvalue"])
    assert LANES.openvino_gate(incomplete, 0) == [
        "verdict incomplete, expected conformant or non_conformant: required contract could not run: update-inplace.from-ortvalue",
        "1 cases not_run, first: update-inplace.from-ortvalue: needs update_inplace_ortvalue"]
    unnamed = dict(good, verdict_text="conformant")
    assert LANES.openvino_gate(unnamed, 0) == ["the verdict does not name the API level it certifies: conformant"]


def test_the_cuda_absent_lane_fails_if_anything_passed_or_the_reason_is_missing():
    reasons = ["no check could run: CUDAExecutionProvider is listed by onnxruntime-gpu but is not functional here"]
    good = lane_report(case("copy.x", "not_run"), case("package.listed-eps-run", "fail"), verdict_="incomplete", reasons=reasons)
    assert LANES.nothing_ran(good, 0) == []
    assert LANES.nothing_ran(lane_report(case("copy.x", "not_run"), verdict_="incomplete", reasons=reasons), 0) == [
        "no finding against the package: package.listed-eps-run did not fail"]
    bad = lane_report(case("copy.x"), verdict_="incomplete", reasons=["required contract could not run: copy.y"])
    assert LANES.nothing_ran(bad, 0) == ["a check passed although the EP is not functional here",
                                        "the verdict does not say the EP is not functional: ['required contract could not run: copy.y']",
                                        "no finding against the package: package.listed-eps-run did not fail"]


def test_a_lane_that_cannot_be_set_up_is_skipped_with_its_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(LANES, "REPORTS", tmp_path)

    def absent():
        raise LANES.Skip("no NVIDIA GPU on this machine")

    outcome = LANES.run_lane(LANES.Lane("gpu", "a GPU lane", ["onnxruntime-gpu"], ["--ep=cuda"], prepare=absent))
    assert (outcome.status, outcome.detail) == ("skipped", "no NVIDIA GPU on this machine")
    assert (tmp_path / "gpu" / "skipped.txt").read_text() == "no NVIDIA GPU on this machine\n"


def test_a_lane_runs_in_the_environment_of_the_lane_it_names_which_installs_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr(LANES, "VENVS", tmp_path)
    python = tmp_path / "cpu" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    (tmp_path / "cpu" / "lane.json").write_text(json.dumps({"packages": ["onnxruntime"], "no_deps": []}))
    refdev = next(lane for lane in LANES.LANES if lane.name == "refdev")
    assert LANES.environment(refdev) == python  # taken as it is: nothing created or installed
    for lane in LANES.LANES:
        if lane.venv:
            owner = next(other for other in LANES.LANES if other.name == lane.venv)
            assert (lane.packages, lane.no_deps) == (owner.packages, owner.no_deps), lane.name


def test_an_unknown_lane_is_one_message_and_exit_2(capsys):
    assert LANES.main(["nosuchlane"]) == 2
    assert capsys.readouterr().err.startswith("lanes/run: unknown lane nosuchlane; lanes: cpu, refdev, refdev-host, webgpu")


def test_a_device_copy_contract_on_an_old_api_is_not_applicable_whatever_the_eps_memory():
    contract = catalogue().contract("copy.device-to-device")  # applies to non-CPU DEFAULT memory, needs memory_info_alloc
    run = {"api": {"memory_info_alloc": False, "copy_tensors": True}, "onnxruntime": {"version": "1.24.1"},
           "ep_device": False, "library": None, "plugin_module": None, "declared": True}
    cpu_memory = DeviceFacts(0, "dev")
    assert applicability.decide(contract, EpFacts.from_wire(run), cpu_memory, None).outcome is Outcome.NOT_APPLICABLE
    device_memory = DeviceFacts(0, "dev", default_memory=MemoryFacts("DevMem", 0, 0, "default", device_type="gpu"))
    skip = applicability.decide(contract, EpFacts.from_wire(run), device_memory, None)
    assert skip.outcome is Outcome.NOT_APPLICABLE and skip.reason.startswith("needs onnxruntime 1.30's API (memory_info_alloc); onnxruntime 1.24.1")
    # A build at the API level the contract needs that still lacks the API: not_run.
    skip = applicability.decide(contract, EpFacts.from_wire(dict(run, onnxruntime={"version": "1.30.0"})), device_memory, None)
    assert skip.outcome is Outcome.NOT_RUN and skip.reason.startswith("needs memory_info_alloc (onnxruntime >= 1.30)")


# --- preparing a lane: the reason a lane is skipped is the one that says why ----------------


@pytest.fixture
def lanes(monkeypatch, tmp_path):
    """lanes/run, writing its reports under tmp_path."""
    monkeypatch.setattr(LANES, "REPORTS", tmp_path / "reports")
    return LANES


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


# --- the refdev lane with and without HOST_ACCESSIBLE memory


def test_the_refdev_host_lane_runs_refdev_with_its_host_accessible_memory_declared_and_gates_on_it(capsys):
    lane = next(lane for lane in LANES.LANES if lane.name == "refdev-host")
    assert lane.environ(Path("python")) == {"ORT_REFDEV_HOST_ACCESSIBLE": "1"} and lane.venv == "cpu"
    declaration = lane.pytest_args[-1]
    assert (REPO / declaration).is_file() and "name: RefDevHost" in (REPO / declaration).read_text()
    # The declaration replaces the shipped one by name, so the run is checked against the memory it advertises.
    assert catalogue(str(REPO / declaration)).ep_spec("refdev").host_accessible.name == "RefDevHost"
    needed = ("copy.host-accessible-alias", "iobinding.host-accessible-in-place", "memory-info.allocatable", "cpu-memory.host-accessible-writes")
    assert LANES.refdev_host_gate(lane_report(*(case(contract) for contract in needed)), 0) == []
    missing = LANES.refdev_host_gate(lane_report(*(case(contract) for contract in needed[:-1])), 0)
    assert missing == ["no cpu-memory.host-accessible-writes case passed on the HOST_ACCESSIBLE memory"]
    assert LANES.main(["--list"]) == 0 and "refdev-host" in capsys.readouterr().out


# --- a listed EP that cannot run is the package's finding


def test_a_listed_ep_that_cannot_run_is_a_finding_against_its_package_beside_the_incomplete_run():
    unusable = "CUDAExecutionProvider is listed by onnxruntime-gpu 1.31.1 but is not functional here: a session created for it silently fell back"
    run = EpFacts("cuda", "CUDAExecutionProvider", "cuda", declared=True, ep_device=False, unusable=unusable, onnxruntime=OnnxruntimeFacts("1.31.1"))
    device = DeviceFacts(0, "cuda")
    package = catalogue().contract("package.listed-eps-run")
    assert package.subject == "package"
    assert applicability.decide(package, run, device, None) is None  # the one contract that runs on an unusable EP
    assert applicability.decide(catalogue().contract("copy.required-directions"), run, device, None).outcome is Outcome.NOT_RUN
    found = Result("package.listed-eps-run", "CUDAExecutionProvider", "cuda", {}, Outcome.FAIL, f"onnxruntime-gpu lists it: {unusable}",
                   "s:1", "required", "package")
    assert found.is_finding and not found.against_ep
    others = [Result(c, "CUDAExecutionProvider", "cuda", {}, Outcome.NOT_RUN, unusable, "s:1", "required", "ep") for c in ("copy.a", "copy.b")]
    decided, reasons = verdict([found, *others])
    assert decided is Verdict.INCOMPLETE and reasons[0] == f"no check could run: {unusable}"


def test_found_gives_each_stress_contracts_outcomes_and_the_figures_of_the_case_that_passed_on_the_most_bytes(tmp_path):
    data = report(results=[
        dict(failure("concurrency.copies", "", subject="ep"), outcome="pass", params={"shape": "small"},
             details={"evidence": {"threads": 4, "overlapping_calls": 2143, "bytes_compared": 10, "memory": {"default": "RefDev"}}}),
        dict(failure("concurrency.copies", "", subject="ep"), outcome="pass", params={"shape": "large"},
             details={"evidence": {"threads": 8, "overlapping_calls": 9000, "bytes_compared": 5000, "runs": {"calls": 240, "seconds": 0.8691}}}),
        failure("endurance.copies", "copy 8001 failed: handle pool exhausted", subject="ep"),
        failure("copy.roundtrip", "1 of 60 bytes differ", subject="ep")])
    data["contracts"] = {"concurrency.copies": {"tier": "stress"}, "endurance.copies": {"tier": "stress"}, "copy.roundtrip": {"tier": "functional"}}
    text = found.render(found.load_reports([write_report(tmp_path, "refdev", data)]), catalogue())
    stress = text.split("### Under load (the stress tier)", 1)[1].split("###", 1)[0]
    rows = [line for line in stress.splitlines() if line.startswith("| ") and not line.startswith("| contract") and "---" not in line]
    assert rows == ["| concurrency.copies | 2 pass | threads: 8; overlapping_calls: 9,000; bytes_compared: 5,000; runs.calls: 240; runs.seconds: 0.869 |",
                    "| endurance.copies | 1 fail | copy 8001 failed: handle pool exhausted |"]


def test_found_has_no_stress_section_for_a_report_whose_contracts_carry_no_tier(tmp_path):
    text = found.render(found.load_reports([write_report(tmp_path, "openvino", report())]), catalogue())
    assert "Under load" not in text


# --- the refdev lane in its asynchronous mode


def test_the_refdev_async_lane_runs_refdev_asynchronous_and_gates_on_the_ordering_family(capsys):
    lane = next(lane for lane in LANES.LANES if lane.name == "refdev-async")
    assert lane.environ(Path("python")) == {"ORT_REFDEV_ASYNC": "1"} and lane.venv == "cpu"
    assert lane.library_with_wrapper == LANES.REFDEV_IMPORTING  # the importing build where it can be made, as the refdev lane
    # The gate names every contract of the family, so that a contract added to it is gated too.
    assert set(LANES.ORDERING) == {c.id for c in catalogue().contracts if c.id.startswith("ordering.")}
    queued = {"details": {"evidence": {"queued_at_return": True}}}
    every = [case(contract) for contract in (*LANES.ORDERING, "streams.sync-stream")]
    every[1].update(queued)
    assert every[1]["contract"] == "ordering.copy-on-stream" and LANES.refdev_async_gate(lane_report(*every), 0) == []
    # The build against C API 23 has no OrtEp::Sync: its unsynchronized run is onnxruntime's finding, not the EP's failure.
    without_sync = [dict(c, outcome="fail", subject="runtime") if c["contract"] == LANES.WITHOUT_SYNC else c for c in every]
    assert LANES.refdev_async_gate(lane_report(*without_sync), 0) == []
    broken = [dict(c, outcome="fail", subject="ep", message="not complete") if c["contract"] == "ordering.run-outputs" else c for c in every]
    assert LANES.refdev_async_gate(lane_report(*broken), 0) == ["ordering.run-outputs {} failed against the EP: not complete",
                                                               "no ordering.run-outputs case passed"]
    synchronous = [dict(c, details={"evidence": {"queued_at_return": False}}) if c["contract"] == "ordering.copy-on-stream" else c for c in every]
    assert LANES.refdev_async_gate(lane_report(*synchronous), 0) == [
        "ordering.copy-on-stream passed, but its copies were complete when they returned: the asynchronous mode is not on"]
    assert LANES.main(["--list"]) == 0 and "refdev-async" in capsys.readouterr().out
