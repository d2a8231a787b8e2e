"""`ort-conformance init`: the draft it writes of a real EP (the reference EP of refdev/), what it
says of a fact that breaks a contract, each bad input's one line, and the pure drafting
(conformance.tools.draft) on facts made up to the point."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conformance import cli
from conformance.catalogue.spec import load_catalogue
from conformance.facts import EpFacts
from conformance.outcomes import Outcome, Result, Verdict, verdict
from conformance.rules.strict import draft_reason
from conformance.tools import draft as drafting
from conformance.tools.init import InitError, _validate
from conftest import conformance_run

ROOT = Path(__file__).resolve().parents[1]
PROVIDER = "RefDevExecutionProvider"
INCLUDE = ROOT / "refdev" / "build" / "deps" / "usr" / "include" / "onnxruntime"


def init(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["init", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def stubs(refdev_library, tmp_path_factory) -> Path:
    """tests/stub_ep.c built twice (a library whose devices STUB_EP_DEVICES makes go wrong, and
    one with no CreateEpFactories), and a file that is no library, in a folder of their own."""
    if shutil.which("gcc") is None or not INCLUDE.is_dir():
        pytest.skip("no gcc, or no onnxruntime headers under refdev/build/deps")
    folder = tmp_path_factory.mktemp("stubs")
    for name, defines in (("libstub.so", []), ("libnoentry.so", ["-DSTUB_EP_NO_ENTRY"])):
        subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-fvisibility=hidden", *defines,
                        f"-I{INCLUDE}", str(Path(__file__).parent / "stub_ep.c"), "-o", str(folder / name)], check=True)
    (folder / "libtext.so").write_text("not a shared library\n")
    return folder


# --- a real EP ---------------------------------------------------------------------------------


def test_init_drafts_refdev_as_observed_unconfirmed_claims_that_validate(refdev_library, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = init(capsys, f"--ep-library={refdev_library}", "--ep", PROVIDER, "-o", "refdev.yaml")
    assert code == 0 and err == "", err
    assert out.startswith("wrote refdev.yaml: a draft of RefDevExecutionProvider's spec")
    assert cli.main(["validate", "refdev.yaml"]) == 0
    ep = yaml.safe_load((tmp_path / "refdev.yaml").read_text(encoding="utf-8"))["ep"]
    assert ep["draft"] and ep["provider"] == PROVIDER and ep["packages"] == []
    assert ep["memory"] == {"default": {"device_type": "gpu", "vendor_id": 0xC0DE, "name": "RefDev"}, "host_accessible": None}
    assert ep["copy_directions"] == ["cpu>default", "default>cpu", "default>default"]
    assert ep["session_memory"] == {"inputs": ["cpu", "default"], "outputs": ["default"]}
    assert ep["importer"] is None and ep["ops"] == {"Add": ["float32"], "Relu": ["float32"]}
    (source,) = ep["sources"]
    import onnxruntime

    assert source["kind"] == "observed" and re.match(r"\d{4}-\d\d-\d\dT", source["date"]) and source["onnxruntime"] == onnxruntime.__version__
    assert source["library_sha256"] == hashlib.sha256(refdev_library.read_bytes()).hexdigest()
    assert source["claims"] == list(ep["verification"])
    assert set(ep["verification"]) == {"device_type", "memory", "session_memory", "copy_directions", "packages", "importer", "ops"}
    assert all(v == {"verified": False, "how": "observed by init; confirm"} for v in ep["verification"].values())
    assert "not_applicable" not in ep and "waivers" not in ep


def test_init_keeps_an_existing_file_unless_forced(refdev_library, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("mine\n")
    code, out, err = init(capsys, f"--ep-library={refdev_library}", "--ep", PROVIDER, "-o", "mine.yaml")
    assert (code, out, err) == (2, "", "ort-conformance: mine.yaml exists: it is kept (--force replaces it)\n")
    code, out, err = init(capsys, f"--ep-library={tmp_path / 'nope.so'}", "--ep", PROVIDER, "-o", "mine.yaml", "--force")
    assert code == 2 and (tmp_path / "mine.yaml").read_text() == "mine\n"
    code, out, err = init(capsys, f"--ep-library={refdev_library}", "--ep", PROVIDER, "-o", "mine.yaml", "--force")
    assert code == 0 and yaml.safe_load((tmp_path / "mine.yaml").read_text())["ep"]["provider"] == PROVIDER


def test_on_refdev_refusing_device_copies_init_warns_and_the_run_with_the_draft_fails(refdev_library, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORT_REFDEV_FAULT", "no-d2d")
    code, out, err = init(capsys, f"--ep-library={refdev_library}", "--ep", PROVIDER, "-o", "draft.yaml")
    assert code == 0
    (warning,) = err.splitlines()
    assert warning.startswith("ort-conformance: warning: copy_tensors default>default: required but missing")
    assert warning.endswith("a run fails copy.device-to-device (required)")
    lines = (tmp_path / "draft.yaml").read_text(encoding="utf-8").splitlines()
    at = lines.index("  copy_directions: [cpu>default, default>cpu]")
    assert lines[at - 1].startswith("  # WARNING: copy_tensors default>default") and "copy.device-to-device" in lines[at - 1]
    run = conformance_run(tmp_path, "draft.yaml", f"--ep-library={refdev_library}", "--ep", PROVIDER, "-k", "device-to-device",
                          env={"ORT_REFDEV_FAULT": "no-d2d"})
    assert run.report["verdict"] == "non_conformant"
    assert "required contract broken: copy.device-to-device" in run.report["verdict_reasons"]
    assert run.report["ep"]["spec"].startswith("draft.yaml")


def test_a_strict_run_with_the_draft_is_incomplete_naming_the_claims_left_to_confirm(refdev_library, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert init(capsys, f"--ep-library={refdev_library}", "--ep", PROVIDER, "-o", "draft.yaml")[0] == 0
    run = conformance_run(tmp_path, "draft.yaml", f"--ep-library={refdev_library}", "--ep", PROVIDER, "--conformance-strict")
    assert run.exit_code == 1 and run.report["verdict"] == "incomplete"
    assert run.report["verdict_reasons"][0] == (
        "strict run: the EP spec draft.yaml is a draft (ort-conformance init): claims left to confirm: device_type, memory, "
        "session_memory, copy_directions, packages, importer, ops; confirm each in its `verification`, then delete its `draft` line")
    assert run.report["ep"]["draft"]["unconfirmed"][-1] == "ops"
    assert "strict run: the EP spec draft.yaml is a draft" in run.output
    assert "**A draft** (`ort-conformance init`): claims nobody has confirmed in the file: device_type, memory" in (
        run.reports / "report.md").read_text(encoding="utf-8")
    assert "<b>A draft</b>" in (run.reports / "report.html").read_text(encoding="utf-8")


# --- bad input: one line, exit 2, nothing written ------------------------------------------------


BAD = {
    "missing": (["--ep-library={stubs}/nope.so", "--ep", "X"], {}, "ort-conformance: EP library not found: {stubs}/nope.so"),
    "not a library": (["--ep-library={stubs}/libtext.so", "--ep", "X"], {}, "ort-conformance: onnxruntime could not load EP library {stubs}/libtext.so: "),
    "no CreateEpFactories": (["--ep-library={stubs}/libnoentry.so", "--ep", "X"], {}, "ort-conformance: onnxruntime could not load EP library "),
    "no device": (["--ep-library={stubs}/libstub.so", "--ep", "StubExecutionProvider"], {"STUB_EP_DEVICES": "none"},
                  "ort-conformance: EP library {stubs}/libstub.so lists no EP device here"),
    "crash": (["--ep-library={stubs}/libstub.so", "--ep", "StubExecutionProvider"], {"STUB_EP_DEVICES": "abort"},
              "ort-conformance: the EP crashed while onnxruntime loaded it (registering the library, listing its devices): "
              "the worker that loaded it was killed by SIGABRT"),
    "hang": (["--ep-library={stubs}/libstub.so", "--ep", "StubExecutionProvider", "--timeout", "1"], {"STUB_EP_DEVICES": "hang"},
             "ort-conformance: the EP hung while onnxruntime loaded it (registering the library, listing its devices): no answer within 10 s"),
    "another name": (["--ep-library={refdev}", "--ep", "Nope"], {},
                     "ort-conformance: unknown EP 'Nope': library {refdev} provides RefDevExecutionProvider, no EP of that name"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_each_bad_input_is_one_line_exit_2_and_no_draft(case, stubs, refdev_library, tmp_path, monkeypatch, capsys):
    args, env, line = BAD[case]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    fill = {"stubs": stubs, "refdev": refdev_library}
    code, out, err = init(capsys, *(a.format(**fill) for a in args), "-o", "draft.yaml")
    assert code == 2 and out == ""
    (said,) = err.splitlines()
    assert said.startswith(line.format(**fill)), said
    if case == "no CreateEpFactories":
        assert "CreateEpFactories" in said
    assert list(tmp_path.iterdir()) == []


# --- the drafting itself -----------------------------------------------------------------------


def _memory(name: str, kind: str, device_type: str = "gpu") -> dict:
    return {"name": name, "device_id": 0, "vendor_id": 0xACE, "device_mem_type": kind, "allocator_type": "ort_device_allocator",
            "mem_type": "default", "device_type": device_type}


CPU = _memory("Cpu", "default", "cpu")


def _observed(*, library: str | None = "/opt/acme/libacme.so", host: bool = False, pairs: dict[str, str] | None = None,
              imports: dict | None = None, inputs: list | None = None, vendor: str = "Acme") -> drafting.Observed:
    device = {"index": 0, "label": "acme", "ep_vendor": vendor, "ep_metadata": {"version": "2.0"}, "hardware": {"type": "gpu", "vendor": "Acme"},
              "memory": {"default": _memory("AcmeMem", "default"), "host_accessible": _memory("AcmeHost", "host_accessible") if host else None}}
    facts = {"provider": "AcmeExecutionProvider", "label": "acme", "library": library, "library_sha256": "a" * 64 if library else None,
             "plugin_module": None, "plugin_package": None, "declared": False, "ep_device": True, "devices": [device],
             "onnxruntime": {"version": "1.32.0", "package": "onnxruntime"}, "api": {"graph_assignment_info": True}}
    statuses = {"cpu>default": "supported", "default>cpu": "supported", "default>default": "supported", **(pairs or {})}
    matrix = {"pairs": [{"source": d.split(">")[0], "destination": d.split(">")[1], "status": s, "detail": "seen"} for d, s in statuses.items()],
              "imports": imports or {"status": "none", "reason": "none", "handle_types": []}}
    session = {"recipe": "add", "dtype": "float32", "ops_on_ep": ["Add"], "ops_elsewhere": [], "ran": True, "run": "", "refused": "",
               "claimed_but_unrunnable": False, "inputs": inputs or [_memory("AcmeMem", "default")], "outputs": [_memory("AcmeMem", "default")]}
    sessions = {"assignment_known": True, "sessions": [session]}
    return drafting.Observed(EpFacts.from_wire(facts), matrix, sessions, "2026-12-05T00:00:00Z", "ort-conformance init")


@pytest.fixture(scope="module")
def catalogue():
    return load_catalogue()


def _breaches(made: drafting.Draft) -> dict[str, str]:
    return {b.contract: b.severity for b in made.breaches}


def test_a_required_direction_that_failed_is_left_out_and_warned_beside_the_claim(catalogue, tmp_path):
    made = drafting.draft(_observed(pairs={"default>cpu": "broken"}), catalogue)
    assert made.data["ep"]["copy_directions"] == ["cpu>default", "default>default"]
    assert _breaches(made) == {"copy.required-directions": "required"}
    text = drafting.render(made, "ep.schema.json")
    assert "  # WARNING: copy_tensors default>cpu: broken (seen): a run fails copy.required-directions (required)\n  copy_directions:" in text
    _validate(text, "acme.yaml")


def test_host_accessible_memory_the_ep_cannot_copy_to_is_warned(catalogue):
    made = drafting.draft(_observed(host=True, pairs={"cpu>host_accessible": "supported", "host_accessible>cpu": "unsupported"}), catalogue)
    assert "cpu>host_accessible" in made.data["ep"]["copy_directions"] and "host_accessible>cpu" not in made.data["ep"]["copy_directions"]
    assert [b.seen for b in made.breaches][:2] == ["copy_tensors host_accessible>cpu: unsupported (seen)",
                                                   "copy_tensors default>host_accessible: not tried"]


def test_an_importer_that_errors_instead_of_answering_none_is_warned(catalogue):
    made = drafting.draft(_observed(imports={"status": "none", "reason": "imports nothing", "handle_types": [], "refused_with": "not supported"}),
                          catalogue)
    assert made.data["ep"]["importer"] is None
    assert _breaches(made) == {"import.unsupported-is-success": "recommended"}


def test_session_inputs_in_host_accessible_memory_are_warned_where_the_contested_rule_does_not_hold(catalogue):
    inputs = [_memory("AcmeHost", "host_accessible")]
    built_in = drafting.draft(_observed(library=None, host=True, inputs=inputs), catalogue)
    assert built_in.data["ep"]["session_memory"]["inputs"] == ["host_accessible"]
    assert _breaches(built_in).get("memory-info.session-inputs") == "required"
    plugin = drafting.draft(_observed(host=True, inputs=inputs), catalogue)  # a plugin EP on onnxruntime >= 1.27: lawful
    assert "memory-info.session-inputs" not in _breaches(plugin)
    other = drafting.draft(_observed(inputs=[CPU, _memory("Elsewhere", "default")]), catalogue)
    assert other.data["ep"]["session_memory"]["inputs"] == ["cpu"] and "memory-info.session-inputs" in _breaches(other)


def test_what_the_ep_names_cannot_break_the_yaml_or_its_comments(catalogue, tmp_path):
    hostile = 'Acme\nCorp # "x" \x85 \u2028 ]: {'
    made = drafting.draft(_observed(vendor=hostile, pairs={"default>default": "required_but_missing"}), catalogue)
    made.breaches[0] = drafting.Breach("copy_directions", "copy.device-to-device", "required", hostile)
    text = drafting.render(made, "ep.schema.json")
    assert yaml.safe_load(text) == made.data and hostile in made.data["ep"]["summary"]
    comments = [line for line in text.splitlines() if line.lstrip().startswith("#")]
    assert any("WARNING: Acme Corp" in line for line in comments)
    _validate(text, "acme.yaml")


def test_a_draft_that_does_not_validate_is_not_written(catalogue):
    made = drafting.draft(_observed(), catalogue)
    made.data["ep"]["memory"]["default"]["device_type"] = "tpu"
    with pytest.raises(InitError, match="the draft does not validate"):
        _validate(drafting.render(made, "ep.schema.json"), "acme.yaml")


def test_every_contract_init_names_is_in_the_catalogue(catalogue):
    source = Path(drafting.__file__).read_text(encoding="utf-8")
    named = set(re.findall(r'"((?:copy|memory-info|import|session)\.[a-z-]+)"', source))
    assert named and named <= {contract.id for contract in catalogue.contracts}


def test_a_strict_verdict_with_a_draft_is_incomplete_unless_a_failure_decides_it():
    def result(outcome: Outcome) -> Result:
        return Result(contract="copy.device-to-device", ep="AcmeExecutionProvider", device="acme", params={}, outcome=outcome, message="m",
                      spec="copy.yaml:28", severity="required", subject="ep")

    reason = draft_reason([{"spec": "acme.yaml", "note": "n", "unconfirmed": ["memory", "ops"]}])
    assert "acme.yaml is a draft" in reason and "claims left to confirm: memory, ops" in reason
    assert verdict([result(Outcome.PASS)], strict=True, draft=reason) == (Verdict.INCOMPLETE, [f"strict run: {reason}"])
    assert verdict([result(Outcome.PASS)], draft=reason)[0] is Verdict.CONFORMANT
    assert verdict([result(Outcome.FAIL)], strict=True, draft=reason)[0] is Verdict.NON_CONFORMANT
    assert draft_reason([]) == ""


def test_the_draft_is_json_schema_valid_as_written(catalogue):
    import jsonschema

    schema = json.loads((ROOT / "conformance" / "schemas" / "ep.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(drafting.draft(_observed(), catalogue).data)
