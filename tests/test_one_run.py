"""A report folder holds one run: its files alone (the previous run's set aside when it starts),
a mark while it has no report of its own, a bundle of that run alone, and `rebuild` the way
back to a verdict from its journal (junit.xml included, what it could not read said)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conformance.cli import main as cli
from conformance.testbed import models, tensors
from conformance.run import journal, runfolder
from conformance.tools import bundle
from conftest import conformance_run

FEW: tuple[str, ...] = ()  # the whole catalogue: a bundle is of a complete run


def members(archive: Path) -> set[str]:
    return set(bundle.read(archive))


def test_a_cpu_runs_bundle_in_a_folder_that_held_a_refdev_run_holds_only_the_cpu_runs_files(refdev_library, tmp_path, capsys):
    (tmp_path / "alone").mkdir()
    (tmp_path / "shared").mkdir()
    alone = conformance_run(tmp_path / "alone", "--ep=cpu", *FEW)  # what the CPU run writes in a folder of its own
    shared = tmp_path / "shared"
    conformance_run(shared, f"--ep-library={refdev_library}", "--ep=refdev", "-k", "roundtrip-exact or lifecycle")
    assert (shared / "reports" / "worker-refdev.log").exists()
    # A model an earlier run used that this one does not (in the cache the runs share).
    _, earlier = models.ModelCache(shared / "reports" / "models").get("identity", tensors.DTYPES["float32"], (7, 7, 7))
    conformance_run(shared, "--ep=cpu", *FEW)
    reports = shared / "reports"
    assert not (reports / "worker-refdev.log").exists() and (reports / "previous" / "worker-refdev.log").exists()
    assert cli(["bundle", "--report-dir", str(reports), "-o", str(tmp_path / "cpu.tar.gz")]) == 0
    assert cli(["bundle", "--report-dir", str(alone.reports), "-o", str(tmp_path / "alone.tar.gz")]) == 0
    packed, expected = members(tmp_path / "cpu.tar.gz"), members(tmp_path / "alone.tar.gz")
    assert "logs/worker-refdev.log" not in packed
    assert packed == expected, (packed ^ expected)
    assert earlier.exists() and f"models/{earlier.name}" not in packed
    capsys.readouterr()
    assert cli(["verify", str(tmp_path / "cpu.tar.gz")]) == 0


def _rewrite(source: Path, target: Path, change) -> Path:
    files = bundle.read(source)
    change(files)
    manifest = json.loads(files[bundle.MANIFEST])
    manifest["files"] = {name: bundle.sha256(data) for name, data in sorted(files.items()) if name != bundle.MANIFEST}
    files[bundle.MANIFEST] = json.dumps(manifest).encode()
    target.write_bytes(bundle.archive(files, 0))
    return target


@pytest.fixture(scope="module")
def cpu_bundle(cpu_reports, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("bundle") / "cpu.tar.gz"
    bundle.write(cpu_reports, output)
    return output


def test_verify_refuses_a_bundle_holding_a_file_its_run_did_not_write(cpu_bundle, tmp_path, capsys):
    def add(files):
        files["logs/worker-refdev.log"] = b"an earlier run's log\n"
        files["notes.txt"] = b"anything else"
    assert cli(["verify", str(_rewrite(cpu_bundle, tmp_path / "b.tar.gz", add))]) == 1
    err = capsys.readouterr().err
    assert "logs/worker-refdev.log: not a file of this run: its journal.jsonl does not list it" in err, err
    assert "notes.txt: not a file of a conformance run" in err, err


def test_verify_checks_every_cases_junit_outcome_against_report_json(cpu_bundle, tmp_path, capsys):
    """A <failure> planted in a case report.json calls not_applicable, hashes redone."""
    def plant(files):
        text = files["junit.xml"].decode()
        at = text.index('value="not_applicable"')
        end = text.index("<skipped", at)
        close = text.index("</skipped>", end) + len("</skipped>")
        files["junit.xml"] = (text[:end] + '<failure message="planted">planted</failure>' + text[close:]).encode()
    assert cli(["verify", str(_rewrite(cpu_bundle, tmp_path / "b.tar.gz", plant))]) == 1
    err = capsys.readouterr().err
    assert "outcome not_applicable as a JUnit failure: 1 JUnit cases, 0 results in report.json" in err, err


def _journal_lines(cpu_reports: Path) -> list[str]:
    return (cpu_reports / journal.NAME).read_text().splitlines(keepends=True)


def _folder_with(cpu_reports: Path, target: Path, lines: list[str]) -> Path:
    folder = Path(shutil.copytree(cpu_reports, target))
    for name in ("report.json", "report.md", "report.html", "summary.md", "junit.xml"):
        (folder / name).unlink()
    shutil.rmtree(folder / "repro", ignore_errors=True)
    (folder / journal.NAME).write_text("".join(lines))
    return folder


def test_rebuild_counts_a_result_line_written_twice_once_and_says_which(cpu_reports, tmp_path, capsys):
    lines = _journal_lines(cpu_reports)
    doubled = [line for line in lines for _ in range(2 if json.loads(line)["kind"] == "result" else 1)]
    folder = _folder_with(cpu_reports, tmp_path / "reports", doubled)
    assert cli(["rebuild", str(folder)]) == 0
    out = capsys.readouterr().out
    results = sum(1 for line in lines if json.loads(line)["kind"] == "result")
    assert out.startswith(f"{results} results of a run that finished"), out
    assert f"note: {results} result lines written again were counted once: ort-conformance/" in out, out
    assert len(json.loads((folder / "report.json").read_text())["results"]) == results


def test_rebuild_refuses_two_different_results_of_one_case(cpu_reports, tmp_path, capsys):
    lines = _journal_lines(cpu_reports)
    index = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "result")
    other = json.loads(lines[index])
    other["result"]["outcome"] = "fail" if other["result"]["outcome"] != "fail" else "pass"
    folder = _folder_with(cpu_reports, tmp_path / "reports", lines + [json.dumps(other) + "\n"])
    assert cli(["rebuild", str(folder)]) == 2
    assert "a second result of" in capsys.readouterr().err
    assert not (folder / "report.json").exists()


def test_rebuild_writes_junit_so_that_the_rebuilt_folder_bundles_and_verifies(cpu_reports, tmp_path, capsys):
    lines = [line for line in _journal_lines(cpu_reports) if json.loads(line)["kind"] != "finished"]
    folder = _folder_with(cpu_reports, tmp_path / "reports", lines)
    assert cli(["rebuild", str(folder)]) == 0
    assert (folder / "junit.xml").exists() and not (folder / runfolder.UNFINISHED).exists()
    assert cli(["bundle", "--report-dir", str(folder), "-o", str(tmp_path / "b.tar.gz")]) == 0
    capsys.readouterr()
    assert cli(["verify", str(tmp_path / "b.tar.gz")]) == 0, capsys.readouterr().err


def test_rebuild_tells_a_torn_last_line_from_a_damaged_one(cpu_reports, tmp_path, capsys):
    lines = [line for line in _journal_lines(cpu_reports) if json.loads(line)["kind"] != "finished"]
    torn = _folder_with(cpu_reports, tmp_path / "torn", lines + [lines[-1][:40]])  # what a SIGKILL mid-write leaves
    assert cli(["rebuild", str(torn)]) == 0
    assert "note: the last line, cut short when the run was killed, was left out" in capsys.readouterr().out
    damaged = _folder_with(cpu_reports, tmp_path / "damaged", lines[:5] + [lines[5][:40] + "\n"] + lines[6:])
    assert cli(["rebuild", str(damaged)]) == 2
    err = capsys.readouterr().err
    assert f"journal.jsonl:6: damaged: line 6 of {len(lines)} is not a journal line" in err, err
    assert not (damaged / "report.json").exists()


def test_rebuild_with_repro_planted_as_a_symlink_says_what_was_written_and_what_was_not(cpu_reports, tmp_path, capsys):
    folder = _folder_with(cpu_reports, tmp_path / "reports", _journal_lines(cpu_reports))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / "repro").symlink_to(elsewhere)
    assert cli(["rebuild", str(folder)]) == 3
    err = capsys.readouterr().err
    assert "the reproducers (repro/) were not written" in err and "is a symlink" in err, err
    assert "the report was: report.json, report.md, report.html, summary.md, junit.xml" in err, err
    assert (folder / "report.json").exists() and not os.listdir(elsewhere)


def test_a_step_summary_that_cannot_be_written_is_one_line(cpu_reports, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "no-such-folder" / "summary.md"))
    folder = _folder_with(cpu_reports, tmp_path / "reports", _journal_lines(cpu_reports))
    assert cli(["rebuild", str(folder)]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "GITHUB_STEP_SUMMARY" in line]
    assert len(warnings) == 1 and warnings[0].startswith("WARNING: $GITHUB_STEP_SUMMARY") and "could not be appended to" in warnings[0]


def test_the_docs_give_an_ep_library_with_an_equals_sign_everywhere():
    """`--ep-library ./libmy_ep.so` (a space) makes pytest take the path for a test path too: run
    from another folder, every id is then prefixed with `../kit/`. The docs write `=` alone."""
    root = Path(__file__).resolve().parent.parent
    import re

    spaced = re.compile(r"--ep-library (\./|[\w./-]+\.so|PATH|LIB)")
    offending = [f"{path.relative_to(root)}:{number}" for path in [root / "README.md", *sorted((root / "docs").glob("*.md")),
                                                                   root / "lanes" / "README.md", root / "benchmarks" / "README.md",
                                                                   root / "conformance" / "cli.py", root / "conformance" / "plugin" / "hooks.py"]
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if spaced.search(line)]
    assert not offending, offending


def test_a_second_ctrl_c_half_a_second_after_the_first_leaves_the_report_set_without_a_traceback(refdev_library, tmp_path):
    import signal
    import time

    from processes import hung_run

    process = hung_run(refdev_library, tmp_path)
    process.send_signal(signal.SIGINT)
    time.sleep(0.5)  # as a person presses Ctrl-C again
    process.send_signal(signal.SIGINT)
    output = process.communicate(timeout=120)[0].decode()
    assert "Traceback" not in output and "INTERNALERROR" not in output, output[-3000:]
    reports = tmp_path / "reports"
    assert (reports / "report.json").exists(), output[-3000:]
    assert json.loads((reports / "report.json").read_text())["run"]["interrupted"] is True
    assert not (reports / runfolder.UNFINISHED).exists()


def test_a_report_folder_path_longer_than_the_system_allows_is_one_clear_line(tmp_path, capsys):
    import subprocess
    import sys

    long = str(tmp_path / "/".join(["a" * 200] * 22))  # over PATH_MAX (4096 on Linux)
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ep=cpu", "-k", "roundtrip-exact",
                                "--conformance-report", long], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    output = completed.stdout + completed.stderr
    assert completed.returncode == pytest.ExitCode.USAGE_ERROR, output[-2000:]
    assert "INTERNALERROR" not in output and "Traceback" not in output, output[-2000:]
    errors = [line for line in output.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and errors[0].endswith("cannot be used: File name too long") and len(errors[0]) < 300, errors
    for command in (["rebuild", long], ["bundle", "--report-dir", long]):
        assert cli(command) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and err.endswith("cannot be used: File name too long"), err


def test_a_run_with_repro_planted_as_a_symlink_says_what_was_written_and_what_was_not(tmp_path):
    import subprocess
    import sys

    reports = tmp_path / "reports"
    reports.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (reports / "repro").symlink_to(elsewhere)
    # A CPU run with findings against onnxruntime: their scripts go to repro/.
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ep=cpu", "-k", "rejects-bad-output",
                                "--conformance-report", "reports"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    output = completed.stdout + completed.stderr
    assert completed.returncode == pytest.ExitCode.INTERNAL_ERROR, output[-2000:]
    assert "Traceback" not in output and "the report was not written" not in output, output[-2000:]
    errors = [line for line in completed.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and errors[0].startswith("ERROR: the reproducers (repro/) were not written:") and "is a symlink" in errors[0], errors
    assert errors[0].endswith("the report was: report.json, report.md, report.html, summary.md, junit.xml"), errors
    assert json.loads((reports / "report.json").read_text())["results"] and not os.listdir(elsewhere)
    assert not (reports / runfolder.UNFINISHED).exists()
