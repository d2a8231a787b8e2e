"""Files others hand us: bundles, shard folders and fleet tables written elsewhere, tampered with.
`verify`, `merge`, `fleet` and `answers` read each as hostile until checked: a member that is
not a regular file under a plain name, a table of the wrong shape, a truncated JUnit file, a
FIFO or an endless file is one line on stderr and exit 2 (`verify` too: never "complete and
consistent"), in little time and memory, never a traceback; a
merge that fails leaves no report set; the same run given twice is one row; and a vendor's
wrapper string cannot break out of its Markdown code span."""

from __future__ import annotations

import copy
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from conftest import conformance_run
from conformance import cli
from conformance.report import markdown, summary
from conformance.report.common import code_span
from conformance.run import runfolder
from conformance.tools import bundle, bundle_archive, fleet_reader

ROOT = Path(__file__).resolve().parents[1]


def one_line_refusal(capsys, argv: list[str]) -> str:
    """The one stderr line `ort-conformance ARGV` refuses with, exit 2."""
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ort-conformance: ") and "Traceback" not in captured.err, captured.err
    return lines[0]


# --- bundles whose members are not regular files under plain names ------------------------------


def member(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, linkname, 0o644
    return info


HOSTILE_MEMBERS = {
    "symlink to a system file": (member("logs/worker-cpu.log.1", tarfile.SYMTYPE, "/etc/passwd"),
                                 "member logs/worker-cpu.log.1 is a symbolic link to '/etc/passwd', not a regular file"),
    "symlink named with ..": (member("../escape", tarfile.SYMTYPE, "/etc/passwd"),
                              "member '../escape': an absolute name, or one with '..', would be unpacked outside the bundle's folder"),
    "hard link": (member("report.copy", tarfile.LNKTYPE, "report.json"), "member report.copy is a hard link to 'report.json', not a regular file"),
    "fifo": (member("logs/pipe", tarfile.FIFOTYPE), "member logs/pipe is a FIFO, not a regular file"),
    "device": (member("logs/zero", tarfile.CHRTYPE), "member logs/zero is a character device, not a regular file"),
    "folder": (member("models", tarfile.DIRTYPE), "member models is a folder, not a regular file"),
    "dot-dot name": (member("models/../../outside.onnx", tarfile.REGTYPE), "member 'models/../../outside.onnx': an absolute name, or one with '..'"),
    "absolute name": (member("/tmp/planted", tarfile.REGTYPE), "member '/tmp/planted': an absolute name"),
    "a file twice": (member("report.md", tarfile.REGTYPE), "member report.md appears twice: a bundle holds each file once"),
}


@pytest.fixture(scope="module")
def good_bundle(cpu_reports, tmp_path_factory) -> Path:
    archive, _ = bundle.write(cpu_reports, tmp_path_factory.mktemp("bundle") / "acme-cpu.tar.gz", vendor="ACME")
    return archive


def with_member(good: Path, path: Path, extra: tarfile.TarInfo) -> Path:
    """`good`'s members, then `extra` (an empty file when it is one), as a new .tar.gz at `path`."""
    with tarfile.open(good) as source, tarfile.open(path, "w:gz") as out:
        for each in source.getmembers():
            out.addfile(each, source.extractfile(each))
        out.addfile(extra, io.BytesIO(b"") if extra.isfile() else None)
    return path


def test_the_good_bundle_these_are_made_from_verifies(good_bundle, capsys):
    assert cli.main(["verify", str(good_bundle)]) == 0
    assert "complete and consistent" in capsys.readouterr().out


@pytest.mark.parametrize("what", HOSTILE_MEMBERS)
def test_a_bundle_with_a_member_that_is_not_a_regular_file_under_a_plain_name_is_refused(good_bundle, tmp_path, capsys, what):
    extra, problem = HOSTILE_MEMBERS[what]
    path = with_member(good_bundle, tmp_path / "tampered.tar.gz", copy.copy(extra))
    line = one_line_refusal(capsys, ["verify", str(path)])  # never "complete and consistent", on any stream
    assert line.startswith(f"ort-conformance: {path}: ") and problem in line
    line = one_line_refusal(capsys, ["fleet", str(path), "-o", str(tmp_path / "fleet")])
    assert str(path) in line and problem in line
    assert not (tmp_path / "fleet").exists()
    assert problem in one_line_refusal(capsys, ["diff", str(path), str(good_bundle)])


def test_a_bundle_larger_than_a_bundle_is_refused_before_it_is_read(tmp_path, capsys, monkeypatch):
    path = tmp_path / "big.tar.gz"
    with open(path, "wb") as out:
        out.truncate(2000)
    monkeypatch.setattr(bundle_archive, "MAX_BUNDLE_BYTES", 1000)
    line = one_line_refusal(capsys, ["fleet", str(path), "-o", str(tmp_path / "fleet")])
    assert f"{path}: 2000 bytes, over the limit of 1000 for a bundle" in line


# --- fleet tables: wrong shapes, FIFOs, endless and huge files ------------------------------------


@pytest.fixture(scope="module")
def fleet_table(cpu_reports, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fleet")
    assert cli.main(["fleet", str(cpu_reports), "-o", str(out)]) == 0
    return out / "fleet.json"


TAMPERED_TABLES = {
    "a list where an object is": (lambda d: d["rows"][0].update(memory=[]), "$.rows[0].memory: [] is not of type object"),
    "a string where a list is": (lambda d: d["rows"][0].update(copies="none"), "$.rows[0].copies: 'none' is not of type array"),
    "a status out of its set": (lambda d: d["rows"][0]["copies"][0].update(status="fine"), "$.rows[0].copies[0].status: 'fine' is not one of"),
    "a field missing": (lambda d: d["rows"][0]["run"].pop("verdict"), "$.rows[0].run: lacks 'verdict'"),
    "a number where text is": (lambda d: d["rows"][0].update(ep=7), "$.rows[0].ep: 7 is not of type string"),
    "rows not a list": (lambda d: d.update(rows={"ep": "x"}), "$.rows: {'ep': 'x'} is not of type array"),
}


@pytest.mark.parametrize("what", TAMPERED_TABLES)
def test_answers_of_a_fleet_table_of_the_wrong_shape_is_one_line_naming_the_field(fleet_table, tmp_path, capsys, what):
    change, problem = TAMPERED_TABLES[what]
    data = json.loads(fleet_table.read_text())
    change(data)
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(data))
    line = one_line_refusal(capsys, ["answers", str(path)])
    assert line.startswith(f"ort-conformance: {path}: not a fleet table of fleet.schema.json: {problem}"), line


def test_answers_of_a_fifo_is_refused_at_once_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "fleet.json")
    # A process of its own, with a deadline: a read that waited for a writer would never end.
    completed = subprocess.run([sys.executable, "-m", "conformance.cli", "answers", str(tmp_path)], capture_output=True, text=True,
                               timeout=60, cwd=ROOT)
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    assert completed.stderr.strip() == f"ort-conformance: {tmp_path / 'fleet.json'}: cannot be read as a fleet table: not a regular file: a FIFO"


