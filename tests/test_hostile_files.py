"""Files others hand us: bundles, shard folders and fleet tables written elsewhere, tampered with.
`verify`, `merge`, `fleet` and `answers` read each as hostile until checked: a member that is
not a regular file under a plain name, a table of the wrong shape, a truncated JUnit file, a
FIFO or an endless file is one line on stderr and exit 2 (a bundle `verify` lists as its
problem, never "complete and consistent"), in little time and memory, never a traceback; a
merge that fails leaves no report set; the same run given twice is one row; and a vendor's
wrapper string cannot break out of its Markdown code span."""

from __future__ import annotations

import copy
import io
import tarfile
from pathlib import Path

import pytest

from conformance import cli
from conformance.tools import bundle, bundle_archive

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
    assert cli.main(["verify", str(path)]) == 1
    captured = capsys.readouterr()
    assert "complete and consistent" not in captured.out + captured.err
    assert captured.err.splitlines() == [f"{path}: {captured.err.splitlines()[0].split(': ', 1)[1]}", f"{path}: 1 problem"]
    assert problem in captured.err
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
