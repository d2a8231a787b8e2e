"""The report set is replaced whole or not at all, and only inside the report folder
(conformance.report.write_all through safe_io, conformance/run/runfolder.py); building it reads
each spec file once (item 9 of "Nothing lost, nothing written outside")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import report
from conformance.record import RunRecord

OLD = {"report.json": '{"verdict": "conformant"}\n', "report.md": "old md\n", "report.html": "old html\n"}


def run(folder: Path, *args: str, conftest: str = "") -> subprocess.CompletedProcess:
    if conftest:
        (folder / "conftest.py").write_text(conftest)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ep=cpu", "-k", "roundtrip-exact",
                           "--conformance-report", "reports", *args], cwd=folder, capture_output=True, text=True, timeout=180)


def test_a_full_disk_leaves_the_previous_set_whole_and_says_which_folder_in_one_line(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    for name, text in OLD.items():
        (reports / name).write_text(text)
    # The disk fills up while the third file is written aside.
    completed = run(tmp_path, conftest="""
import errno, os
from conformance import safe_io

write_aside = safe_io._write_aside

def full(folder, name, contents, mode):
    if name == "report.html":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return write_aside(folder, name, contents, mode)

safe_io._write_aside = full
""")
    assert completed.returncode == pytest.ExitCode.INTERNAL_ERROR, completed.stdout[-2000:] + completed.stderr[-2000:]
    errors = [line for line in completed.stderr.splitlines() if line.strip()]
    assert errors == ["ERROR: the conformance report was not written: reports: cannot write report.json, report.md, report.html, summary.md, "
                      "junit.xml: No space left on device (the folder is full); the files there before are unchanged; "
                      "`ort-conformance rebuild reports` writes it from the journal once that is mended"], completed.stderr
    assert "Traceback" not in completed.stdout + completed.stderr
    # The previous set was moved aside whole when the run started: no verdict of another run stands.
    assert {name: (reports / "previous" / name).read_text() for name in OLD} == OLD
    assert not [name for name in OLD if (reports / name).exists()]
    assert "ort-conformance rebuild" in (reports / "unfinished.txt").read_text()
    assert not [name for name in os.listdir(reports) if name.startswith(".report")]  # nothing left aside
    assert '"kind": "result"' in (reports / "journal.jsonl").read_text()  # rebuild can write it once there is room


def test_the_set_written_is_the_new_one_whole(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    for name, text in OLD.items():
        (reports / name).write_text(text)
    completed = run(tmp_path)
    assert completed.returncode == 0, completed.stdout[-2000:]
    assert all((reports / name).read_text() != text for name, text in OLD.items())


@pytest.mark.parametrize("planted", ["models", "worker-cpu.log", "report.md"])
def test_a_symlink_planted_in_the_report_folder_is_refused_and_nothing_written_through_it(tmp_path, planted):
    reports = tmp_path / "reports"
    reports.mkdir()
    elsewhere = tmp_path / "elsewhere"
    if planted == "models":
        elsewhere.mkdir()
    else:
        elsewhere.write_text("precious\n")
    (reports / planted).symlink_to(elsewhere)
    completed = run(tmp_path)
    output = completed.stdout + completed.stderr
    assert "Traceback" not in output
    assert f"reports/{planted}: is a symlink: refusing to" in output, output[-2000:]
    if planted == "report.md":
        # Found when the set is written: one line, the previous set unchanged (none here).
        assert completed.returncode == pytest.ExitCode.INTERNAL_ERROR
        assert not (reports / "report.json").exists()
    else:
        assert completed.returncode == pytest.ExitCode.USAGE_ERROR  # one usage error at configure, not a check error each
        assert len([line for line in completed.stderr.splitlines() if line.startswith("ERROR")]) == 1
    if planted == "models":
        assert not list(elsewhere.iterdir())
    else:
        assert elsewhere.read_text() == "precious\n"


def many_contracts(count: int) -> str:
    """A vendor's spec file of `count` contracts (as benchmarks/large_catalogue.py makes one)."""
    entries = "".join(f"""  - id: many.c{i}
    statement: Contract number {i} holds (the same check as copy.roundtrip-exact).
    subject: ep
    severity: informational
    provenance:
      basis: inferred
      ref: "the kit's tests"
    since: "1.22"
    sources:
      - kind: onnxruntime-docs
        ref: "onnxruntime Python API: copy_tensors"
    check: copy.roundtrip
""" for i in range(count))
    return f"family: many\ntitle: Many contracts\ncontracts:\n{entries}"


def test_building_the_report_reads_each_spec_file_once(tmp_path, monkeypatch):
    from conformance.catalogue.spec import load_catalogue

    spec = tmp_path / "many.yaml"
    spec.write_text(many_contracts(200))
    try:
        catalogue = load_catalogue([spec])
    except Exception as exc:  # the test's own YAML, should the schema change
        pytest.fail(f"the generated spec does not load: {exc}")
    reads = []
    read_text = Path.read_text

    def counting(self, *args, **kwargs):
        reads.append(str(self))
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counting)
    record = RunRecord(results=(), eps=(), contracts=catalogue.contracts, spec_digest="", collected=0, started=0.0, finished=0.0)
    data = report.build(record)
    assert reads.count(str(spec)) == 1
    assert data["contracts"]["many.c7"]["excerpt"].startswith("  - id: many.c7")
