"""The import family (conformance/interop/, conformance/checks/imported_memory.py, specs/contracts/import.yaml):
the C API slot table and the Vulkan constants against their headers, the C path on the wheel's
library, the family's not_applicable / not_run without an importer or a producer, and refdev's
import fault modes caught on the software GPU (lanes/softgpu), with DEFAULT and with
HOST_ACCESSIBLE imports.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import build_failure_reason, conformance_run

from conformance.testbed.interop import headers, slots, vulkan

ROOT = Path(__file__).resolve().parents[1]
IMPORTING = ROOT / "refdev" / "build" / "api27" / "libort_refdev_ep.so"
SOFTGPU = ROOT / "lanes" / "softgpu"

SMALL_HEADER = """
#define ORT_API_VERSION 25
struct OrtApi {
  /** \\brief first */
  ORT_API2_STATUS(CreateStatus, int code);
  ORT_CLASS_RELEASE(Env);
  const char*(ORT_API_CALL* GetBuildInfoString)(void);
  /** \\since Version 1.24. */
  ORT_API_T(void, ReleaseThing, _In_ OrtThing* t);
  ORT_API2_STATUS(GetInteropApi, void);
};
struct OrtInteropApi {
  /** \\since Version 1.25. */
  ORT_API2_STATUS(CanImportMemory, int t, _Out_ bool* out);
};
"""


def test_slot_reader_reads_every_declaration_form_in_order():
    assert headers.slots(SMALL_HEADER, "OrtApi") == [("CreateStatus", 0), ("ReleaseEnv", 0), ("GetBuildInfoString", 0),
                                                     ("ReleaseThing", 24), ("GetInteropApi", 24)]
    assert headers.slots(SMALL_HEADER, "OrtInteropApi") == [("CanImportMemory", 25)]
    assert headers.api_version(SMALL_HEADER) == 25
    with pytest.raises(headers.HeaderError, match="cannot read a function name"):
        headers.slots("struct OrtApi {\n  int x;\n};\n", "OrtApi")


def _header_dir(name: str) -> Path | None:
    found = sorted(ROOT.glob(f"refdev/build/**/include/onnxruntime/{name}"))
    newest = [path for path in found if headers.api_version(path.read_text()) >= 24]
    return newest[-1].parent if newest else None


def test_shipped_slot_table_is_the_headers(importing_library):
    """`importing_library` builds the importing refdev, which fetches the >= 1.24 headers first."""
    include = _header_dir("onnxruntime_c_api.h")
    if include is None:
        pytest.skip("no onnxruntime_c_api.h >= 1.24 here (make -C refdev ORT_SUITE=experimental BUILD=build/api27 fetches it)")
    text = (include / "onnxruntime_c_api.h").read_text()
    generated = {}
    exec(headers.render(text), generated)
    # the shipped table may come from a newer header: every slot it shares with this one agrees
    for table in ("ORT_API", "ORT_INTEROP_API"):
        shared = set(generated[table]) & set(getattr(slots, table))
        assert shared and {name: getattr(slots, table)[name] for name in shared} == {name: generated[table][name] for name in shared}


def test_vulkan_constants_are_the_headers(importing_library):
    """`importing_library` prepares the software GPU first, which unpacks Vulkan's headers."""
    found = sorted(ROOT.glob(".lanes/softgpu/root/usr/include/vulkan/vulkan_core.h")) + sorted(Path("/usr/include/vulkan").glob("vulkan_core.h"))
    if not found:
        pytest.skip("no vulkan_core.h here (lanes/softgpu/setup unpacks libvulkan-dev)")
    text = found[0].read_text()
    for name in [n for n in dir(vulkan) if n.startswith(("VK_STRUCTURE_TYPE_", "VK_EXTERNAL_MEMORY_HANDLE", "VK_MEMORY_PROPERTY"))]:
        match = re.search(rf"\b{name} = (0x[0-9A-Fa-f]+|\d+)", text)
        assert match, name
        assert int(match.group(1), 0) == getattr(vulkan, name), name


def test_c_path_loads_the_wheels_library_and_the_cpu_ep_gives_no_importer():
    ort = pytest.importorskip("onnxruntime")
    import ctypes

    from conformance.testbed.interop import capi
    try:
        api = capi.CApi.load(ort)
    except capi.Unavailable as exc:
        pytest.skip(str(exc))
    assert api.version == ort.__version__
    env = capi.Environment(api)
    devices = env.devices("CPUExecutionProvider")
    importer = ctypes.c_void_p()
    api.interop("CreateExternalResourceImporterForDevice", ctypes.c_void_p(devices[0]), ctypes.byref(importer))
    assert importer.value is None
    env.close()


