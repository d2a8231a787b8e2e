"""Hostile input: spec files, bundles and reports that are not what they claim, and folders
with symlinks planted in them. Each is one clear problem (a spec error at file:line:column, a
bundle or report problem naming the file) and a non-zero exit, in little time and memory,
never a traceback and never a write outside the folder."""

from __future__ import annotations

import argparse
import errno
import gzip
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tracemalloc
from pathlib import Path

import pytest

from conformance.tools import bundle, bundle_archive, found

from conformance import cli, safe_io

from conformance.testbed import models, tensors

from conformance.catalogue import yaml_marks
from conformance.checks import known_checks
from conformance.options import seconds
from conformance.catalogue.spec import load_catalogue
from conformance.data import shipped_spec_dirs
from conformance.errors import SpecErrors

ROOT = Path(__file__).resolve().parents[1]

# A 400-byte "billion laughs": nine levels of nine aliases each, 9**9 values once expanded.
ALIAS_BOMB = "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n" + "".join(
    f"{name}: &{name} [{','.join([f'*{previous}'] * 9)}]\n" for previous, name in zip("abcdefgh", "bcdefghi", strict=True))


def spec_errors(path: Path) -> list[str]:
    """The errors loading `path` gives, as text; the file must be refused."""
    with pytest.raises(SpecErrors) as raised:
        load_catalogue([path], known_checks=known_checks())
    return [str(error) for error in raised.value.errors]


def one_error(path: Path) -> str:
    errors = spec_errors(path)
    assert len(errors) == 1, errors
    return errors[0]


# --- spec files --------------------------------------------------------------------------------


def test_a_fifo_named_like_a_spec_is_refused_without_being_opened(tmp_path):
    os.mkfifo(tmp_path / "x.yaml")
    # Opened for a blocking read, a FIFO without a writer would never return: the error proves it was not.
    assert one_error(tmp_path / "x.yaml") == f"{tmp_path / 'x.yaml'}:1:1: not a regular file: a FIFO"


def test_a_device_or_a_folder_named_like_a_spec_is_refused(tmp_path):
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    assert one_error(tmp_path / "zero.yaml") == "/dev/zero:1:1: not a regular file: a character device"  # a file is named resolved
    (tmp_path / "specs" / "dir.yaml").mkdir(parents=True)  # a folder named on its own is read for spec files
    assert one_error(tmp_path / "specs").endswith("dir.yaml:1:1: not a regular file: a folder")


def test_a_symlink_loop_named_like_a_spec_is_one_error(tmp_path):
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    assert one_error(tmp_path / "loop.yaml") == f"{tmp_path / 'loop.yaml'}:1:1: cannot read: Too many levels of symbolic links"


def test_a_spec_file_over_the_size_cap_is_refused_unread(tmp_path, monkeypatch):
    path = tmp_path / "big.yaml"
    with open(path, "wb") as out:
        out.truncate(yaml_marks.MAX_SPEC_BYTES + 1)  # sparse: a read of it would be a megabyte of NULs
    limit = yaml_marks.MAX_SPEC_BYTES
    assert one_error(path).endswith(f"big.yaml:1:1: too large for a spec file: {limit + 1} bytes, over the limit of {limit}")


