"""`ort-conformance`: exit codes and messages of validate, probe and catalogue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import cli
from conformance.engine.capabilities import STATUSES

VENDOR_EP = """\
ep:
  name: myep
  provider: MyExecutionProvider
  summary: a vendor's EP
  packages: [onnxruntime-myep]
  memory:
    default: {device_type: npu}
    host_accessible: null
  sources: []
"""


def probe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance.cli", "probe", *args], capture_output=True, text=True, timeout=120)


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in ("validate", "probe", "init", "catalogue"):
        assert command in out
    assert "pytest --ep cpu" in out


@pytest.mark.parametrize("command", ["validate", "probe", "init", "catalogue", "bundle", "verify", "diff", "found", "fleet", "answers", "merge"])
def test_each_command_help_says_what_it_does_its_exit_status_and_an_example(capsys, command):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "Exit " in out or "exit 1" in out
    assert "examples:\n  " in out and f"ort-conformance {command}" in out.split("examples:")[1]
    lines = out.split("examples:")[0].splitlines() + [""]
    # Every argument is explained: its help follows on its line, or on the next, further indented.
    unexplained = [line for line, after in zip(lines, lines[1:], strict=False) if line.startswith("  ") and not line.startswith("   ")
                   and len(line.split("  ")) < 3 and not after.startswith("    ")]
    assert not unexplained, unexplained


def test_no_command_prints_help_and_exits_2(capsys):
    assert cli.main([]) == 2
    assert "usage: ort-conformance" in capsys.readouterr().out


def test_validate_the_shipped_specs_exits_0(capsys):
    assert cli.main(["validate"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("valid: ") and " contracts, " in out


def test_validate_a_vendor_file_with_the_catalogue(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myep.yaml").write_text(VENDOR_EP)
    assert cli.main(["validate", "myep.yaml"]) == 0
    shipped = cli.main(["validate"])
    assert shipped == 0
    with_vendor, alone = capsys.readouterr().out.splitlines()
    assert with_vendor.endswith("EP declarations") and with_vendor != alone


def test_validate_a_vendor_spec_of_a_shipped_ep_says_it_overrides_the_shipped_one(tmp_path, monkeypatch, capsys):
    from conformance import data

    monkeypatch.chdir(tmp_path)
    (tmp_path / "cpu.yaml").write_text((data.eps_dir() / "cpu.yaml").read_text())
    assert cli.main(["validate", "cpu.yaml"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "EP 'cpu': cpu.yaml overrides the shipped specs/eps/cpu.yaml"
    (tmp_path / "again.yaml").write_text((data.eps_dir() / "cpu.yaml").read_text())
    assert cli.main(["validate", "cpu.yaml", "again.yaml"]) == 1
    assert "again.yaml:3:9: ep.name: EP name or alias 'cpu' is already declared at cpu.yaml:3" in capsys.readouterr().err


def test_validate_a_misspelled_key_exits_1_with_path_line_column(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myep.yaml").write_text(VENDOR_EP.replace("  summary:", "  sumary:"))
    assert cli.main(["validate", "myep.yaml"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "myep.yaml:2:3: ep: missing key 'summary'"  # in line order
    assert err[1] == "myep.yaml:4:3: ep.sumary: unknown key 'sumary' (did you mean 'summary'?)"
    assert err[-1] == "2 errors in spec files"


def test_validate_a_missing_path_exits_2(tmp_path, capsys):
    missing = str(tmp_path / "nope.yaml")
    assert cli.main(["validate", missing]) == 2
    assert capsys.readouterr().err.strip() == f"ort-conformance: no such file or folder: {missing}"


def test_validate_a_folder_without_spec_files_exits_2(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not a spec")
    assert cli.main(["validate", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"ort-conformance: no spec files (*.yaml, *.yml) in {tmp_path}"


def test_validate_a_binary_file_is_one_error_naming_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "libmy_ep.so").write_bytes(b"\x7fELF\x02\x01\x01\x00\xc6\x28")
    assert cli.main(["validate", "libmy_ep.so"]) == 1
    assert capsys.readouterr().err.splitlines() == ["libmy_ep.so:1:1: not a YAML file: not UTF-8 text (byte 8)", "1 error in spec files"]


def test_catalogue_check_passes_when_up_to_date_and_fails_when_stale(tmp_path, capsys):
    output = tmp_path / "contracts.md"
    assert cli.main(["catalogue", "-o", str(output)]) == 0
    text = output.read_text(encoding="utf-8")
    assert text.startswith("# Contract catalogue") and "### copy.roundtrip-exact" in text
    assert cli.main(["catalogue", "--check", "-o", str(output)]) == 0
    assert "is up to date" in capsys.readouterr().out
    output.write_text(text.replace("copy.roundtrip-exact", "copy.roundtrip-inexact"), encoding="utf-8")
    assert cli.main(["catalogue", "--check", "-o", str(output)]) == 1
    assert "is stale: regenerate it with `ort-conformance catalogue -o" in capsys.readouterr().err


def test_catalogue_check_of_a_missing_file_fails(tmp_path, capsys):
    assert cli.main(["catalogue", "--check", "-o", str(tmp_path / "absent.md")]) == 1


def test_catalogue_check_without_output_is_a_usage_error(capsys):
    assert cli.main(["catalogue", "--check"]) == 2
    assert "--check needs --output FILE" in capsys.readouterr().err


def test_catalogue_to_stdout(capsys):
    assert cli.main(["catalogue"]) == 0
    assert "| contract | severity | subject | applies when | provenance | since | cases |" in capsys.readouterr().out


def test_probe_cpu_json_lists_the_copy_pairs():
    completed = probe("--ep", "cpu", "--json")
    assert completed.returncode == 0, completed.stderr
    matrix = json.loads(completed.stdout)
    ep = matrix["eps"][0]
    assert ep["ep"] == "CPUExecutionProvider"
    assert ep["ep_device"] is True and ep["unusable"] is None
    pairs = ep["devices"][0]["pairs"]
    assert pairs and {"source", "destination", "status", "required", "detail"} <= set(pairs[0])
    assert all(p["status"] in STATUSES for p in pairs)


def test_probe_unknown_ep_is_one_clear_message_without_traceback():
    completed = probe("--ep", "nosuch")
    assert completed.returncode != 0
    assert completed.stdout == ""
    assert completed.stderr.startswith("ort-conformance: unknown EP 'nosuch'")
    assert "cpu (CPUExecutionProvider)" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_probe_library_without_ep_is_a_usage_error(capsys):
    assert cli.main(["probe", "--ep-library", "/nowhere/libep.so"]) == 2
    assert "--ep-library needs --ep" in capsys.readouterr().err


def test_probe_malformed_option_is_a_usage_error(capsys):
    assert cli.main(["probe", "--ep", "cpu", "--ep-option", "novalue"]) == 2
    assert "--ep-option expects KEY=VALUE, got 'novalue'" in capsys.readouterr().err


def test_probe_library_call_returns_the_matrix_even_after_its_module_is_imported():
    import conformance
    import conformance.engine.capabilities  # noqa: F401  (a submodule must not shadow the library call)

    matrix = conformance.probe("cpu", timeout=60)
    (device,) = matrix.devices
    assert [(p.source, p.destination, p.status) for p in device.pairs] == [("cpu", "cpu", "not_required")]


# --- bad input: one clear message naming the file, a non-zero exit, never a traceback ----------

MINIMAL_REPORT = {"schema": "ort-ep-conformance/report/1", "ep": {"name": "CPUExecutionProvider"}, "onnxruntime": {"version": "1"},
                  "kit_version": "0", "devices": [], "verdict": "conformant", "summary": {}, "results": [], "capabilities": [],
                  "run": {"platform": "linux", "python": "3"}}


def bad_inputs(folder) -> dict[str, object]:
    """Files a user may pass by mistake, by what is wrong with them."""
    (folder / "folder").mkdir()
    (folder / "empty.json").write_text("")
    (folder / "corrupt.json").write_text("{bad")
    (folder / "list.json").write_text("[1, 2]")
    (folder / "object.json").write_text('{"schema": "ort-ep-conformance/report/1"}')
    (folder / "not-a-bundle.tar.gz").write_text("hello")
    return {name: folder / name for name in ("missing.json", "folder", "empty.json", "corrupt.json", "list.json", "object.json", "not-a-bundle.tar.gz")}


def one_clear_error(capsys, path) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(path) in err, err
    return err


@pytest.mark.parametrize("what", ["missing.json", "folder", "empty.json", "corrupt.json", "list.json", "object.json", "not-a-bundle.tar.gz"])
def test_diff_of_something_that_is_not_a_report_exits_2_naming_it(tmp_path, capsys, what):
    path = bad_inputs(tmp_path)[what]
    assert cli.main(["diff", str(path), str(path)]) == 2
    err = one_clear_error(capsys, path)
    assert err.count("\n") == 1  # one line, even for tarfile's multi-line complaint


@pytest.mark.parametrize("what", ["missing.json", "folder", "empty.json", "corrupt.json", "list.json", "object.json"])
def test_found_of_something_that_is_not_a_report_exits_2_naming_it(tmp_path, capsys, what):
    path = bad_inputs(tmp_path)[what]
    assert cli.main(["found", str(path)]) == 2
    one_clear_error(capsys, path)


@pytest.mark.parametrize("what", ["missing.json", "folder", "empty.json", "not-a-bundle.tar.gz"])
def test_verify_of_something_that_is_not_a_bundle_is_refused_in_one_line(tmp_path, capsys, what):
    path = bad_inputs(tmp_path)[what]
    assert cli.main(["verify", str(path)]) == 2
    err = one_clear_error(capsys, path)
    assert err.count("\n") == 1 and err.startswith(f"ort-conformance: {path}: ")


def report_dir(folder, report) -> str:
    folder.mkdir()
    (folder / "report.json").write_text(report if isinstance(report, str) else json.dumps(report))
    for name in ("report.md", "report.html", "junit.xml"):
        (folder / name).write_text("")
    return str(folder)


@pytest.mark.parametrize("report", ["{bad", "[]", "{}"], ids=["corrupt", "list", "empty-object"])
def test_bundle_of_a_report_that_is_not_one_exits_2_naming_it(tmp_path, capsys, report):
    assert cli.main(["bundle", "--report-dir", report_dir(tmp_path / "run", report), "-o", str(tmp_path / "b.tar.gz")]) == 2
    one_clear_error(capsys, tmp_path / "run" / "report.json")
    assert not (tmp_path / "b.tar.gz").exists()


def test_bundle_to_a_place_it_cannot_write_exits_2_naming_it(tmp_path, capsys):
    run = report_dir(tmp_path / "run", MINIMAL_REPORT)
    (tmp_path / "a-file").write_text("")
    for output in (tmp_path / "run", tmp_path / "a-file" / "b.tar.gz"):
        assert cli.main(["bundle", "--report-dir", run, "-o", str(output)]) == 2
        one_clear_error(capsys, output)
    assert cli.main(["bundle", "--report-dir", run, "-o", str(tmp_path / "b.tar.gz")]) == 0  # the same run, written where it can be


def test_verify_with_a_library_that_cannot_be_read_is_refused_naming_it(cpu_reports, tmp_path, capsys):
    bad_inputs(tmp_path)
    assert cli.main(["bundle", "--report-dir", str(cpu_reports), "-o", str(tmp_path / "b.tar.gz")]) == 0
    capsys.readouterr()
    assert cli.main(["verify", str(tmp_path / "b.tar.gz"), "--library", str(tmp_path / "folder")]) == 2
    err = one_clear_error(capsys, tmp_path / "folder")
    assert err == f"ort-conformance: {tmp_path / 'folder'}: cannot be read: Is a directory\n"


@pytest.fixture(scope="module")
def cpu_report(cpu_reports):
    return cpu_reports / "report.json"


@pytest.mark.parametrize("command", ["catalogue", "found"])
def test_output_to_a_place_that_cannot_be_written_exits_2_naming_it(tmp_path, capsys, command, request):
    arguments = [command, str(request.getfixturevalue("cpu_report"))] if command == "found" else [command]
    (tmp_path / "a-file").write_text("")
    for output in (tmp_path, tmp_path / "a-file" / "out.md"):
        assert cli.main([*arguments, "-o", str(output)]) == 2
        assert "cannot be written" in one_clear_error(capsys, output)
    assert cli.main([*arguments, "-o", str(tmp_path / "out.md")]) == 0


def test_catalogue_check_of_a_file_that_is_not_text_exits_2(tmp_path, capsys):
    (tmp_path / "contracts.md").write_bytes(b"\x8b\xff")
    assert cli.main(["catalogue", "--check", "-o", str(tmp_path / "contracts.md")]) == 2
    assert "cannot be read" in one_clear_error(capsys, tmp_path / "contracts.md")


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_probe_timeout_must_be_seconds_above_zero(capsys, value):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["probe", "--ep", "cpu", "--timeout", value])
    assert exit_info.value.code == 2
    assert "argument --timeout: expects a number of seconds" in capsys.readouterr().err


def test_probe_that_loses_a_device_prints_what_it_has_and_exits_1():
    completed = probe("--ep", "cpu", "--timeout", "0.001")
    assert completed.returncode == 1
    assert "probe lost: timeout" in completed.stdout and "Traceback" not in completed.stderr


def test_probe_option_without_a_key_is_a_usage_error(capsys):
    assert cli.main(["probe", "--ep", "cpu", "--ep-option", "=1"]) == 2
    assert "--ep-option expects KEY=VALUE, got '=1'" in capsys.readouterr().err


@pytest.mark.parametrize("library, message", [
    ("missing.so", "EP library not found: {}"),
    ("folder", "EP library {} is not a file"),
    ("corrupt.json", "onnxruntime could not load EP library {}"),
])
def test_probe_library_that_is_not_a_shared_library_exits_2_naming_it(tmp_path, library, message):
    path = tmp_path / library
    bad_inputs(tmp_path)
    completed = probe("--ep", "refdev", "--ep-library", str(path))
    assert completed.returncode == 2
    assert completed.stderr.startswith("ort-conformance: " + message.format(path)), completed.stderr
    assert "Traceback" not in completed.stderr


@pytest.mark.parametrize("ep", [[], ["--ep", "cpu"]], ids=["every-ep", "cpu"])
def test_probe_without_onnxruntime_says_which_to_install(tmp_path, ep):
    (tmp_path / "onnxruntime.py").write_text("raise ImportError('No module named onnxruntime')\n")  # shadows the installed one
    completed = subprocess.run([sys.executable, "-m", "conformance.cli", "probe", *ep], capture_output=True, text=True, timeout=120,
                               env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert completed.returncode == 2
    assert completed.stderr.startswith("ort-conformance: onnxruntime is not importable"), completed.stderr
    assert "pip install ort-ep-conformance[cpu]" in completed.stderr and "Traceback" not in completed.stderr


def test_benchmark_repeat_below_one_is_a_usage_error_before_any_run():
    root = Path(__file__).resolve().parents[1]
    completed = subprocess.run([sys.executable, str(root / "benchmarks" / "run.py"), "--repeat", "0"], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert "--repeat expects 1 or more runs, got 0" in completed.stderr and "Traceback" not in completed.stderr


def test_diff_of_runs_of_two_eps_says_so(cpu_report, tmp_path, capsys):
    report = json.loads(cpu_report.read_text(encoding="utf-8"))
    report["ep"]["name"] = "OtherExecutionProvider"
    for result in report["results"]:
        result["ep"] = "OtherExecutionProvider"
    (tmp_path / "report.json").write_text(json.dumps(report))
    assert cli.main(["diff", str(cpu_report), str(tmp_path / "report.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "note: these are runs of two EPs (CPUExecutionProvider -> OtherExecutionProvider), which share no case"


@pytest.mark.parametrize("text, seconds", [("0", 0.0), ("90", 90.0), ("90s", 90.0), ("10m", 600.0), ("1.5h", 5400.0), (" 2m ", 120.0)])
def test_a_soak_duration_reads_seconds_minutes_and_hours(text, seconds):
    from conformance.options import duration

    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "-5", "ten minutes", "5d", "25h", "nan"])
def test_a_soak_duration_that_is_not_one_is_a_usage_error(text):
    import argparse

    from conformance.options import duration

    with pytest.raises(argparse.ArgumentTypeError, match="expects a duration"):
        duration(text)