def test_import_family_is_not_applicable_without_an_importer(tmp_path):
    report = conformance_run(tmp_path, "--ep=cpu", "-k", "import.").report
    results = [r for r in report["results"] if r["contract"].startswith("import.")]
    outcomes = {(r["contract"], r["outcome"]) for r in results}
    assert {contract for contract, _ in outcomes} == {"import.capability", "import.host-accessible", "import.default-copy", "import.offsets",
                                                     "import.session-io", "import.rejects-bad", "import.lifetime",
                                                     "import.unregister-while-imported", "import.unsupported-is-success", "import.handle-release",
                                                     "import.self-copy", "import.run-no-copies", "import.host-accessible-no-copies"}
    # the CPU EP says "no importer" as the guide asks: OK, and NULL
    assert {outcome for contract, outcome in outcomes if contract == "import.unsupported-is-success"} == {"pass"}
    assert {outcome for contract, outcome in outcomes if contract != "import.unsupported-is-success"} == {"not_applicable"}
    # the one for plugin libraries does not apply to a built-in EP; the others found no importer
    assert all("no external resource importer" in r["message"] for r in results
               if r["contract"] not in ("import.unregister-while-imported", "import.unsupported-is-success"))


@pytest.fixture(scope="session")
def importing_library() -> Path:
    # The software GPU's setup unpacks Vulkan's headers, which the importer is built with: run
    # it first (where it cannot run, the library is built without an importer, and the tests
    # needing the software GPU skip with its reason); make rebuilds when the headers appear.
    subprocess.run([str(SOFTGPU / "setup")], capture_output=True, text=True)
    build = subprocess.run(["make", "-C", str(ROOT / "refdev"), "ORT_SUITE=experimental", "BUILD=build/api27"], capture_output=True, text=True)
    if build.returncode != 0:
        pytest.skip(f"the importing reference EP could not be built here: {build_failure_reason(build.stderr)}")
    return IMPORTING


def test_import_family_is_not_run_without_a_producer(importing_library, tmp_path):
    """Outside the software GPU there is no Vulkan driver: refdev has an importer, the kit no producer."""
    report = conformance_run(tmp_path, "--ep-library", str(importing_library), "--ep", "refdev", "-k", "import.",
                             env={"VK_ICD_FILENAMES": "/nonexistent.json", "VK_DRIVER_FILES": "/nonexistent.json"}).report
    fds = [r for r in report["results"] if "opaque-fd" in str(r["params"])]
    assert fds and {r["outcome"] for r in fds} == {"not_run"}
    assert all("no producer of VK_MEMORY_OPAQUE_FD memory here" in r["message"] for r in fds)


def _softgpu_ready() -> str | None:
    setup = subprocess.run([str(SOFTGPU / "setup")], capture_output=True, text=True)
    if setup.returncode != 0:
        return f"the software GPU could not be prepared: {(setup.stderr or setup.stdout).strip().splitlines()[-1:]}"
    entered = subprocess.run([str(SOFTGPU / "exec"), "true"], capture_output=True, text=True)
    if entered.returncode != 0:
        return f"the software GPU cannot be entered: {entered.stderr.strip()}"
    return None