def test_an_alias_bomb_is_refused_quickly_and_in_little_memory(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)
    assert len(ALIAS_BOMB) < 400
    tracemalloc.start()
    try:
        error = one_error(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert error == f"{path}:6:8: the aliases expand this document past {yaml_marks.MAX_NODES} values (an alias bomb?)"
    assert peak < 20 << 20  # refused before its aliases were expanded (how long it takes is a benchmark's)


@pytest.mark.parametrize("text, where", [
    ("[" * 65 + "]" * 65, "1:65"),
    ("a: 1\n<<: {b: " + "[" * 70 + "]" * 70 + "}\n", "2:71"),
    ("a: !!set {" + "? [" * 70 + "x" + "]" * 70 + "}\n", "1:"),
], ids=["flow", "under-a-merge-key", "in-a-tagged-collection"])
def test_without_aliases_the_depth_is_refused_as_the_document_is_built(tmp_path, monkeypatch, text, where):
    """Where no alias can be (no `*` in the text), the event stream's pass over a spec file (a
    third of a parse) is skipped: the document is refused as it is built, and the pass then
    words where it goes too deep."""
    passes = []
    monkeypatch.setattr(yaml_marks, "_beyond_bounds", lambda *args, real=yaml_marks._beyond_bounds: passes.append(1) or real(*args))
    (tmp_path / "deep.yaml").write_text(text)
    assert f"deep.yaml:{where}" in one_error(tmp_path / "deep.yaml")
    assert "nested more than 64 levels deep" in one_error(tmp_path / "deep.yaml")
    assert passes, "the refusal is worded by the event stream's pass"


def test_a_spec_without_aliases_is_read_without_the_event_streams_pass(monkeypatch):
    monkeypatch.setattr(yaml_marks, "_beyond_bounds", lambda *args: pytest.fail("the event stream was read"))
    path = next(p for p in sorted((ROOT / "specs" / "contracts").glob("*.yaml")) if "*" not in p.read_text())
    document, errors = yaml_marks.parse_yaml(path.read_text(), path.name, bounded=True)
    assert document is not None and errors == []


def test_a_recursive_alias_is_refused(tmp_path):
    (tmp_path / "r.yaml").write_text("ep: &a [*a]\n")
    assert one_error(tmp_path / "r.yaml").endswith("r.yaml:1:9: the alias *a is inside what it names (a recursive alias)")


@pytest.mark.parametrize("text, where", [
    ("[" * 1000 + "]" * 1000, "1:65"),
    ("[" * 1_000_000, "1:1001"),  # past libyaml's own limit, and without its ends
    ("- " * 1000 + "x\n", "1:129"),
    ("".join("  " * i + "k:\n" for i in range(1000)), "65:129"),
    ("a: &a [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[x]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\nb: [[[[[[[[[[[[[[[[[[[[[[[[[[*a]]]]]]]]]]]]]]]]]]]]]]]]]]\n", "2:30"),  # noqa: E501  (the YAML document as it is read)
], ids=["flow-1000", "flow-1000000", "block-sequences", "block-mappings", "through-an-alias"])
def test_nesting_past_the_depth_limit_is_one_error_where_it_goes_too_deep(tmp_path, text, where):
    (tmp_path / "deep.yaml").write_text(text)
    error = one_error(tmp_path / "deep.yaml")
    assert error.startswith(f"{tmp_path / 'deep.yaml'}:{where}: nested more than {yaml_marks.MAX_DEPTH} levels deep"), error


@pytest.mark.parametrize("content, message", [
    (b"a: 2024-02-30\n", "not valid YAML: a value cannot be read: day is out of range for month"),
    (b"a: !!timestamp x\n", "not valid YAML: a value cannot be read"),
    (b"a: b\0c\n", "not valid YAML: special characters are not allowed"),
    (b"ep:\n  name: \xff\xfe\n", "not a YAML file: not UTF-8 text (byte 12)"),
    (b"ep: " + b"x" * 500_000 + b"\n", "expected object, got str 'xxxxxxxx"),
], ids=["impossible-date", "bad-timestamp", "nul", "not-utf8", "huge-scalar"])
def test_values_pyyaml_cannot_read_are_one_error_not_a_traceback(tmp_path, content, message):
    (tmp_path / "c.yaml").write_bytes(content)
    error = one_error(tmp_path / "c.yaml")
    assert message in error and len(error) < 1000, error[:300]


def test_random_bytes_and_mutated_specs_never_raise_anything_but_spec_errors(tmp_path):
    """A little fuzzing: mutations of the shipped specs with YAML's sharp edges spliced in, and
    random bytes. Each load gives a catalogue or SpecErrors, nothing else."""
    rng = random.Random(19)
    seeds = [p.read_bytes() for folder in shipped_spec_dirs() for p in sorted(folder.glob("*.yaml"))]
    edges = [b"&a ", b"*a", b"[", b"]", b"{", b"}", b"\0", b"\xff", b"!!binary ", b"!!timestamp ", b"2024-02-30", b"? ", b": ",
             b"- ", b"\n", b"---\n", b"!!set ", b"!!python/object ", b"<<: *a\n", b'"\\x', b"'", b"\t", b"%YAML 1.1\n", b"!x ", b"1e999"]
    path = tmp_path / "c.yaml"
    for attempt in range(300):
        if attempt % 5 == 0:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        else:
            data = bytearray(rng.choice(seeds))
            for _ in range(rng.randint(1, 6)):
                at = rng.randrange(len(data) + 1)
                data[at:at + rng.choice((0, 0, 1, 8))] = rng.choice(edges)
        path.write_bytes(bytes(data))
        try:
            load_catalogue([path], known_checks=known_checks())
        except SpecErrors as exc:
            assert all(isinstance(e.line, int) and e.message for e in exc.errors)


def test_validate_shows_the_one_error_and_exits_1(tmp_path, capsys):
    os.mkfifo(tmp_path / "x.yaml")
    assert cli.main(["validate", str(tmp_path / "x.yaml")]) == 1
    assert capsys.readouterr().err.splitlines() == [f"{tmp_path / 'x.yaml'}:1:1: not a regular file: a FIFO", "1 error in spec files"]


@pytest.mark.parametrize("name", ["fifo.yaml", "bomb.yaml"])
def test_a_conformance_run_given_a_hostile_spec_shows_the_one_error_and_exits_non_zero(tmp_path, name):
    if name == "fifo.yaml":
        os.mkfifo(tmp_path / name)
    else:
        (tmp_path / name).write_text(ALIAS_BOMB)
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ep=cpu", name,
                                "--conformance-report", str(tmp_path / "reports")], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    output = completed.stdout + completed.stderr
    assert completed.returncode != 0 and "Traceback" not in output
    assert "invalid spec files (1 error):" in output and f"  {name}:" in output


