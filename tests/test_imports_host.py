"""The import family on HOST_ALLOCATION imports, which need no graphics API: refdev's importing
build run here as it is (no software GPU), in each importer mode that matters; the handle rules
(a fresh handle per import, an fd the importer took never touched again); a refusal that proves
nothing without its valid twin; and the probe's answer for an EP device that says "unsupported"
with an error status, and what `ort-conformance init` drafts of each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import build_failure_reason, conformance_run

from conformance import proofs
from conformance.checks.context.evidence import Evidence
from conformance.findings import NotApplicable, NotRun
from conformance.testbed.interop.capi import OrtError
from conformance.testbed.interop.handed import Handed

ROOT = Path(__file__).resolve().parents[1]
IMPORTING = ROOT / "refdev" / "build" / "api27" / "libort_refdev_ep.so"
HOST = "host-allocation"
IMPORTER_ERROR = "RefDev: External resource importer is not supported (fault importer-error)"


@pytest.fixture(scope="module")
def importing_library() -> Path:
    build = subprocess.run(["make", "-C", str(ROOT / "refdev"), "ORT_SUITE=experimental", "BUILD=build/api27"], capture_output=True, text=True)
    if build.returncode != 0:
        pytest.skip(f"the importing reference EP could not be built here: {build_failure_reason(build.stderr)}")
    return IMPORTING


NO_VULKAN = {"VK_ICD_FILENAMES": "/nonexistent.json", "VK_DRIVER_FILES": "/nonexistent.json"}


def _host_run(library: Path, folder: Path, **environ: str) -> tuple[dict, list[dict]]:
    outcome = conformance_run(folder, "--ep-library", str(library), "--ep", "refdev", "-k", "import. and not opaque-fd",
                              env={**NO_VULKAN, **environ})
    report = json.loads((outcome.reports / "report.json").read_text())
    results = report["results"]
    assert results and not [r for r in results if r["outcome"] == "error"], [r["message"] for r in results if r["outcome"] == "error"]
    return report, results


def _standalone(script: Path, **environ: str) -> subprocess.CompletedProcess:
    """A reproducer run on its own (`python -I`: nothing of the kit on its path), refdev in the mode `environ` sets."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ORT_REFDEV_")}
    return subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, timeout=120, cwd=script.parent,
                          env={**clean, **NO_VULKAN, **environ})


def _outcomes(results: list[dict], contract: str) -> set[str]:
    return {r["outcome"] for r in results if r["contract"] == contract}


def test_host_allocation_imports_run_without_a_software_gpu(importing_library, tmp_path):
    report, results = _host_run(importing_library, tmp_path)
    assert report["verdict"] == "conformant", report["verdict_reasons"]
    for contract in ("import.default-copy", "import.offsets", "import.session-io", "import.lifetime", "import.handle-release", "import.self-copy",
                     "import.run-no-copies"):
        assert _outcomes(results, contract) == {"pass"}, contract
    # DEFAULT imports: a Run asked refdev for no copy, as its record shows; the HOST_ACCESSIBLE contract does not apply
    assert [r["details"]["evidence"]["copies_asked"] for r in results if r["contract"] == "import.run-no-copies"] == [0]
    assert _outcomes(results, "import.host-accessible-no-copies") == {"not_applicable"}
    assert {r["params"]["handle"] for r in results if r["contract"] == "import.session-io"} == {HOST}
    # every bad request refused beside its accepted valid twin (other-device needs a second device)
    rejects = {r["params"]["request"]: r for r in results if r["contract"] == "import.rejects-bad"}
    assert {request for request, r in rejects.items() if r["outcome"] == "pass"} == set(rejects) - {"other-device"}
    assert all(r["details"]["evidence"]["valid_twin"] == "accepted" for r in rejects.values() if r["outcome"] == "pass")
    # a host address is nothing handed over: no fd to tell of
    assert not any("fd_after_import" in r["details"].get("evidence", {}) for r in results)
    # onnxruntime unloads the library under live imports: its own defect, not the EP's
    unregister = [r for r in results if r["contract"] == "import.unregister-while-imported"]
    assert [(r["outcome"], r["subject"]) for r in unregister] == [("fail", "runtime")]
    assert "unloaded the EP library while an imported handle and a tensor made from it were alive" in unregister[0]["message"]
    # ... and its reproducer, a ctypes script over the wheel's library, fails on its own
    (script,) = (tmp_path / "reports" / "repro").glob("import.unregister-while-imported_*.py")
    alone = _standalone(script)
    assert alone.returncode == 1 and "UnregisterExecutionProviderLibrary unloaded the EP library" in alone.stderr, alone.stderr[-2000:]