IMPORT_FAULTS = {
    # mode -> (the refdev environment, contracts that must be broken with DEFAULT imports, with HOST_ACCESSIBLE imports, how)
    "none": ({}, set(), set(), "pass"),
    "import-copy": ({"ORT_REFDEV_FAULT": "import-copy"}, {"import.default-copy", "import.session-io", "import.lifetime"},
                    {"import.host-accessible", "import.session-io", "import.lifetime"}, "fail"),
    "import-misread": ({"ORT_REFDEV_FAULT": "import-misread"}, {"import.default-copy", "import.offsets", "import.session-io"},
                       {"import.session-io"}, "fail"),
    "import-no-bounds": ({"ORT_REFDEV_FAULT": "import-no-bounds"}, {"import.rejects-bad"}, {"import.rejects-bad"}, "fail"),
    # CanImportMemory says no to every type, which ImportMemory then takes
    "import-denies": ({"ORT_REFDEV_FAULT": "import-denies"}, {"import.capability"}, {"import.capability"}, "fail"),
    # the importer closes the caller's fd on success: lawful, and said as information
    "take-fd": ({"ORT_REFDEV_IMPORT_FD": "take"}, set(), set(), "pass"),
    # ... and takes descriptors past the allocation: caught, with no refusal passing for another reason
    "take-fd-no-bounds": ({"ORT_REFDEV_IMPORT_FD": "take", "ORT_REFDEV_FAULT": "import-no-bounds"}, {"import.rejects-bad"},
                          {"import.rejects-bad"}, "fail"),
    # OK with no tensor: a failure naming the call, not a crash
    "null-tensor": ({"ORT_REFDEV_IMPORT_FAULT": "null-tensor"}, {"import.default-copy", "import.offsets", "import.session-io", "import.lifetime"},
                    {"import.host-accessible", "import.offsets", "import.session-io", "import.lifetime"}, "fail"),
    # descriptor versions and denied handle types, which onnxruntime passes through, taken
    "unchecked": ({"ORT_REFDEV_IMPORT_FAULT": "unchecked"}, {"import.rejects-bad", "import.capability"}, {"import.rejects-bad", "import.capability"}, "fail"),
    # handles without Release: leaked without a word
    "no-release": ({"ORT_REFDEV_IMPORT_FAULT": "no-release"}, {"import.handle-release"}, {"import.handle-release"}, "fail"),
    # a copy onto itself loses its bytes; with HOST_ACCESSIBLE imports onnxruntime asks one of the input every Run
    "clear-first": ({"ORT_REFDEV_IMPORT_FAULT": "clear-first"}, {"import.self-copy"}, {"import.self-copy", "import.session-io"}, "fail"),
}
BOUNDS = ("size-past-allocation", "offset-past-end", "tensor-past-end")


def _softgpu_run(library: Path, folder: Path, **environ: str) -> tuple[int, dict]:
    folder.mkdir(parents=True, exist_ok=True)
    reports = folder / "reports"
    run = subprocess.run([str(SOFTGPU / "exec"), "env", *(f"{k}={v}" for k, v in environ.items()),
                          sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ep-library", str(library),
                          "--ep", "refdev", "-k", "import.", "--conformance-report", str(reports)],
                         cwd=folder, capture_output=True, text=True, timeout=300)
    assert (reports / "report.json").exists(), run.stdout[-2000:] + run.stderr[-2000:]
    return run.returncode, json.loads((reports / "report.json").read_text())