def test_answers_of_an_endless_or_huge_file_is_refused_before_reading(tmp_path, capsys):
    assert one_line_refusal(capsys, ["answers", "/dev/zero"]) == \
        "ort-conformance: /dev/zero: cannot be read as a fleet table: not a regular file: a character device"
    huge = tmp_path / "fleet.json"
    with open(huge, "wb") as out:
        out.truncate(fleet_reader.MAX_TABLE_BYTES + 1)  # sparse: no disk, and it must not be read into memory
    line = one_line_refusal(capsys, ["answers", str(huge)])
    assert line == (f"ort-conformance: {huge}: cannot be read as a fleet table: too large for a fleet table: "
                    f"{fleet_reader.MAX_TABLE_BYTES + 1} bytes, over the limit of {256 << 20}")


def test_fleet_of_a_report_that_is_a_fifo_or_a_device_is_one_line(tmp_path, capsys):
    os.mkfifo(tmp_path / "report.json")
    assert "not a regular file: a FIFO" in one_line_refusal(capsys, ["fleet", str(tmp_path), "-o", str(tmp_path / "out")])
    (tmp_path / "zero").mkdir()
    (tmp_path / "zero" / "report.json").symlink_to("/dev/zero")
    assert "not a regular file: a character device" in one_line_refusal(capsys, ["fleet", str(tmp_path / "zero"), "-o", str(tmp_path / "out")])


# --- the same run given twice --------------------------------------------------------------------


