"""`ort-conformance`: exit codes and messages of validate, probe and catalogue."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conformance import cli

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
    for command in ("validate", "probe", "catalogue"):
        assert command in out
    assert "pytest --ep cpu" in out


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
    assert err[0] == "myep.yaml:4:3: ep.sumary: unknown key 'sumary' (did you mean 'summary'?)"
    assert "missing key 'summary'" in err[1]
    assert err[-1] == "2 errors in spec files"


def test_validate_a_missing_path_exits_2(tmp_path, capsys):
    missing = str(tmp_path / "nope.yaml")
    assert cli.main(["validate", missing]) == 2
    assert capsys.readouterr().err.strip() == f"ort-conformance: no such file or folder: {missing}"


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
    assert "| contract | severity | subject | applies when | cases |" in capsys.readouterr().out


def test_probe_cpu_json_lists_the_copy_pairs():
    completed = probe("--ep", "cpu", "--json")
    assert completed.returncode == 0, completed.stderr
    matrix = json.loads(completed.stdout)
    ep = matrix["eps"][0]
    assert ep["ep"] == "CPUExecutionProvider"
    assert ep["ep_device"] is True and ep["unusable"] is None
    pairs = ep["devices"][0]["pairs"]
    assert pairs and {"source", "destination", "status", "required", "detail"} <= set(pairs[0])
    assert all(p["status"] in ("supported", "broken", "required_but_missing", "not_required", "unsupported") for p in pairs)


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
    import conformance.capabilities  # noqa: F401  (a submodule must not shadow the library call)

    matrix = conformance.probe("cpu", timeout=60)
    (device,) = matrix["eps"][0]["devices"]
    assert [(p["source"], p["destination"], p["status"]) for p in device["pairs"]] == [("cpu", "cpu", "not_required")]