@pytest.mark.parametrize("memory", ["default", "host_accessible"])
@pytest.mark.parametrize("mode", list(IMPORT_FAULTS))
def test_import_fault_modes_are_caught_on_the_software_gpu(importing_library, tmp_path, memory, mode):
    reason = _softgpu_ready()
    if reason:
        pytest.skip(reason)
    environ, default_broken, host_broken, how = IMPORT_FAULTS[mode]
    status, report = _softgpu_run(importing_library, tmp_path, ORT_REFDEV_IMPORT_MEMORY=memory, **environ)
    results = report["results"]
    assert not [r for r in results if r["outcome"] == "error"], [r["message"] for r in results if r["outcome"] == "error"]
    # onnxruntime unloads the library under live imports (a finding against it, whatever the EP
    # does), wherever the importer imports at all
    unregistered = {(r["outcome"], r["subject"]) for r in results if r["contract"] == "import.unregister-while-imported"}
    expected = {"import-denies": {("not_applicable", "runtime")}, "null-tensor": {("fail", "both")}}.get(mode, {("fail", "runtime")})
    assert unregistered == expected, unregistered
    if how == "pass":
        assert status == 0 and report["verdict"] == "conformant", report["verdict_reasons"]
        passed = {r["contract"] for r in results if r["outcome"] == "pass"}
        checked = "import.default-copy" if memory == "default" else "import.host-accessible"
        assert {checked, "import.capability", "import.offsets", "import.session-io", "import.rejects-bad", "import.lifetime", "import.handle-release",
                "import.self-copy"} <= passed
        # the copies asked around a Run: none with DEFAULT imports; with HOST_ACCESSIBLE ones onnxruntime 1.32 asks
        # a copy of the input onto itself, a finding against it on both handle kinds
        asked = {(r["contract"], r["outcome"], r["subject"]) for r in results if r["contract"].endswith("no-copies")}
        assert asked == ({("import.run-no-copies", "pass", "runtime"), ("import.host-accessible-no-copies", "not_applicable", "runtime")}
                         if memory == "default" else
                         {("import.run-no-copies", "not_applicable", "runtime"), ("import.host-accessible-no-copies", "fail", "runtime")}), asked
        # both handle kinds ran
        assert {r["params"].get("handle") for r in results if r["contract"] == checked and r["outcome"] == "pass"} == {"opaque-fd", "host-allocation"}
        # the tensors report the memory the switch asks for; the other memory's contract does not apply
        other = "import.host-accessible" if memory == "default" else "import.default-copy"
        assert {r["outcome"] for r in results if r["contract"] == other} == {"not_applicable"}
        owned = {r["details"].get("evidence", {}).get("fd_after_import", "") for r in results
                 if r["contract"] == checked and r["params"].get("handle") == "opaque-fd"}
        taken = "the importer took the caller's fd (closed it): the caller must not close it again"
        assert owned == ({taken} if mode == "take-fd" else {"the caller's fd was left open to the caller"}), owned
    else:
        broken = {r["contract"] for r in results if r["outcome"] == how}
        expected = default_broken if memory == "default" else host_broken
        assert status == 1 and report["verdict"] == "non_conformant"
        assert expected <= broken, (sorted(expected), sorted(broken))
    if "no-bounds" in mode:
        # every bounds request is caught on both handle kinds; the others are refused for the reason asked
        rejects = {(r["params"]["request"], r["params"]["handle"]): r["outcome"] for r in results if r["contract"] == "import.rejects-bad"}
        assert {rejects[(request, handle)] for request in BOUNDS for handle in ("opaque-fd", "host-allocation")} == {"fail"}
        assert {rejects[("bad-version", handle)] for handle in ("opaque-fd", "host-allocation")} == {"pass"}
    if mode == "take-fd-no-bounds" and memory == "default":
        # the opaque-fd reproducers stand alone: each fails on this importer and passes on a good one
        scripts = sorted((tmp_path / "reports" / "repro").glob("import.rejects-bad_*opaque-fd.py"))
        assert len(scripts) == len(BOUNDS)
        for script in scripts:
            on_broken = subprocess.run([str(SOFTGPU / "exec"), "env", *(f"{k}={v}" for k, v in environ.items()), sys.executable, "-I", str(script)],
                                       capture_output=True, text=True, timeout=300)
            on_good = subprocess.run([str(SOFTGPU / "exec"), "env", "ORT_REFDEV_IMPORT_FD=take", sys.executable, "-I", str(script)],
                                     capture_output=True, text=True, timeout=300)
            assert on_broken.returncode == 1 and "expected an error, got: accepted" in on_broken.stderr, (script.name, on_broken.stderr[-1500:])
            assert on_good.returncode == 0 and "refused as expected" in on_good.stdout, (script.name, on_good.stderr[-1500:])
    if mode == "null-tensor":
        named = [r for r in results if r["outcome"] == "fail" and r["contract"] == "import.offsets"]
        assert named and all(r["message"] == "CreateTensorFromMemory returned OK and no tensor" and r["subject"] == "both" for r in named)


def test_a_handle_from_another_device_is_refused(importing_library, tmp_path):
    """Two refdev devices: a handle device 0's importer made, offered to device 1's importer."""
    reason = _softgpu_ready()
    if reason:
        pytest.skip(reason)
    def other_device(report):
        return {r["device"]: r["outcome"] for r in report["results"] if r["params"].get("request") == "other-device"}
    _, report = _softgpu_run(importing_library, tmp_path / "good", ORT_REFDEV_DEVICES="2")
    assert other_device(report) == {"refdev0": "pass", "refdev1": "pass"}
    _, report = _softgpu_run(importing_library, tmp_path / "bad", ORT_REFDEV_DEVICES="2", ORT_REFDEV_FAULT="import-no-bounds")
    assert other_device(report) == {"refdev0": "fail", "refdev1": "fail"}


def test_probe_says_the_cpu_ep_imports_nothing(tmp_path):
    pytest.importorskip("onnxruntime")
    report = conformance_run(tmp_path, "--ep=cpu", "-k", "import.capability").report
    imports = report["capabilities"][0]["imports"]
    assert imports["status"] == "none" and imports["copies"] == []
    assert "Imports: no importer" in (tmp_path / "reports" / "report.md").read_text()