@pytest.mark.parametrize("mode, environ, broken", [
    ("import-no-bounds", {"ORT_REFDEV_FAULT": "import-no-bounds"}, {"import.rejects-bad"}),
    ("import-copy", {"ORT_REFDEV_FAULT": "import-copy"}, {"import.default-copy", "import.session-io", "import.lifetime"}),
    ("import-denies", {"ORT_REFDEV_FAULT": "import-denies"}, {"import.capability"}),
    ("null-tensor", {"ORT_REFDEV_IMPORT_FAULT": "null-tensor"}, {"import.default-copy", "import.offsets", "import.session-io", "import.lifetime"}),
    # descriptor versions and handle types onnxruntime passes through unchecked, taken by the EP too
    ("unchecked", {"ORT_REFDEV_IMPORT_FAULT": "unchecked"}, {"import.rejects-bad", "import.capability"}),
    ("no-release", {"ORT_REFDEV_IMPORT_FAULT": "no-release"}, {"import.handle-release"}),
    # the copy onto itself onnxruntime asks around a Run with a HOST_ACCESSIBLE input loses the input
    ("clear-first", {"ORT_REFDEV_IMPORT_FAULT": "clear-first", "ORT_REFDEV_IMPORT_MEMORY": "host_accessible"}, {"import.self-copy", "import.session-io"}),
])
def test_host_allocation_fault_modes_are_caught(importing_library, tmp_path, mode, environ, broken):
    report, results = _host_run(importing_library, tmp_path, **environ)
    assert report["verdict"] == "non_conformant"
    assert broken <= {r["contract"] for r in results if r["outcome"] == "fail"}
    # each failure's reproducer fails on the broken importer and passes on a good one, standing alone
    # (a finding against onnxruntime fails on both: it is left out)
    runtime = {r["contract"] for r in results if r["outcome"] == "fail" and r["subject"] == "runtime"}
    scripts = [p for p in (tmp_path / "reports" / "repro").glob("import.*.py") if p.name.split("_")[0] not in runtime]
    assert {p.name.split("_")[0] for p in scripts} >= broken
    good = {k: v for k, v in environ.items() if k != "ORT_REFDEV_IMPORT_FAULT" and k != "ORT_REFDEV_FAULT"}
    for script in scripts:
        on_broken, on_good = _standalone(script, **environ), _standalone(script, **good)
        assert on_broken.returncode == 1 and "AssertionError" in on_broken.stderr, (script.name, on_broken.stderr[-1500:])
        assert on_good.returncode == 0, (script.name, on_good.stderr[-1500:])
    if mode == "import-no-bounds":
        rejects = {r["params"]["request"]: r["outcome"] for r in results if r["contract"] == "import.rejects-bad"}
        assert rejects["size-past-allocation"] == rejects["offset-past-end"] == rejects["tensor-past-end"] == "fail"
        assert rejects["bad-version"] == rejects["unsupported-handle-type"] == "pass"
    if mode == "unchecked":
        rejects = {r["params"]["request"]: r["outcome"] for r in results if r["contract"] == "import.rejects-bad"}
        assert rejects["bad-version"] == rejects["bad-tensor-version"] == rejects["unsupported-handle-type"] == "fail"
        assert rejects["size-past-allocation"] == rejects["tensor-past-end"] == "pass"  # the bounds are still checked
    if mode == "no-release":
        (leak,) = [r for r in results if r["contract"] == "import.handle-release"]
        assert leak["message"].startswith("the handle ImportMemory returned has no Release function") and leak["subject"] == "ep"
    if mode == "clear-first":
        (lost,) = [r for r in results if r["contract"] == "import.self-copy"]
        assert lost["message"].startswith("CopyTensors of an imported tensor onto itself (source and destination the same memory) changed its bytes")
    if mode == "null-tensor":
        failed = [r for r in results if r["outcome"] == "fail" and r["contract"] != "import.unregister-while-imported"]
        assert {r["message"] for r in failed} == {"CreateTensorFromMemory returned OK and no tensor"}
        assert {r["subject"] for r in failed} == {"both"}  # the EP returned it, onnxruntime passed it on
        assert not [r for r in results if r["outcome"] in ("crash", "not_run")]