# --- timeouts ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["1e9", "86401", "nan", "inf", "-1", "0", "abc"])
def test_a_timeout_outside_a_day_or_not_a_number_is_refused(value):
    with pytest.raises(argparse.ArgumentTypeError, match="expects a number of seconds"):
        seconds(value)


def test_a_timeout_up_to_a_day_is_taken():
    assert seconds("86400") == 86400.0 and seconds("0.5") == 0.5


def test_probe_refuses_a_timeout_of_1e9_seconds_as_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["probe", "--ep", "cpu", "--timeout", "1e9"])
    assert exit_info.value.code == 2
    assert "argument --timeout: expects a number of seconds up to 86400 (a day), got '1e9'" in capsys.readouterr().err


def test_a_conformance_run_refuses_a_timeout_of_1e9_seconds_as_a_usage_error(tmp_path):
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ep=cpu", "--conformance-timeout", "1e9",
                                "--conformance-report", str(tmp_path / "reports")], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 4 and "Traceback" not in completed.stderr
    assert "argument --conformance-timeout: expects a number of seconds up to 86400 (a day), got '1e9'" in completed.stderr


# --- bundles and reports -----------------------------------------------------------------------


def small_bundle(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def hostile_bundles(folder: Path) -> dict[str, tuple[Path, str]]:
    """Bundles that are not readable, each with the problem it must give."""
    good = small_bundle(folder / "good.tar.gz", {"manifest.json": b"{}", "report.json": b"{}" + b" " * 20000})
    data = good.read_bytes()
    (folder / "truncated.tar.gz").write_bytes(data[: len(data) // 2])
    flipped = bytearray(data)
    flipped[-8] ^= 1  # the gzip trailer's CRC32
    (folder / "crc.tar.gz").write_bytes(bytes(flipped))
    (folder / "plain.tar").write_bytes(gzip.decompress(data))
    (folder / "text.tar.gz").write_bytes(b"not an archive")
    (folder / "gzip-not-tar.tar.gz").write_bytes(gzip.compress(b"hello " * 200))
    os.mkfifo(folder / "fifo.tar.gz")
    return {
        "truncated": (folder / "truncated.tar.gz", "truncated: the archive ends early"),
        "crc": (folder / "crc.tar.gz", "corrupt: CRC check failed"),
        "plain-tar": (folder / "plain.tar", "not a bundle: not gzip-compressed"),
        "text": (folder / "text.tar.gz", "not a bundle: not gzip-compressed"),
        "gzip-not-tar": (folder / "gzip-not-tar.tar.gz", "not a bundle (a .tar.gz archive written by `ort-conformance bundle`)"),
        "fifo": (folder / "fifo.tar.gz", "not a regular file: a FIFO"),
    }


def verify_output(path: Path, capsys) -> tuple[int, list[str]]:
    code = cli.main(["verify", str(path)])
    captured = capsys.readouterr()
    return code, (captured.out + captured.err).splitlines()


@pytest.mark.parametrize("what", ["truncated", "crc", "plain-tar", "text", "gzip-not-tar", "fifo"])
def test_a_bundle_that_cannot_be_read_is_one_line_in_verify_and_diff(tmp_path, capsys, what):
    path, problem = hostile_bundles(tmp_path)[what]
    code, lines = verify_output(path, capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"ort-conformance: {path}: "), lines
    assert problem in lines[0]
    assert cli.main(["diff", str(path), str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and problem in err and "Traceback" not in err


@pytest.mark.skipif(shutil.which("tar") is None, reason="GNU tar is needed to write a sparse member")
def test_a_small_archive_holding_a_huge_sparse_member_is_refused_by_its_header(tmp_path, capsys):
    with open(tmp_path / "huge", "wb") as out:
        out.truncate(10 << 30)
    made = subprocess.run(["tar", "--sparse", "-czf", str(tmp_path / "sparse.tar.gz"), "-C", str(tmp_path), "huge"], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"tar could not write a sparse member: {made.stderr.strip()}")
    assert (tmp_path / "sparse.tar.gz").stat().st_size < 10_000
    tracemalloc.start()
    try:
        code, lines = verify_output(tmp_path / "sparse.tar.gz", capsys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 2 and f"member huge is {10 << 30} bytes, over the limit of {bundle.MAX_MEMBER_BYTES} for a bundle member" in lines[0]
    assert peak < 50 << 20


def test_a_member_over_the_stated_cap_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = small_bundle(tmp_path / "b.tar.gz", {"report.json": b"x" * 2000})
    monkeypatch.setattr(bundle_archive, "MAX_MEMBER_BYTES", 1000)
    read = []
    monkeypatch.setattr(tarfile.TarFile, "extractfile", lambda self, member: read.append(member) or io.BytesIO(b""))
    with pytest.raises(bundle.BundleError, match="member report.json is 2000 bytes, over the limit of 1000 for a bundle member"):
        bundle.read(path)
    assert not read


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_found_and_diff_refuse_a_report_that_is_a_fifo_or_over_the_cap(tmp_path, capsys, monkeypatch):
    os.mkfifo(tmp_path / "report.json")
    assert cli.main(["diff", str(tmp_path / "report.json"), str(tmp_path / "report.json")]) == 2
    assert "not a regular file: a FIFO" in capsys.readouterr().err
    monkeypatch.setattr(found, "MAX_MEMBER_BYTES", 10)
    big = write_json(tmp_path / "big" / "report.json", {"schema": "ort-ep-conformance/report/1"})
    assert cli.main(["found", str(big)]) == 2
    assert capsys.readouterr().err.strip() == f"ort-conformance: {big}: cannot read a report: too large for a report: 41 bytes, over the limit of 10"


# --- writing inside the folder only ----------------------------------------------------------------


def test_open_in_refuses_a_symlink_planted_as_the_file_or_as_the_folder(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("precious")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "worker-cpu.log").symlink_to(outside)
    for mode in ("w", "a"):
        with pytest.raises(safe_io.UnsafeFile, match="worker-cpu.log: is a symlink: refusing to write through it"):
            safe_io.open_in(tmp_path / "reports", "worker-cpu.log", mode)
    (tmp_path / "linked").symlink_to(tmp_path / "reports")
    with pytest.raises(safe_io.UnsafeFile, match="linked: is a symlink"):
        safe_io.open_in(tmp_path / "linked", "new.log")
    assert outside.read_text() == "precious" and not (tmp_path / "reports" / "new.log").exists()


def test_open_in_refuses_a_planted_fifo_without_blocking_and_appends_to_a_real_file(tmp_path):
    os.mkfifo(tmp_path / "worker.log")
    with pytest.raises(safe_io.UnsafeFile, match="worker.log: not a regular file: a FIFO"):
        safe_io.open_in(tmp_path, "worker.log", "a")
    with safe_io.open_in(tmp_path / "new", "log") as out:
        out.write("one\n")
    with safe_io.open_in(tmp_path / "new", "log", "a") as out:
        out.write("two\n")
    assert (tmp_path / "new" / "log").read_text() == "one\ntwo\n"


def test_write_set_refuses_a_planted_symlink_and_writes_nothing(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("precious")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "report.md").symlink_to(outside)
    with pytest.raises(safe_io.UnsafeFile, match="report.md: is a symlink: refusing to write through it"):
        safe_io.write_set(tmp_path / "reports", {"report.json": "{}", "report.md": "# report"})
    assert outside.read_text() == "precious" and sorted(os.listdir(tmp_path / "reports")) == ["report.md"]


def test_a_full_disk_leaves_the_previous_set_whole_and_names_the_folder(tmp_path, monkeypatch):
    folder = tmp_path / "reports"
    safe_io.write_set(folder, {"report.json": "old json", "report.md": "old md"})
    real_write, writes = os.write, []

    def write(descriptor, data):
        writes.append(len(data))
        if len(writes) == 2:  # the second file of the set finds the disk full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(descriptor, data)

    monkeypatch.setattr(os, "write", write)
    with pytest.raises(safe_io.UnsafeFile) as raised:
        safe_io.write_set(folder, {"report.json": "new json", "report.md": "new md"})
    assert raised.value.path == str(folder)
    assert str(raised.value) == (f"{folder}: cannot write report.json, report.md: No space left on device (the folder is full); "
                                 "the files there before are unchanged")
    assert sorted(os.listdir(folder)) == ["report.json", "report.md"]
    assert (folder / "report.json").read_text() == "old json" and (folder / "report.md").read_text() == "old md"


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 64 KiB tmpfs, where the machine lets this process mount one (root)."""
    folder = tmp_path / "tmpfs"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here: {mounted.stderr.strip() or 'mount failed'}")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


def test_a_really_full_tmpfs_leaves_the_previous_set_whole(small_tmpfs):
    safe_io.write_set(small_tmpfs, {"report.json": "old json", "report.md": "old md"})
    with pytest.raises(safe_io.UnsafeFile, match=r"tmpfs: cannot write report.json, report.md: No space left on device \(the folder is full\)"):
        safe_io.write_set(small_tmpfs, {"report.json": "x" * 40_000, "report.md": "y" * 40_000})
    assert sorted(os.listdir(small_tmpfs)) == ["report.json", "report.md"]
    assert (small_tmpfs / "report.json").read_text() == "old json" and (small_tmpfs / "report.md").read_text() == "old md"


def test_the_model_cache_refuses_a_symlinked_models_folder_or_a_planted_model(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "models").symlink_to(elsewhere)
    with pytest.raises(safe_io.UnsafeFile, match="models: is a symlink"):
        models.ModelCache(tmp_path / "models").get("identity", tensors.DTYPES["float32"], (2, 3))
    assert list(elsewhere.iterdir()) == []
    real = tmp_path / "real"
    cache = models.ModelCache(real)
    _, path = cache.get("identity", tensors.DTYPES["float32"], (2, 3))
    path.unlink()
    (tmp_path / "secret").write_bytes(b"not a model")
    path.symlink_to(tmp_path / "secret")
    with pytest.raises(safe_io.UnsafeFile, match=f"{path.name}: is a symlink: refusing to read through it"):
        models.ModelCache(real).get("identity", tensors.DTYPES["float32"], (2, 3))


@pytest.mark.parametrize("command", ["catalogue", "found"])
def test_catalogue_and_found_output_refuse_a_planted_symlink(tmp_path, capsys, command, cpu_reports):
    outside = tmp_path / "outside.md"
    outside.write_text("precious")
    (tmp_path / "out.md").symlink_to(outside)
    arguments = [command, str(cpu_reports / "report.json")] if command == "found" else [command]
    assert cli.main([*arguments, "-o", str(tmp_path / "out.md")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"ort-conformance: {tmp_path / 'out.md'}: cannot be written: {tmp_path / 'out.md'}: is a symlink: refusing to write through it"
    assert outside.read_text() == "precious"


def test_json_nested_too_deep_for_the_parser_is_a_problem_not_a_recursion_error(tmp_path, capsys):
    deep = b"[" * 100_000 + b"]" * 100_000
    path = small_bundle(tmp_path / "deep.tar.gz", {"manifest.json": deep, "report.json": deep})
    code, lines = verify_output(path, capsys)
    assert code == 1 and lines[0] == "manifest.json: not JSON: nested too deep to read"
    (tmp_path / "lane").mkdir()
    (tmp_path / "lane" / "report.json").write_bytes(deep)
    assert cli.main(["diff", str(tmp_path / "lane" / "report.json"), str(path)]) == 2
    assert capsys.readouterr().err.strip() == f"ort-conformance: {tmp_path / 'lane' / 'report.json'}: not JSON: nested too deep to read"
    assert cli.main(["found", str(tmp_path / "lane" / "report.json")]) == 2
    assert capsys.readouterr().err.strip() == f"ort-conformance: {tmp_path / 'lane' / 'report.json'}: cannot read a report: nested too deep to read"
