"""`ort-conformance validate` names every error of every file in one run, in file, line and
column order: schema errors, unknown checks and parameters, unknown contracts, cross-file."""

from __future__ import annotations

from conformance import cli

# Three kinds of mistakes in one contract file: schema (a statement too short, an unknown key,
# an empty list), an unknown check, and a parameter its check does not take.
CONTRACTS = """\
family: mine
title: Mine
contracts:
  - id: mine.one
    statement: Short.
    subject: ep
    severity: required
    sources: []
    check: copy.directionz
  - id: mine.two
    statement: The EP copies what it is asked to copy, unchanged, in every direction it takes.
    subject: ep
    severity: required
    colour: blue
    sources:
      - {kind: seed, ref: a seed}
    check: copy.direction
    params:
      direction: [cpu>default]
      dtype: [float32]
      shape: ["1"]
      recipe: [add]
      extra: [1]
"""

# An EP declaration with a schema error and two references to contracts that do not exist.
EP = """\
ep:
  name: mine
  provider: MineExecutionProvider
  summary: Mine.
  packages: [mine]
  bogus: 1
  memory: {default: null, host_accessible: null}
  not_applicable:
    copy.nonexistent: because
  waivers:
    - {contract: copy.nope, reason: r, url: "https://example.org/x"}
"""


def errors_of(capsys) -> list[str]:
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == f"{len(lines) - 1} errors in spec files"
    return lines[:-1]


def position(line: str) -> tuple[str, int, int]:
    path, row, column = line.split(":")[:3]
    return path, int(row), int(column)


def test_a_file_with_three_kinds_of_mistakes_gives_every_error_in_line_order(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text(CONTRACTS)
    assert cli.main(["validate", "mine.yaml"]) == 1
    errors = errors_of(capsys)
    assert [position(e) for e in errors] == sorted(position(e) for e in errors)
    assert any(":5:16: contracts[0].statement: 'Short.' is too short" in e for e in errors), errors  # schema
    assert any(":8:14: contracts[0].sources:" in e for e in errors), errors  # schema
    assert any(":9:12: contracts[0].check: unknown check 'copy.directionz'" in e for e in errors), errors
    assert any(":14:5: contracts[1].colour: unknown key" in e for e in errors), errors
    assert any(":22:7: contracts[1].params.recipe: check 'copy.direction' takes no parameter 'recipe'" in e for e in errors), errors
    assert any(":23:7: contracts[1].params.extra: unknown key 'extra'" in e for e in errors), errors


def test_an_ep_declaration_with_schema_errors_is_still_checked_for_unknown_contracts(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine-ep.yaml").write_text(EP)
    (tmp_path / "mine.yaml").write_text(CONTRACTS)
    assert cli.main(["validate", "mine.yaml", "mine-ep.yaml"]) == 1
    errors = errors_of(capsys)
    assert [position(e) for e in errors] == sorted(position(e) for e in errors)
    assert [e.split(":")[0] for e in errors][0] == "mine-ep.yaml"  # sorted by file first
    assert "mine-ep.yaml:6:3: ep.bogus: unknown key 'bogus'" in errors[1]
    assert "mine-ep.yaml:9:5: ep.not_applicable.copy.nonexistent: unknown contract 'copy.nonexistent'" in errors
    assert "mine-ep.yaml:11:18: ep.waivers[0].contract: unknown contract 'copy.nope'" in errors
    assert any(e.startswith("mine.yaml:9:12: contracts[0].check: unknown check") for e in errors)


def test_a_schema_error_on_a_parameter_is_not_named_twice(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text(CONTRACTS)
    assert cli.main(["validate", "mine.yaml"]) == 1
    errors = errors_of(capsys)
    assert len([e for e in errors if "params.extra" in e]) == 1, errors
