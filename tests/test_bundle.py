"""`ort-conformance bundle`, `verify` and `diff` on real runs: a CPU run's bundle verifies, a
tampered one does not (each tampering named), and the diff of a good and a faulty reference EP
run exits non-zero naming the regression."""

from __future__ import annotations

import io
import itertools
import json
import tarfile
from pathlib import Path

import pytest
from conftest import conformance_run

from conformance.tools import bundle

from conformance import cli


@pytest.fixture(scope="module")
def cpu_bundle(cpu_reports, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("bundle") / "acme.tar.gz"
    assert cli.main(["bundle", "--report-dir", str(cpu_reports), "-o", str(output), "--vendor", "ACME"]) == 0
    return output


def test_without_an_output_the_bundle_is_named_after_the_ep(cpu_reports, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bundle", "--report-dir", str(cpu_reports)]) == 0
    assert (tmp_path / "conformance-cpu.tar.gz").is_file()
    assert capsys.readouterr().out.startswith("conformance-cpu.tar.gz: ")


def rewrite(source: Path, target: Path, change, *, rehash: bool) -> Path:
    """A copy of the bundle with `change(files)` applied, its manifest's hashes redone or not."""
    files = bundle.read(source)
    change(files)
    if rehash:
        manifest = json.loads(files[bundle.MANIFEST])
        manifest["files"] = {name: bundle.sha256(data) for name, data in files.items() if name != bundle.MANIFEST}
        files[bundle.MANIFEST] = json.dumps(manifest).encode()
    with tarfile.open(target, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return target


def edit_report(edit):
    def change(files):
        report = json.loads(files["report.json"])
        edit(report)
        files["report.json"] = json.dumps(report).encode()
    return change


def verify(path: Path, capsys) -> tuple[int, str]:
    code = cli.main(["verify", str(path)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_bundle_holds_manifest_reports_junit_and_models(cpu_bundle):
    files = bundle.read(cpu_bundle)
    manifest = json.loads(files[bundle.MANIFEST])
    assert {"report.json", "report.md", "report.html", "junit.xml"} <= set(files)
    assert any(name.startswith("models/") and name.endswith(".onnx") for name in files)
    assert manifest["vendor"] == "ACME" and manifest["ep"]["name"] == "CPUExecutionProvider"
    assert manifest["onnxruntime"]["version"] and manifest["onnxruntime"]["build"] and manifest["spec_digest"]
    assert manifest["os"] and manifest["python"] and manifest["devices"][0]["label"] == "cpu"
    assert set(manifest["files"]) == set(files) - {bundle.MANIFEST}


def test_verify_passes_on_a_cpu_run_bundle(cpu_bundle, capsys):
    assert verify(cpu_bundle, capsys) == (0, f"{cpu_bundle}: complete and consistent\n")


def test_verify_fails_on_a_changed_file(cpu_bundle, tmp_path, capsys):
    def change(files):
        files["report.md"] = files["report.md"].replace(b"conformant", b"certified")
    code, output = verify(rewrite(cpu_bundle, tmp_path / "b.tar.gz", change, rehash=False), capsys)
    assert code == 1 and "report.md: sha256" in output and "differs from the manifest's" in output


def test_verify_fails_on_a_changed_hash_in_the_manifest(cpu_bundle, tmp_path, capsys):
    def change(files):
        manifest = json.loads(files[bundle.MANIFEST])
        model = next(name for name in manifest["files"] if name.startswith("models/"))
        manifest["files"][model] = "0" * 64
        files[bundle.MANIFEST] = json.dumps(manifest).encode()
    code, output = verify(rewrite(cpu_bundle, tmp_path / "b.tar.gz", change, rehash=False), capsys)
    assert code == 1 and "models/" in output and "differs from the manifest's " + "0" * 64 in output


def test_verify_fails_on_a_removed_result_even_with_hashes_redone(cpu_bundle, tmp_path, capsys):
    removed = {}

    def drop_one(report):
        removed.update(report["results"].pop(0))
    code, output = verify(rewrite(cpu_bundle, tmp_path / "b.tar.gz", edit_report(drop_one), rehash=True), capsys)
    assert code == 1
    assert "checks were collected but" in output and "does not count the results" in output
    assert f"{removed['contract']} on {removed['ep']} {removed['device']}, outcome {removed['outcome']}" in output


def test_verify_names_a_required_contract_without_results(cpu_bundle, tmp_path, capsys):
    def drop_contract(report):
        report["results"] = [r for r in report["results"] if r["contract"] != "session.nodes-on-ep"]
    code, output = verify(rewrite(cpu_bundle, tmp_path / "b.tar.gz", edit_report(drop_contract), rehash=True), capsys)
    assert code == 1 and "required contract session.nodes-on-ep has no result on CPUExecutionProvider cpu" in output


def test_verify_names_a_not_run_without_a_reason(cpu_bundle, tmp_path, capsys):
    def silent_not_run(report):
        report["results"][0].update(outcome="not_run", message="")
    code, output = verify(rewrite(cpu_bundle, tmp_path / "b.tar.gz", edit_report(silent_not_run), rehash=True), capsys)
    assert code == 1 and "not_run without a reason" in output


def test_verify_names_a_verdict_the_results_do_not_give(cpu_bundle, tmp_path, capsys):
    def fail_one(report):
        case = next(r for r in report["results"] if r["outcome"] == "pass" and r["subject"] == "ep" and r["severity"] == "required")
        case["outcome"] = "fail"
    code, output = verify(rewrite(cpu_bundle, tmp_path / "b.tar.gz", edit_report(fail_one), rehash=True), capsys)
    assert code == 1 and "verdict 'conformant', but the results give 'non_conformant'" in output


def test_bundle_without_junit_is_one_clear_error(tmp_path, capsys):
    (tmp_path / "report.json").write_text("{}")
    assert cli.main(["bundle", "--report-dir", str(tmp_path), "-o", str(tmp_path / "x.tar.gz")]) == 2
    assert "no JUnit file" in capsys.readouterr().err


def test_verify_of_something_that_is_not_a_bundle_is_one_clear_error(tmp_path, capsys):
    (tmp_path / "x.tar.gz").write_bytes(b"not a tar")
    code, output = verify(tmp_path / "x.tar.gz", capsys)
    assert code == 2 and "not a bundle" in output and "Traceback" not in output


def test_diff_of_a_run_with_itself_exits_zero(cpu_bundle, capsys):
    assert cli.main(["diff", str(cpu_bundle), str(cpu_bundle)]) == 0
    assert "no changes" in capsys.readouterr().out


def test_diff_of_a_good_and_a_faulty_reference_ep_run_exits_one_naming_the_regression(refdev_library, tmp_path, capsys):
    args = (f"--ep-library={refdev_library}", "--ep=refdev")  # as the README gives it: pytest then prints ids as they are
    (tmp_path / "good").mkdir()
    (tmp_path / "bad").mkdir()
    good = conformance_run(tmp_path / "good", *args, env={"ORT_REFDEV_FAULT": None}).reports
    bad_run = conformance_run(tmp_path / "bad", *args, env={"ORT_REFDEV_FAULT": "corrupt"})
    bad = bad_run.reports
    assert cli.main(["bundle", "--report-dir", str(bad), "-o", str(tmp_path / "bad.tar.gz")]) == 0
    assert cli.main(["verify", str(tmp_path / "bad.tar.gz"), "--library", str(refdev_library)]) == 0, "a failing run's bundle is still complete"
    (tmp_path / "other.so").write_bytes(refdev_library.read_bytes() + b"\0")
    assert cli.main(["verify", str(tmp_path / "bad.tar.gz"), "--library", str(tmp_path / "other.so")]) == 1
    assert "is not the bundle's EP library" in capsys.readouterr().err
    assert cli.main(["diff", str(good / "report.json"), str(tmp_path / "bad.tar.gz")]) == 1
    output = capsys.readouterr().out
    assert output.startswith("verdict: conformant -> non_conformant")
    assert "ort-conformance/copy::copy.roundtrip-exact[refdev-float32-" in output and ": pass -> fail: CPU → DEFAULT → CPU changed the bytes" in output
    # Each regression named as pytest named it in the broken run's FAILED and ERROR lines.
    regressions = output.split("\nREGRESSIONS (", 1)[1].split("\n", 1)[1]
    cases = [line.strip().split(": ", 1)[0] for line in itertools.takewhile(lambda line: line.startswith("  "), regressions.splitlines())]
    unnamed = [case for case in cases if f"FAILED {case}" not in bad_run.output and f"ERROR {case}" not in bad_run.output]
    assert cases and not unnamed, (len(cases), unnamed[:3], bad_run.output[-1500:])
    assert "RefDevExecutionProvider refdev cpu>default: supported -> broken" in output
    assert cli.main(["diff", str(tmp_path / "bad.tar.gz"), str(good)]) == 0, "the way back is fixes, not regressions"
    assert "fixes (" in capsys.readouterr().out


def _set(name, value):
    def change(files):
        files[name] = json.dumps(value).encode()
    return change


def _replace(name, **values):
    def change(files):
        files[name] = json.dumps({**json.loads(files[name]), **values}).encode()
    return change


@pytest.mark.parametrize("change, problem", [
    (_set("manifest.json", []), "manifest.json: $: [] is not of type 'object'"),
    (_replace("manifest.json", files=[]), "manifest.json: $.files: [] is not of type 'object'"),
    (_set("report.json", "x"), "report.json: $: 'x' is not of type 'object'"),
    (_replace("report.json", results=[1]), "report.json: $.results[0]: 1 is not of type 'object'"),
    (_replace("report.json", ep=[], devices=[{}]), "report.json: $.devices[0]: 'label' is a required property"),
], ids=["manifest-list", "manifest-files", "report-string", "result-number", "device-without-label"])
def test_verify_of_a_bundle_altered_by_hand_lists_problems_and_never_crashes(cpu_bundle, tmp_path, capsys, change, problem):
    altered = rewrite(cpu_bundle, tmp_path / "altered.tar.gz", change, rehash=not problem.startswith("manifest"))
    code, output = verify(altered, capsys)
    assert code == 1 and problem in output and "Traceback" not in output
    if "$.devices" in problem:
        assert "report.json: $.ep: [] is not of type 'object'" in output  # every problem, not the first alone
    assert cli.main(["diff", str(altered), str(cpu_bundle)]) == (0 if problem.startswith("manifest") else 2)


def test_bundle_refuses_a_symlink_planted_among_the_runs_files_or_as_the_archive(cpu_reports, tmp_path, capsys):
    import shutil

    secret = tmp_path / "secret"
    secret.write_text("a private key")
    run = tmp_path / "run"
    shutil.copytree(cpu_reports, run)
    (run / "models" / "planted.onnx").symlink_to(secret)  # not the run's: never read, never bundled
    assert cli.main(["bundle", "--report-dir", str(run), "-o", str(tmp_path / "b.tar.gz")]) == 0
    assert "models/planted.onnx" not in bundle.read(tmp_path / "b.tar.gz")
    (tmp_path / "b.tar.gz").unlink()
    model = sorted((run / "models").glob("*-*.onnx"))[0]  # one the run used, listed by its journal
    model.unlink()
    model.symlink_to(secret)
    assert cli.main(["bundle", "--report-dir", str(run), "-o", str(tmp_path / "b.tar.gz")]) == 2
    assert f"{model}: is a symlink: refusing to read through it" in capsys.readouterr().err
    assert not (tmp_path / "b.tar.gz").exists()
    model.unlink()
    (tmp_path / "b.tar.gz").symlink_to(secret)
    assert cli.main(["bundle", "--report-dir", str(run), "-o", str(tmp_path / "b.tar.gz")]) == 2
    assert "b.tar.gz: is a symlink: refusing to write through it" in capsys.readouterr().err
    assert secret.read_text() == "a private key"


def test_one_report_folder_bundles_to_the_same_bytes(cpu_reports, tmp_path):
    """Two bundles of one folder, made a second apart, are byte-identical: members dated the
    run's start, owned by 0:0 without names, sorted; the gzip header dated the same and
    naming no file. Without any of these the two archives differ."""
    import time

    first, _ = bundle.write(cpu_reports, tmp_path / "first.tar.gz")
    time.sleep(1.1)
    second, _ = bundle.write(cpu_reports, tmp_path / "second.tar.gz")
    assert first.read_bytes() == second.read_bytes()
    report = json.loads((cpu_reports / "report.json").read_text())
    started = bundle._epoch(report)
    assert started > 0
    raw = first.read_bytes()
    assert int.from_bytes(raw[4:8], "little") == started  # gzip's MTIME field
    assert raw[3] & 0x08 == 0  # no FNAME: the archive's own name is not in it
    with tarfile.open(first) as archive:
        members = archive.getmembers()
    assert [m.name for m in members] == [bundle.MANIFEST, *sorted(m.name for m in members[1:])]
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {(started, 0, 0, "", "", 0o644)}
    assert json.loads(bundle.read(first)[bundle.MANIFEST])["created"] == report["run"]["started"]


def test_verify_checks_each_bundled_model_against_its_name_and_recipe(cpu_bundle, tmp_path, capsys):
    """Another model under a model's name, hashes redone: the manifest agrees, the model does not."""
    def change(files):
        first, second = sorted(name for name in files if name.startswith("models/"))[:2]
        files[first] = files[second]
    code, output = verify(rewrite(cpu_bundle, tmp_path / "b.tar.gz", change, rehash=True), capsys)
    assert code == 1 and "are not the model its name says" in output


def test_a_model_file_planted_in_the_report_folder_is_not_bundled(cpu_reports, tmp_path, capsys):
    import shutil

    reports = tmp_path / "reports"
    shutil.copytree(cpu_reports, reports)
    model = sorted((reports / "models").glob("*.onnx"))[0]
    model.write_bytes(b"garbage under a model's name")
    (reports / "models" / "planted.onnx").write_bytes(b"another file")
    output = tmp_path / "b.tar.gz"
    assert cli.main(["bundle", "--report-dir", str(reports), "-o", str(output), "--junit", str(cpu_reports / "junit.xml")]) == 0
    members = bundle.read(output)
    assert f"models/{model.name}" not in members and "models/planted.onnx" not in members
    assert any(name.startswith("models/") for name in members)
    code, text = verify(output, capsys)
    assert code == 0, text


def _unfinished_copy(cpu_reports: Path, target: Path) -> Path:
    """A copy of the run's folder as a run killed after its last result leaves it: the
    journal without its `finished` line, the report set beside it the previous run's."""
    import shutil

    folder = Path(shutil.copytree(cpu_reports, target))
    lines = (folder / "journal.jsonl").read_text().splitlines(keepends=True)
    assert json.loads(lines[-1])["kind"] == "finished"
    (folder / "journal.jsonl").write_text("".join(lines[:-1]))
    return folder


def test_bundle_refuses_a_folder_whose_run_did_not_finish_until_its_reports_are_rebuilt(cpu_reports, tmp_path, capsys):
    folder = _unfinished_copy(cpu_reports, tmp_path / "reports")
    output = tmp_path / "acme.tar.gz"
    assert cli.main(["bundle", "--report-dir", str(folder), "-o", str(output)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "the run did not finish: journal.jsonl has no `finished` line" in error, error
    assert f"ort-conformance rebuild {folder}" in error and not output.exists()
    assert cli.main(["rebuild", str(folder)]) == 0  # the reports written from the journal, marked interrupted
    assert json.loads((folder / "report.json").read_text())["run"]["interrupted"] is True
    assert cli.main(["bundle", "--report-dir", str(folder), "-o", str(output)]) == 0
    capsys.readouterr()
    code, text = verify(output, capsys)
    assert code == 0, text


def test_verify_refuses_a_bundle_of_a_run_that_did_not_finish(cpu_bundle, tmp_path, capsys):
    def unfinish(files):
        lines = files["journal.jsonl"].decode().splitlines(keepends=True)
        files["journal.jsonl"] = "".join(line for line in lines if json.loads(line)["kind"] != "finished").encode()

    code, text = verify(rewrite(cpu_bundle, tmp_path / "b.tar.gz", unfinish, rehash=True), capsys)
    assert code == 1 and "journal.jsonl: the run did not finish" in text, text
    assert bundle.unfinished(bundle.read(cpu_bundle)["journal.jsonl"], json.loads(bundle.read(cpu_bundle)["report.json"])) == ""