@pytest.mark.parametrize("memory, fault, expected", [
    ("default", "", {("imported", "cpu"): "supported", ("cpu", "imported"): "supported", ("imported", "imported"): "supported"}),
    ("host_accessible", "", {("imported", "cpu direct"): "supported", ("imported", "cpu"): "supported", ("cpu", "imported"): "supported",
                             ("imported", "imported"): "supported"}),
    # misread DEFAULT imports: the copy out decodes the producer's plain bytes as RefDev's format
    ("default", "import-misread", {("imported", "cpu"): "broken", ("cpu", "imported"): "broken", ("imported", "imported"): "supported"}),
])
def test_probe_answers_which_copies_work_on_an_imported_tensor(importing_library, tmp_path, memory, fault, expected):
    reason = _softgpu_ready()
    if reason:
        pytest.skip(reason)
    run = subprocess.run([str(SOFTGPU / "exec"), "env", f"ORT_REFDEV_IMPORT_MEMORY={memory}", f"ORT_REFDEV_FAULT={fault}",
                          sys.executable, "-m", "conformance.cli", "probe", "--ep-library", str(importing_library), "--ep", "refdev", "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    imports = json.loads(run.stdout)["eps"][0]["devices"][0]["imports"]
    assert imports["status"] == "importer" and imports["handle_types"] == ["vk_memory_opaque_fd", "host_allocation"]
    assert imports["tensor_memory"]["memory_type"] == memory
    assert {(c["source"], c["destination"]): c["status"] for c in imports["copies"]} == expected


# --- the refdev lane: the importing build on the software GPU where it can -------------------

from conftest import LANES  # noqa: E402


def _quiet(monkeypatch, outputs):
    seen = []

    def run_quietly(command, **kwargs):
        seen.append(command)
        status = outputs[Path(command[0]).name]
        return subprocess.CompletedProcess(command, status, "", "" if status == 0 else "softgpu exec: unshare -m refused\n")

    monkeypatch.setattr(LANES, "run_quietly", run_quietly)
    return seen


def test_the_refdev_lane_runs_the_importing_build_on_the_software_gpu_when_it_can(monkeypatch, importing_library):
    refdev = next(lane for lane in LANES.LANES if lane.name == "refdev")
    seen = _quiet(monkeypatch, {"setup": 0, "exec": 0, "make": 0})
    assert refdev.wrapper_if() == [str(ROOT / "lanes/softgpu/exec")]
    assert ["make", "-C", "refdev", "ORT_SUITE=experimental", "BUILD=build/api27"] in seen
    assert refdev.library_with_wrapper == "refdev/build/api27/libort_refdev_ep.so"
    # where the namespace cannot be entered the importing build still runs, its HOST_ALLOCATION
    # imports shown and the opaque-fd cases (no producer here) deselected
    _quiet(monkeypatch, {"setup": 0, "exec": 3, "make": 0})
    assert refdev.wrapper_if() == ["env", "PYTEST_ADDOPTS=-k 'not opaque-fd'"]
    # where the importing build cannot be made, the API-23 build runs as before
    _quiet(monkeypatch, {"setup": 0, "exec": 0, "make": 2})
    assert refdev.wrapper_if() == []


def test_the_refdev_lane_gate_wants_the_import_family_passed_with_the_importing_build():
    refdev = next(lane for lane in LANES.LANES if lane.name == "refdev")
    def report(library, outcome):
        results = [{"contract": c, "outcome": outcome, "params": {"handle": "host-allocation"} if c != "import.capability" else {}} for c in
                   ("import.capability", "import.default-copy", "import.session-io", "import.rejects-bad", "import.lifetime")]
        return {"run": {"collected": len(results)}, "results": results, "verdict": "conformant", "verdict_reasons": [],
                "ep": {"library": library}}
    assert refdev.gate(report("/r/refdev/build/api27/libort_refdev_ep.so", "pass"), 0) == []
    problems = refdev.gate(report("/r/refdev/build/api27/libort_refdev_ep.so", "not_applicable"), 0)
    assert len(problems) == 9 and "import.capability did not pass with the importing build" in problems
    assert "import.lifetime did not pass on HOST_ALLOCATION imports" in problems
    # the API-23 build has no importer: nothing is asked of the family
    assert refdev.gate(report("/r/refdev/build/libort_refdev_ep.so", "not_applicable"), 0) == []


def test_the_import_faults_lane_wants_the_null_tensor_passed_on_by_onnxruntime():
    lane = next(lane for lane in LANES.LANES if lane.name == "refdev-import-faults")
    assert lane.environ(Path("python")) == {"ORT_REFDEV_IMPORT_FAULT": "null-tensor"}
    assert lane.pytest_args[lane.pytest_args.index("--ep-library") + 1] == "refdev/build/api27/libort_refdev_ep.so"
    def report(message, subject):
        results = [{"contract": "import.offsets", "outcome": "fail", "message": message, "subject": subject, "params": {}}]
        return {"run": {"collected": 1}, "results": results, "verdict": "non_conformant", "verdict_reasons": []}
    assert LANES.null_tensor_gate(report("CreateTensorFromMemory returned OK and no tensor", "both"), 1) == []
    assert len(LANES.null_tensor_gate(report("CreateTensorFromMemory: refused", "ep"), 1)) == 1


def test_a_lane_with_a_wrapper_runs_inside_it_with_the_library_it_names(monkeypatch, tmp_path):
    monkeypatch.setattr(LANES, "REPORTS", tmp_path)
    monkeypatch.setattr(LANES, "environment", lambda lane: Path("/venv/bin/python"))
    commands = []

    def run(command, **kwargs):
        commands.append(command)
        (out,) = [Path(arg.split("=", 1)[1]) for arg in command if arg.startswith("--conformance-report=")]
        (out / "report.json").write_text(json.dumps({"run": {"collected": 0}, "results": [], "verdict": "conformant",
                                                     "verdict_reasons": [], "summary": {}, "findings": [], "ep": {}}))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(LANES.subprocess, "run", run)
    lane = LANES.Lane("x", "a lane", [], ["--ep-library", "refdev/build/libort_refdev_ep.so", "--ep", "refdev"],
                      wrapper_if=lambda: ["/softgpu/exec"], library_with_wrapper="refdev/build/api27/libort_refdev_ep.so")
    assert LANES.run_lane(lane).status == "passed"
    assert commands[0][:2] == ["/softgpu/exec", "/venv/bin/python"]
    assert commands[0][commands[0].index("--ep-library") + 1] == "refdev/build/api27/libort_refdev_ep.so"


def test_the_webgpu_lane_gate_wants_the_import_family_run():
    webgpu = next(lane for lane in LANES.LANES if lane.name == "webgpu")
    copies = [{"contract": "copy.required-directions", "outcome": "pass", "params": {"direction": d}} for d in ("cpu>default", "default>cpu")]
    copies += [{"contract": c, "outcome": "pass", "params": {"direction": "default>default"} if c.startswith("copy") else {}}
               for c in ("copy.device-to-device", "update-inplace.from-numpy", "update-inplace.from-ortvalue")]
    def report(import_outcome):
        results = copies + ([{"contract": "import.capability", "outcome": import_outcome, "params": {}}] if import_outcome else [])
        return {"run": {"collected": len(results)}, "results": results}
    assert webgpu.gate(report("not_applicable"), 0) == []
    assert webgpu.gate(report("fail"), 1) == ["import.capability did not run to pass or not_applicable: ['fail']"]
    assert webgpu.gate(report(None), 0) == ["import.capability did not run to pass or not_applicable: no result"]


def test_the_producer_is_the_ep_devices_own_gpu_where_it_can_be_told():
    C = vulkan.Candidate
    lavapipe = C(0, "llvmpipe", b"l" * 16, None, True)
    gpus = [C(0, "gpu0", b"a" * 16, "0000:17:00.0", True), C(1, "gpu1", b"b" * 16, "0000:65:00.0", True)]
    assert vulkan.choose(gpus, pci_bus_id="0000:65:00.0").name == "gpu1"
    assert vulkan.choose(gpus, uuid=b"a" * 16).name == "gpu0"
    with pytest.raises(vulkan.NoProducer, match="no Vulkan device on PCI bus 0000:b3:00.0"):
        vulkan.choose(gpus, pci_bus_id="0000:B3:00.0")
    # no driver says where its device is (lavapipe under the software GPU's made-up PCI id): the first
    assert vulkan.choose([lavapipe], pci_bus_id="0000:ff:00.0").name == "llvmpipe"
    with pytest.raises(vulkan.NoProducer, match="exports opaque fds"):
        vulkan.choose([C(0, "old", b"o" * 16, None, False)])


def test_the_c_path_asks_for_the_lowest_api_version_that_has_every_function_it_calls():
    from conformance.testbed.interop import capi
    newest = max(table[name][1] for table, names in ((slots.ORT_API, capi.CApi.SIGNATURES), (slots.ORT_INTEROP_API, capi.CApi.INTEROP_SIGNATURES))
                 for name in names)
    assert newest == capi.API_VERSION == 24
    api = object.__new__(capi.CApi)
    api._functions = {}
    with pytest.raises(capi.Unavailable, match="InitGraphicsInteropForEpDevice appeared in 1.25"):
        api._function("InitGraphicsInteropForEpDevice", slots.ORT_INTEROP_API, 0, {})