def test_the_same_run_given_twice_in_any_form_is_one_row(cpu_reports, good_bundle, tmp_path, capsys):
    out = tmp_path / "fleet"
    assert cli.main(["fleet", str(cpu_reports), str(cpu_reports / "report.json"), str(good_bundle), str(cpu_reports), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "1 EP devices of 1 runs" in captured.out
    notes = captured.err.strip().splitlines()
    assert len(notes) == 3 and all(f"the same run as {cpu_reports / 'report.json'} (the same report.json): taken once" in n for n in notes)
    (row,) = json.loads((out / "fleet.json").read_text())["rows"]
    assert row["run"]["kind"] == "report"


# --- shard folders -------------------------------------------------------------------------------


def shard_copy(shard: Path, tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(shard, folder)
    return folder


def test_merge_of_a_shard_with_a_truncated_junit_file_is_one_line_and_writes_nothing(cpu_shards, tmp_path, capsys):
    second = shard_copy(cpu_shards[1], tmp_path, "shard-2")
    junit = (second / "junit.xml").read_bytes()
    (second / "junit.xml").write_bytes(junit[: len(junit) // 2])
    out = tmp_path / "merged"
    line = one_line_refusal(capsys, ["merge", str(cpu_shards[0]), str(second), "-o", str(out)])
    assert line.startswith(f"ort-conformance: {second / 'junit.xml'}: not a JUnit file (not XML: ")
    assert not (out / "report.json").exists()


@pytest.mark.parametrize("attribute, value, problem", [
    ("time", "1" * 40 + "x", "attribute 'time' must be a decimal number of seconds"),  # the schema's own pattern takes years on this
    ("tests", "²", "attribute 'tests' must be a non-negative integer, not '²'"),  # isdigit() takes it, int() does not
])
def test_a_junit_attribute_of_the_wrong_form_is_refused_quickly_by_merge(cpu_shards, tmp_path, capsys, attribute, value, problem):
    second = shard_copy(cpu_shards[1], tmp_path, "shard-2")
    text = (second / "junit.xml").read_text()
    start = text.index("<testsuite ")
    suite = text[start:text.index(">", start)]
    (second / "junit.xml").write_text(text.replace(suite, re.sub(f' {attribute}="[^"]*"', f' {attribute}="{value}"', suite, count=1), 1))
    began = time.monotonic()
    line = one_line_refusal(capsys, ["merge", str(cpu_shards[0]), str(second), "-o", str(tmp_path / "merged")])
    assert f"{second / 'junit.xml'}: not a JUnit file of a conformance run: " in line and problem in line
    assert time.monotonic() - began < 30


def test_a_merge_that_fails_while_writing_leaves_no_report_set_behind(cpu_shards, tmp_path, capsys):
    out, elsewhere = tmp_path / "merged", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "repro").symlink_to(elsewhere)  # planted: the merged run's reproducers cannot be written
    line = one_line_refusal(capsys, ["merge", *map(str, cpu_shards), "-o", str(out)])
    assert "the merged report was not written" in line and f"{out / 'repro'}: is a symlink" in line
    assert not [name for name in runfolder.RUN_FILES if (out / name).exists()]
    assert list(elsewhere.iterdir()) == []


# --- a vendor's wrapper string in Markdown ----------------------------------------------------------


def outside_code_spans(line: str) -> str:
    """`line` without its code spans, as CommonMark reads them: a run of n backticks opens a span
    that the next run of exactly n backticks closes; one never closed is literal text."""
    out, i = [], 0
    while i < len(line):
        if line[i] != "`":
            out.append(line[i])
            i += 1
            continue
        end = i
        while end < len(line) and line[end] == "`":
            end += 1
        width, search = end - i, end
        closing = None
        while search < len(line) and closing is None:
            if line[search] == "`":
                run_end = search
                while run_end < len(line) and line[run_end] == "`":
                    run_end += 1
                closing = run_end if run_end - search == width else None
                search = run_end
            else:
                search += 1
        if closing is None:
            out.append(line[i:end])
            i = end
        else:
            i = closing
    return "".join(out)


@pytest.mark.parametrize("text", ["plain", "a`b", "``x``", "`lead", "trail`", " spaced ", "two\nlines"])
def test_a_code_span_holds_whatever_it_is_given(text):
    span = code_span(text)
    assert outside_code_spans(span) == "" and "\n" not in span


def test_a_wrapper_with_a_backtick_and_script_stays_inside_its_code_span_in_report_md_and_summary_md(tmp_path):
    wrapper = "env A=x`<script>alert(1)</script>`"
    reports = conformance_run(tmp_path, "--ep=cpu", f"--conformance-wrapper={wrapper}", "-k", "memory-info.tensor-size").reports
    data = json.loads((reports / "report.json").read_text())
    assert data["run"]["wrapper"] == wrapper
    for name in ("report.md", "summary.md"):
        text = (reports / name).read_text()
        assert "<script>alert(1)</script>" in text, name  # the wrapper is shown ...
        assert all("<script>" not in outside_code_spans(line) for line in text.splitlines()), name  # ... as code, never as HTML
    # The renderers directly, with the wrapper as a vendor could give it, and a library path alike.
    data["run"]["wrapper"] = "``<img src=x onerror=alert(1)>`"
    data["ep"]["library"] = data["eps"][0]["library"] = "/opt/`<b>ep</b>`.so"
    data["eps"][0]["library_sha256"] = "0" * 64
    for text in (markdown.render(data), summary.render(data)):
        assert all("<img" not in outside_code_spans(line) and "<b>" not in outside_code_spans(line) for line in text.splitlines())