def test_a_run_on_host_accessible_imports_asks_a_copy_onto_itself_a_finding_against_onnxruntime(importing_library, tmp_path):
    report, results = _host_run(importing_library, tmp_path, ORT_REFDEV_IMPORT_MEMORY="host_accessible")
    (asked,) = [r for r in results if r["contract"] == "import.host-accessible-no-copies"]
    assert (asked["outcome"], asked["subject"]) == ("fail", "runtime")
    assert asked["message"].startswith("a Run on imported HOST_ACCESSIBLE tensors asked the EP for 1 copy: 96 bytes onto itself"), asked["message"]
    # refdev keeps the bytes of that copy: the EP's side holds, and the verdict is the EP's
    assert _outcomes(results, "import.self-copy") == _outcomes(results, "import.session-io") == {"pass"}
    assert _outcomes(results, "import.run-no-copies") == {"not_applicable"}
    assert report["verdict"] == "conformant", report["verdict_reasons"]
    (script,) = (tmp_path / "reports" / "repro").glob("import.host-accessible-no-copies_*.py")
    alone = _standalone(script, ORT_REFDEV_IMPORT_MEMORY="host_accessible")
    assert alone.returncode == 1 and "tensors asked the EP for 1 copies" in alone.stderr, alone.stderr[-2000:]


def test_the_copies_asked_of_an_ep_that_keeps_no_record_are_not_applicable():
    from conformance.checks import imported_runs

    class Target:
        provider = "OtherExecutionProvider"

    class Ctx:
        target = Target()

    with pytest.raises(NotApplicable, match="no public API shows which copies onnxruntime asks of an EP's data transfer, and "
                                            "OtherExecutionProvider offers no record of its own"):
        with imported_runs.asked_copies(Ctx()):
            pass


def test_an_importer_that_denies_host_allocations_is_not_applicable_there(importing_library, tmp_path):
    report, results = _host_run(importing_library, tmp_path, ORT_REFDEV_IMPORT_FAULT="denies-host")
    host = [r for r in results if r["params"].get("handle") == HOST or r["params"].get("request") == HOST]
    assert host and {r["outcome"] for r in host} == {"not_applicable"}
    assert all("does not import HOST_ALLOCATION" in r["message"] for r in host)


def test_an_importer_error_status_is_an_answer_and_a_finding_against_the_ep(importing_library, tmp_path):
    report, results = _host_run(importing_library, tmp_path, ORT_REFDEV_IMPORT_FAULT="importer-error")
    said = [r for r in results if r["contract"] == "import.unsupported-is-success"]
    assert [(r["outcome"], r["severity"], r["subject"]) for r in said] == [("fail", "recommended", "ep")]
    others = [r for r in results if r["contract"] not in ("import.unsupported-is-success", "import.unregister-while-imported")]
    assert {r["outcome"] for r in others} == {"not_applicable"}
    assert all(f"this EP device imports nothing: {IMPORTER_ERROR}" in r["message"] for r in others)
    assert report["verdict"] != "non_conformant"  # a recommended contract informs; it does not decide


def test_the_probe_answers_an_importer_error_status(importing_library):
    run = subprocess.run([sys.executable, "-m", "conformance.cli", "probe", "--ep-library", str(importing_library), "--ep", "refdev", "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "ORT_REFDEV_IMPORT_FAULT": "importer-error", "VK_ICD_FILENAMES": "/nonexistent.json"})
    assert run.returncode == 0, run.stderr[-2000:]
    imports = json.loads(run.stdout)["eps"][0]["devices"][0]["imports"]
    assert imports["status"] == "none" and IMPORTER_ERROR in imports["reason"] and imports["refused_with"] == IMPORTER_ERROR


def _init(library: Path, folder: Path, **environ: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance.cli", "init", "--ep-library", str(library), "--ep", "RefDevExecutionProvider",
                           "-o", "draft.yaml"], cwd=folder, capture_output=True, text=True, timeout=300, env={**os.environ, **NO_VULKAN, **environ})


def test_init_states_the_importer_and_the_run_with_the_draft_shows_it(importing_library, tmp_path):
    done = _init(importing_library, tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    importer = yaml.safe_load((tmp_path / "draft.yaml").read_text())["ep"]["importer"]
    assert importer == {"handle_types": ["host_allocation"], "tensor_memory": "default"}
    outcome = conformance_run(tmp_path, "draft.yaml", "--ep-library", str(importing_library), "--ep", "RefDevExecutionProvider",
                              "-k", "import. and not opaque-fd", env=NO_VULKAN)
    (claim,) = [c for c in outcome.report["ep"]["claims"] if c["claim"] == "importer"]
    assert claim["value"] == "handle types host_allocation; imported tensors in default memory"
    assert claim["this_run"] == {"status": "passed", "evidence": "the importer takes every claimed handle type"}


def test_init_warns_of_an_importer_error_status_and_states_that_it_imports_nothing(importing_library, tmp_path):
    done = _init(importing_library, tmp_path, ORT_REFDEV_IMPORT_FAULT="importer-error")
    assert done.returncode == 0
    assert done.stderr == (f"ort-conformance: warning: CreateExternalResourceImporterForDevice answered an error status ({IMPORTER_ERROR}) "
                           "instead of OK and no importer: a run fails import.unsupported-is-success (recommended)\n")
    text = (tmp_path / "draft.yaml").read_text()
    assert "  # WARNING: CreateExternalResourceImporterForDevice answered an error status" in text
    assert yaml.safe_load(text)["ep"]["importer"] is None


def test_the_probe_tries_copies_on_host_allocation_imports(importing_library):
    run = subprocess.run([sys.executable, "-m", "conformance.cli", "probe", "--ep-library", str(importing_library), "--ep", "refdev", "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "VK_ICD_FILENAMES": "/nonexistent.json"})
    imports = json.loads(run.stdout)["eps"][0]["devices"][0]["imports"]
    assert imports["status"] == "importer" and imports["handle_type"] == "host_allocation"
    assert {(c["source"], c["destination"]): c["status"] for c in imports["copies"]} == {
        ("imported", "cpu"): "supported", ("cpu", "imported"): "supported", ("imported", "imported"): "supported"}


class _FdProducer:
    """Hands out a new fd of one memfd per export, as vkGetMemoryFdKHR does."""
    handle_type = "vk_memory_opaque_fd"

    def __init__(self):
        self.memfd = os.memfd_create("handed-test")

    def export(self, allocation):
        return os.dup(self.memfd)


def test_a_handed_fd_the_importer_took_is_never_touched_again():
    producer = _FdProducer()
    kept = Handed(producer, None)
    assert kept.settle() == "the caller's fd was left open to the caller"
    kept.close()
    with pytest.raises(OSError):
        os.fstat(kept.native)
    taken = Handed(producer, None)
    os.close(taken.native)  # the importer closes it ...
    reused = os.open(os.devnull, os.O_RDONLY)  # ... and the number is given to something else
    assert reused == taken.native
    assert taken.settle().startswith("the importer took the caller's fd")
    taken.close()
    os.fstat(reused)  # still open: the caller did not close a number it no longer owned
    os.close(reused)
    held = Handed(producer, None)
    duplicate = os.dup(held.native)  # an importer that keeps a dup
    assert held.settle() == "the caller's fd was left open to the caller; the importer holds 1 other fd(s) of the same memory"
    held.close()
    os.close(duplicate)
    os.close(producer.memfd)


class _Ctx:
    reproducer = ""
    device_index = 0

    class target:  # noqa: N801 (what the script names: a plugin library)
        library, registration, provider = "/nonexistent/libep.so", "ep", "EpExecutionProvider"

    def __init__(self):
        self.evidence = Evidence()

    def attempt(self, step, reproducer=None):
        pass

    def prove(self, key, value):
        self.evidence.prove(key, value)


class _RefusingRig:
    """An importer that refuses every import for a reason of its own (an fd already closed)."""

    class _Producer:
        handle_type = "host_allocation"

        def allocate(self, size):
            return object()

        def export(self, allocation):
            return 4096

        def free(self, allocation):
            pass

    def source(self, kind):
        return self._Producer()

    class producers:  # noqa: N801 (the rig's Producers, as the checks reach them)
        @staticmethod
        def of(kind):
            return _RefusingRig._Producer()

    def import_handed(self, handed, size, offset=0, **_):
        raise OrtError("ImportMemory", 2, "Bad file descriptor")

    def can_import(self, handle_type):
        return handle_type == "host_allocation"

    def release_handle(self, handle):
        raise AssertionError("no handle was ever given")


def test_a_refusal_whose_valid_twin_is_refused_too_proves_nothing(monkeypatch):
    from conformance.checks import imported_refusals
    monkeypatch.setattr(imported_refusals.ImportRig, "for_context", classmethod(lambda cls, ctx: _RefusingRig()))
    ctx = _Ctx()
    with pytest.raises(NotRun, match="valid twin: ImportMemory: Bad file descriptor; bad request: ImportMemory: Bad file descriptor"):
        list(imported_refusals.rejects_bad(ctx, "size-past-allocation", HOST))
    assert proofs.REFUSED not in ctx.evidence


def test_a_denied_type_refused_beside_a_refused_twin_proves_nothing(monkeypatch):
    from conformance.checks import imported_memory
    monkeypatch.setattr(imported_memory.ImportRig, "for_context", classmethod(lambda cls, ctx: _RefusingRig()))
    ctx = _Ctx()
    ctx.step = ""
    with pytest.raises(NotRun, match="valid twin: Bad file descriptor; labelled D3D12_RESOURCE: Bad file descriptor"):
        list(imported_memory.capability(ctx, "d3d12-resource"))
    assert proofs.REFUSED not in ctx.evidence


def test_a_crash_in_one_interop_call_stops_only_calls_of_that_kind(importing_library, tmp_path):
    outcome = conformance_run(tmp_path, "--ep-library", str(importing_library), "--ep", "refdev", "-k", "(import. or copy.c-api) and not opaque-fd",
                              env={**NO_VULKAN, "ORT_REFDEV_IMPORT_FAULT": "abort-tensor"})
    results = json.loads((outcome.reports / "report.json").read_text())["results"]
    crashed = [r for r in results if r["outcome"] == "crash"]
    assert crashed and {r["details"]["call"]["kind"] for r in crashed} == {"CreateTensorFromMemory"}
    assert all("during CreateTensorFromMemory while CreateTensorFromMemory of" in r["message"] for r in crashed)
    stopped = [r for r in results if r["outcome"] == "not_run" and "CreateTensorFromMemory" in r["message"]]
    assert stopped, [(r["contract"], r["outcome"], r["message"][:100]) for r in results]
    # what makes no tensor still runs: the capability, the refusals at ImportMemory, and the rest of the catalogue
    assert _outcomes(results, "import.capability") == {"pass"}
    rejects = {r["params"]["request"]: r["outcome"] for r in results if r["contract"] == "import.rejects-bad"}
    assert rejects["size-past-allocation"] == rejects["bad-version"] == "pass"
    assert "pass" in _outcomes(results, "copy.c-api-roundtrip")
