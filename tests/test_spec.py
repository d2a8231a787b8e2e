"""Spec loading and validation: every error is data with file:line:column and a clear message."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml

from conformance import data

from conformance import errors
from conformance.catalogue import cross_checks, spec, yaml_marks
from conformance.catalogue import schema as spec_schema

from conformance.testbed import tensors
from conformance.checks import known_checks
from conformance.catalogue.spec import load_catalogue
from conformance.data import shipped_spec_dirs
from conformance.errors import SpecErrors

EP_FILE = """\
ep:
  name: myep
  provider: MyExecutionProvider
  summary: a vendor's EP
  packages: [onnxruntime-myep]
  memory:
    default: {device_type: npu, vendor_id: 4660, name: MyNpu}
    host_accessible: null
  copy_directions: [cpu>default, default>cpu]
  not_applicable:
    copy.host-accessible-alias: the NPU has no host-visible memory
  waivers:
    - contract: copy.device-to-device
      reason: not implemented yet
      url: https://example.com/issue/1
      until: "9.0"
  sources:
    - {kind: measured, ref: "vendor lab"}
"""


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Files written under the working directory are named relative to it in errors."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(folder: Path, name: str, text: str) -> str:
    (folder / name).write_text(text, encoding="utf-8")
    return name


def errors_of(paths, *, checks=None) -> list[errors.SpecError]:
    with pytest.raises(SpecErrors) as info:
        load_catalogue(paths, known_checks=known_checks() if checks is None else checks)
    return info.value.errors


def only_error(paths, **kwargs) -> errors.SpecError:
    errors = errors_of(paths, **kwargs)
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


def shipped() -> list[str]:
    return [str(p) for p in shipped_spec_dirs()]


def test_the_contract_template_is_valid(in_tmp, contract_text):
    catalogue = load_catalogue([write(in_tmp, "c.yaml", contract_text)], known_checks=known_checks())
    assert [c.id for c in catalogue.contracts] == ["vendor.thing"]


# --- one test per error kind -----------------------------------------------------------------


def test_misspelled_key_is_reported_at_its_line_with_a_suggestion(in_tmp, contract_text):
    text = contract_text.replace("{default_memory: device}", "{defualt_memory: device}")
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert (error.path, error.line, error.column) == ("c.yaml", 10, 20)
    assert error.message == "unknown key 'defualt_memory' (did you mean 'default_memory'?)"
    assert str(error).startswith("c.yaml:10:20: ")


def test_unknown_key_without_a_close_match_lists_the_allowed_keys(in_tmp, contract_text):
    text = contract_text.replace("    isolated: false\n", "    zzz: 1\n")
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert (error.line, error.column) == (12, 5)
    assert error.message.startswith("unknown key 'zzz'; expected one of: ")
    assert "statement" in error.message


def test_unknown_non_string_key_is_reported_at_its_own_line(in_tmp, contract_text):
    text = contract_text.replace("    isolated: false\n", "    3: false\n")
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert error.message.startswith("unknown key '3'")
    assert (error.line, error.column) == (12, 5)


def test_missing_required_key_is_reported_at_the_mapping_that_lacks_it(in_tmp, contract_text):
    text = contract_text.replace("    statement: The vendor thing MUST work as documented.\n", "")
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert (error.path, error.line, error.column) == ("c.yaml", 4, 5)
    assert error.message == "missing key 'statement'"
    assert error.key == "contracts[0]"


def test_wrong_enum_value_lists_the_allowed_values(in_tmp, contract_text):
    text = contract_text.replace("severity: required", "severity: must")
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert (error.line, error.column) == (7, 15)
    assert error.key == "contracts[0].severity"
    assert error.message == "'must' is not allowed; expected one of: 'required', 'recommended', 'informational'"


def test_wrong_type_names_expected_and_actual(in_tmp, contract_text):
    text = contract_text.replace("isolated: false", "isolated: sometimes")
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert (error.line, error.column) == (12, 15)
    assert error.message == "expected boolean, got str 'sometimes'"


def test_scalar_where_a_list_is_expected_is_a_type_error(in_tmp, contract_text):
    text = contract_text.replace("dtype: [float32]", "dtype: float32")
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert (error.line, error.column) == (14, 14)
    assert error.message == "expected array, got str 'float32'"


def test_bad_id_pattern_shows_the_expected_form(in_tmp, contract_text):
    text = contract_text.replace("id: vendor.thing", "id: Vendor.Thing")
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert (error.line, error.column) == (4, 9)
    assert error.key == "contracts[0].id"
    assert error.message.startswith("'Vendor.Thing' does not match the expected form ")


def test_bad_shape_pattern_points_at_the_item(in_tmp, contract_text):
    text = contract_text.replace('shape: ["3"]', 'shape: ["3", "3 by 5"]')
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert (error.line, error.column) == (15, 20)
    assert error.key == "contracts[0].params.shape[1]"


def test_duplicate_yaml_key_is_reported_at_the_second_occurrence(in_tmp, contract_text):
    text = contract_text.replace("title: Vendor contracts\n", "title: Vendor contracts\ntitle: again\n")
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert (error.path, error.line, error.column) == ("c.yaml", 3, 1)
    assert error.message == "duplicate key 'title'"


def test_invalid_yaml_is_reported_at_the_line_of_the_problem(in_tmp, contract_text):
    text = contract_text.replace("title: Vendor contracts", "title: Vendor: contracts")
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert (error.path, error.line) == ("c.yaml", 2)
    assert error.message.startswith("not valid YAML: mapping values are not allowed here")


def test_empty_file_is_an_error(in_tmp):
    error = only_error([write(in_tmp, "c.yaml", "# nothing\n")])
    assert (error.path, error.line, error.message) == ("c.yaml", 1, "the file is empty")


def test_file_of_neither_kind_is_an_error(in_tmp):
    error = only_error([write(in_tmp, "c.yaml", "something: else\n")])
    assert error.path == "c.yaml"
    assert "top-level key 'contracts'" in error.message and "top-level key 'ep'" in error.message


def test_unreadable_file_is_an_error_not_an_exception(in_tmp):
    error = only_error(["missing.yaml"])
    assert error.path == "missing.yaml"
    assert error.message.startswith("cannot read: ")


def test_duplicate_contract_id_across_files_names_the_first_location(in_tmp, contract_text):
    first = write(in_tmp, "a.yaml", contract_text)
    second = write(in_tmp, "b.yaml", "# a second file\n" + contract_text)
    error = only_error([first, second])
    assert (error.path, error.line) == ("b.yaml", 5)
    assert error.message == "duplicate contract id 'vendor.thing' (first defined at a.yaml:4)"


def test_duplicate_of_a_shipped_contract_id_names_the_shipped_file(in_tmp, contract_text):
    text = contract_text.replace("family: vendor", "family: copy").replace("id: vendor.thing", "id: copy.roundtrip-exact")
    error = only_error([*shipped(), write(in_tmp, "c.yaml", text)])
    assert error.path == "c.yaml"
    assert "duplicate contract id 'copy.roundtrip-exact' (first defined at specs/contracts/copy.yaml:" in error.message


def test_unknown_check_id_suggests_the_closest_registered_check(in_tmp, contract_text):
    text = contract_text.replace("check: update-inplace.from-numpy", "check: update-inplace.from-numpi")
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert (error.path, error.line, error.column) == ("c.yaml", 11, 12)  # the value of `check:`
    assert error.key == "contracts[0].check"
    assert error.message == "unknown check 'update-inplace.from-numpi' (did you mean 'update-inplace.from-numpy'?)"


def test_a_param_its_check_does_not_take_is_one_error_at_the_key(in_tmp, contract_text):
    """`layout` is a parameter the schema knows (other checks take it), not one this check takes."""
    error = only_error([write(in_tmp, "c.yaml", contract_text.replace('      shape: ["3"]\n', '      shape: ["3"]\n      layout: [strided]\n'))])
    assert (error.path, error.line, error.column, error.key) == ("c.yaml", 16, 7, "contracts[0].params.layout")
    assert error.message == "check 'update-inplace.from-numpy' takes no parameter 'layout'; it takes: dtype, shape, memory"


def test_a_misspelt_param_is_suggested_and_not_also_reported_missing():
    """The schema knows every parameter name, so a misspelling reaches this check only from a
    registry of checks whose names the schema does not list yet: one error, with the name."""
    from conformance.checks.registry import signature_of

    def vendor_check(ctx, dtype: str, shape: str, memory: str = "default"):
        yield from ()

    contract = load_catalogue().contract("update-inplace.from-numpy")
    contract = dataclasses.replace(contract, params={"dtype": ("float32",), "shap": ("3",)})
    (error,) = cross_checks.unknown_checks([contract], {contract.check: signature_of(contract.check, vendor_check)})
    assert error.message == ("check 'update-inplace.from-numpy' takes no parameter 'shap' (did you mean 'shape'?); "
                             "it takes: dtype, shape, memory")


def test_a_required_param_the_yaml_does_not_give_is_one_error_at_the_check(in_tmp, contract_text):
    text = contract_text.replace("      shape: [\"3\"]\n", "")
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert (error.path, error.line, error.column, error.key) == ("c.yaml", 11, 12, "contracts[0].check")
    assert error.message == "check 'update-inplace.from-numpy' needs 'shape' in the contract's params; it takes: dtype, shape, memory"


def test_a_handed_catalogue_whose_params_do_not_fit_is_refused_by_the_runner_not_failed_per_case(in_tmp, contract_text):
    """The pytest process loads the catalogue without the registry; the worker's Runner checks
    the params it was handed against its checks' signatures: one spec error, not a TypeError
    in every case of the contract."""
    from conformance.engine.runner import Runner

    with_layout = contract_text.replace('      shape: ["3"]\n', '      shape: ["3"]\n      layout: [strided]\n')
    catalogue = load_catalogue([*shipped(), write(in_tmp, "c.yaml", with_layout)])  # no registry
    with pytest.raises(SpecErrors) as info:
        Runner("cpu", handed=lambda: (catalogue, data.read_recipes()))
    assert [str(e) for e in info.value.errors] == [
        "c.yaml:16:7: contracts[0].params.layout: check 'update-inplace.from-numpy' takes no parameter 'layout'; it takes: dtype, shape, memory"]


def test_every_registered_check_records_its_params_and_the_shipped_contracts_fit_them():
    checks = known_checks()
    assert checks["update-inplace.from-numpy"].params == ("dtype", "shape", "memory")
    assert checks["update-inplace.from-numpy"].required == {"dtype", "shape"}
    assert cross_checks.unknown_checks(load_catalogue().contracts, checks) == []
    # What a check needs of onnxruntime, each shipped contract naming it requires (so that it is
    # not_run before the check, from the facts, where the build lacks it).
    assert [(c.id, api) for c in load_catalogue().contracts for api in checks[c.check].apis if api not in c.requires_api] == []


def test_a_check_needing_an_api_the_table_does_not_list_cannot_register():
    from conformance.checks.registry import check

    with pytest.raises(ValueError, match="needs APIs that conformance/apis.py does not list: copy_tensor$"):
        check("vendor.never-registered", apis=("copy_tensor",))(lambda ctx: iter(()))


def test_check_ids_are_not_cross_checked_without_a_registry(in_tmp, contract_text):
    text = contract_text.replace("check: update-inplace.from-numpy", "check: nowhere.at-all")
    catalogue = load_catalogue([write(in_tmp, "c.yaml", text)], known_checks=())
    assert catalogue.contracts[0].check == "nowhere.at-all"


def test_id_not_starting_with_the_family_is_an_error(in_tmp, contract_text):
    text = contract_text.replace("id: vendor.thing", "id: other.thing")
    error = only_error([write(in_tmp, "c.yaml", text)])
    assert (error.path, error.line, error.column) == ("c.yaml", 4, 9)
    assert error.message == "id must start with the family name 'vendor.'"


def test_ep_waiver_for_an_unknown_contract_is_an_error_with_a_suggestion(in_tmp):
    text = EP_FILE.replace("contract: copy.device-to-device", "contract: copy.device-to-devise")
    error = only_error([*shipped(), write(in_tmp, "ep.yaml", text)])
    assert error.path == "ep.yaml"
    assert (error.line, error.column) == (13, 17)  # the value of the waiver's `contract:`
    assert error.key == "ep.waivers[0].contract"
    assert error.message == "unknown contract 'copy.device-to-devise' (did you mean 'copy.device-to-device'?)"


def test_ep_not_applicable_entry_for_an_unknown_contract_is_an_error(in_tmp):
    text = EP_FILE.replace("copy.host-accessible-alias:", "copy.host-accessible-alas:")
    error = only_error([*shipped(), write(in_tmp, "ep.yaml", text)])
    assert (error.path, error.line, error.column) == ("ep.yaml", 11, 5)  # the key itself
    assert error.key == "ep.not_applicable.copy.host-accessible-alas"
    assert error.message == "unknown contract 'copy.host-accessible-alas' (did you mean 'copy.host-accessible-alias'?)"


def test_a_vendor_spec_of_a_shipped_ep_replaces_the_shipped_one(in_tmp):
    """A vendor's own cuda.yaml (or cpu.yaml) given with the run replaces the kit's, without
    editing the installed package; the catalogue says which it replaced."""
    shipped_cpu = (data.eps_dir() / "cpu.yaml").read_text()
    vendor = shipped_cpu.replace("summary: onnxruntime's built-in CPU execution provider.", "summary: the vendor's own declaration.")
    catalogue = load_catalogue([*shipped(), write(in_tmp, "cpu.yaml", vendor)], known_checks=known_checks())
    used = catalogue.ep_spec("cpu")
    assert used.summary == "the vendor's own declaration." and used.location.path == "cpu.yaml"
    assert used.overrides.path == "specs/eps/cpu.yaml"
    assert [ep.name for ep in catalogue.eps].count("cpu") == 1
    assert catalogue.ep_spec("CPUExecutionProvider") is used  # by provider name too
    assert all(ep.overrides is None for ep in catalogue.eps if ep is not used)


def test_a_vendor_spec_replaces_a_shipped_one_it_shares_a_name_with(in_tmp):
    text = EP_FILE.replace("name: myep", "name: cpu").replace("name: MyNpu", "name: X")
    catalogue = load_catalogue([*shipped(), write(in_tmp, "ep.yaml", text)], known_checks=known_checks())
    assert catalogue.ep_spec("cpu").provider == "MyExecutionProvider"
    assert catalogue.ep_spec("cpu").overrides.path == "specs/eps/cpu.yaml"


def test_two_vendor_files_declaring_one_ep_name_are_an_error(in_tmp):
    text = EP_FILE.replace("name: myep", "name: cpu").replace("name: MyNpu", "name: X")
    first = write(in_tmp, "ep.yaml", text)
    errors = errors_of([*shipped(), first, write(in_tmp, "again.yaml", text)])
    assert errors and all(e.path == "again.yaml" for e in errors)
    assert "EP name or alias 'cpu' is already declared at ep.yaml:2" in [e.message for e in errors]


def test_a_shipped_file_named_again_is_not_a_vendor_override(in_tmp):
    catalogue = load_catalogue([*shipped(), str(data.eps_dir() / "cpu.yaml")], known_checks=known_checks())
    assert catalogue.ep_spec("cpu").overrides is None
    assert len(catalogue.files) == len(load_catalogue(shipped()).files)


def test_ep_memory_with_a_misspelled_key_is_reported_inside_the_oneof(in_tmp):
    text = EP_FILE.replace("{device_type: npu, vendor_id: 4660, name: MyNpu}", "{device_typ: npu}")
    errors = errors_of([*shipped(), write(in_tmp, "ep.yaml", text)])
    messages = [e.message for e in errors]
    assert "unknown key 'device_typ' (did you mean 'device_type'?)" in messages
    assert all(e.path == "ep.yaml" and e.line == 7 for e in errors), [str(e) for e in errors]


def test_every_error_of_every_file_is_collected(in_tmp, contract_text):
    bad_contract = contract_text.replace("severity: required", "severity: must")
    bad_ep = EP_FILE.replace("summary: a vendor's EP", "sumary: a vendor's EP")
    errors = errors_of([write(in_tmp, "c.yaml", bad_contract), write(in_tmp, "ep.yaml", bad_ep)])
    assert {e.path for e in errors} == {"c.yaml", "ep.yaml"}
    assert "SpecErrors" not in str(SpecErrors(errors))
    assert str(SpecErrors(errors)).count("\n") == len(errors) - 1


# --- what does load ------------------------------------------------------------------------


def test_a_valid_vendor_ep_file_loads_together_with_the_shipped_catalogue(in_tmp):
    catalogue = load_catalogue([*shipped(), write(in_tmp, "ep.yaml", EP_FILE)], known_checks=known_checks())
    ep = catalogue.ep_spec("MyExecutionProvider")
    assert ep is not None and ep.name == "myep"
    assert (ep.location.path, ep.location.line) == ("ep.yaml", 2)
    assert ep.default_memory.device_type == "npu" and ep.default_memory.vendor_id == 4660
    assert ep.copy_directions == (("cpu", "default"), ("default", "cpu"))
    assert ep.waivers[0].contract == "copy.device-to-device" and ep.waivers[0].until == "9.0"
    assert ep.waivers[0].location.line == 13
    assert catalogue.ep_spec("cpu") is not None
    assert len(catalogue.contracts) == len(load_catalogue(known_checks=known_checks()).contracts)


def test_a_folder_is_read_for_yaml_files(in_tmp, contract_text):
    folder = in_tmp / "vendor"
    folder.mkdir()
    write(folder, "c.yaml", contract_text)
    write(folder, "notes.txt", "not a spec")
    catalogue = load_catalogue([str(folder)], known_checks=known_checks())
    assert [c.id for c in catalogue.contracts] == ["vendor.thing"]
    assert catalogue.contracts[0].location.path == "vendor/c.yaml"


def test_contract_statement_is_folded_and_cases_follow_the_yaml_order(in_tmp, contract_text):
    text = contract_text.replace('shape: ["3"]', 'shape: ["3", scalar]').replace("dtype: [float32]", "dtype: [int8, float32]")
    contract = load_catalogue([write(in_tmp, "c.yaml", text)], known_checks=known_checks()).contracts[0]
    assert contract.cases() == [
        {"dtype": "int8", "shape": "3"}, {"dtype": "int8", "shape": "scalar"},
        {"dtype": "float32", "shape": "3"}, {"dtype": "float32", "shape": "scalar"},
    ]
    assert contract.file == str((in_tmp / "c.yaml").resolve())


def test_shipped_catalogue_loads_with_the_registered_checks():
    catalogue = load_catalogue(known_checks=known_checks())
    assert len(catalogue.contracts) >= 15
    assert catalogue.ep_spec("cpu").provider == "CPUExecutionProvider"
    assert len(catalogue.digest) == 64


def test_every_shipped_schema_is_a_valid_draft_2020_12_schema():
    schemas = sorted(data.schemas_dir().glob("*.json"))
    assert {p.name for p in schemas} >= {spec_schema.CONTRACTS_SCHEMA, spec_schema.EP_SCHEMA, spec_schema.KNOWN_ISSUES_SCHEMA}
    for path in schemas:
        jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text(encoding="utf-8")))


def test_schema_dtype_enum_equals_the_tensor_dtypes():
    schema = spec_schema.load_schema(spec_schema.CONTRACTS_SCHEMA)
    assert sorted(schema["$defs"]["dtype"]["enum"]) == sorted(tensors.DTYPES)


def test_every_shipped_contract_names_a_registered_check():
    checks = known_checks()
    for folder in shipped_spec_dirs():
        for path in sorted(folder.glob("*.yaml")):
            document = yaml.safe_load(path.read_text(encoding="utf-8"))
            for contract in document.get("contracts", []):
                assert contract["check"] in checks, f"{path.name}: {contract['id']} uses unknown check {contract['check']}"


def test_every_shipped_contract_and_ep_spec_has_a_real_location():
    catalogue = load_catalogue(known_checks=known_checks())
    assert catalogue.contracts and catalogue.eps
    for item in (*catalogue.contracts, *catalogue.eps):
        assert item.location.line > 0
        assert item.location.path.startswith("specs/")
    for contract in catalogue.contracts:
        lines = Path(contract.file).read_text(encoding="utf-8").splitlines()
        assert lines[contract.location.line - 1].strip() == f"- id: {contract.id}"


def test_shipped_yaml_points_editors_at_the_schemas():
    for folder, schema in ((data.contracts_dir(), spec_schema.CONTRACTS_SCHEMA), (data.eps_dir(), spec_schema.EP_SCHEMA)):
        for path in sorted(folder.glob("*.yaml")):
            first = path.read_text(encoding="utf-8").splitlines()[0]
            assert first.startswith("# yaml-language-server: $schema=") and first.endswith(schema), path.name


def test_spec_error_str_is_path_line_column_key_message():
    error = errors.SpecError("x.yaml", 3, 7, "ep.name", "bad")
    assert str(error) == "x.yaml:3:7: ep.name: bad"
    assert str(errors.SpecError("x.yaml", 1, 1, "", "bad")) == "x.yaml:1:1: bad"


def test_parse_yaml_records_key_and_value_positions():
    doc, errors = yaml_marks.parse_yaml(textwrap.dedent("""\
        a:
          b: [1, 2]
        """), "t.yaml")
    assert errors == []
    assert doc.location(("a", "b", 1)).line == 2
    assert doc.location(("a", "b", 1)).column == 10
    assert doc.location(("a", "b"), key=True).column == 3
    assert doc.location(("a", "nope")).line == 2  # falls back to the nearest known parent


# --- the kit's table of known onnxruntime issues ---------------------------------------------


def test_the_shipped_known_issues_table_is_valid():
    from conformance.tools.found import RUNTIME_ISSUES

    issues = spec.load_known_issues(RUNTIME_ISSUES)
    assert issues and all(issue.url.startswith("https://") for issue in issues)


def test_a_malformed_known_issues_file_is_an_error_at_its_line(in_tmp):
    text = ("known_issues:\n"
            "  - contract: copy.roundtrip\n"
            "    url: https://github.com/microsoft/onnxruntime/issues/1\n"
            "    title: a defect\n"
            "  - contract: copy.roundtrip\n"
            "    url: http://example.com/not-https\n"
            "    titel: misspelt\n")
    with pytest.raises(SpecErrors) as info:
        spec.load_known_issues(write(in_tmp, "known_issues.yaml", text))
    assert sorted((e.path, e.line, e.key) for e in info.value.errors) == [
        ("known_issues.yaml", 5, "known_issues[1]"), ("known_issues.yaml", 6, "known_issues[1].url"), ("known_issues.yaml", 7, "known_issues[1].titel")]
    assert all(str(e).startswith(f"known_issues.yaml:{e.line}:") for e in info.value.errors)


# --- a vendor's large catalogue: what loading it fast must keep ---------------------------


def _many(count: int, bad: int | None = None) -> str:
    """`count` contracts in one file, the one at index `bad` with a misspelt severity."""
    entries = "".join(f"""  - id: many.c{i}
    statement: Contract number {i} holds (the same check as copy.roundtrip-exact).
    subject: ep
    severity: {"requird" if i == bad else "informational"}
    provenance:
      basis: inferred
      ref: "the kit's tests"
    since: "1.22"
    sources:
      - {{kind: onnxruntime-docs, ref: "copy_tensors"}}
    check: copy.roundtrip
    params: {{dtype: [float32], shape: ["16"]}}
""" for i in range(count))
    return f"family: many\ntitle: many contracts\ncontracts:\n{entries}"


def test_an_error_deep_in_a_2000_contract_file_is_at_its_line_and_column(in_tmp):
    error = only_error([write(in_tmp, "many.yaml", _many(2000, bad=1789))], checks=())
    # 3 lines of header, 12 per contract: contract 1789's severity is its 4th line.
    assert (error.path, error.line, error.column) == ("many.yaml", 3 + 12 * 1789 + 4, 15), str(error)
    assert error.key == "contracts[1789].severity" and error.message.startswith("'requird' is not allowed")


def test_the_validators_inline_the_local_definitions_and_keep_every_constraint(in_tmp, contract_text):
    # jsonschema resolves a $ref each time it meets one: the validators are built from the
    # schemas with their local references inlined, which must accept and refuse the same.
    written = spec_schema.load_schema(spec_schema.CONTRACTS_SCHEMA)
    inlined = spec_schema.inline_local_refs(written)
    assert '"$ref"' in json.dumps(written) and '"$ref"' not in json.dumps(inlined)
    recursive = {"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "properties": {"x": {"$ref": "#/$defs/node"}}}
    # A cycle stays a reference, once inlined.
    assert spec_schema.inline_local_refs(recursive)["properties"]["x"] == {"type": "array", "items": {"$ref": "#/$defs/node"}}
    as_written = jsonschema.Draft202012Validator(written)
    documents = [yaml.safe_load(_many(3, bad=1)), yaml.safe_load(contract_text),
                 yaml.safe_load(contract_text.replace("dtype: [", "dtype: [float31, "))]
    for document in documents:
        expected = sorted((tuple(e.absolute_path), e.message) for e in as_written.iter_errors(document))
        got = sorted((tuple(e.absolute_path), e.message) for e in spec_schema.validators()[spec_schema.CONTRACTS_SCHEMA].iter_errors(document))
        assert got == expected
    assert any(as_written.iter_errors(documents[0])) and any(as_written.iter_errors(documents[2]))


def test_loading_pauses_the_cyclic_collector_and_restores_it_even_on_an_error(in_tmp):
    import gc

    assert gc.isenabled()
    load_catalogue(shipped())
    assert gc.isenabled()
    errors_of([write(in_tmp, "many.yaml", _many(3, bad=1))], checks=())
    assert gc.isenabled()
    gc.disable()
    try:
        load_catalogue(shipped())
        assert not gc.isenabled()  # a caller's choice stays its own
    finally:
        gc.enable()


MIXED_YAML = """\
base: &base {kind: seed, ref: "r", n: 3}
merged:
  <<: *base
  note: a merge key, built by PyYAML's constructor
values: [1, 2.5, true, null, 2024-02-29, "16", !!str 17, [a, {b: c}]]
? 3
: a number as a key
dup: 1
dup: 2
set: !!set {a, b}
"""


SHIPPED_FILES = {p.name: p for folder in shipped_spec_dirs() for p in sorted(folder.rglob("*.yaml"))}


@pytest.mark.parametrize("name", ["mixed", "many", *SHIPPED_FILES])
def test_one_walk_builds_the_values_marks_and_duplicate_errors_the_constructor_and_marks_gave(name):
    import yaml

    text = {"mixed": MIXED_YAML, "many": _many(50, bad=7)}.get(name) or SHIPPED_FILES[name].read_text(encoding="utf-8")
    document, errors = yaml_marks.parse_yaml(text, "f.yaml")
    node, data = yaml_marks._compose(yaml.SafeLoader, text)  # the two walks it replaces: PyYAML's constructor ...
    expected = yaml_marks.Document("f.yaml", data, {}, {})
    expected_errors: list[errors.SpecError] = []
    yaml_marks._record_marks(node, (), expected, expected_errors)  # ... and the marks
    assert document is not None
    assert document.data == expected.data and errors == expected_errors
    assert document.value_marks == expected.value_marks and document.key_marks == expected.key_marks
    if name == "mixed":
        assert [e.message for e in errors] == ["duplicate key 'dup'"] and document.data["merged"]["n"] == 3
        assert document.location(("values", 7, 1, "b")).line == 5 and document.location((3,), key=True).line == 6


# --- provenance and API level ------------------------------------------------------------------


def test_a_contract_must_say_where_its_rule_comes_from_and_what_api_it_needs(in_tmp, contract_text):
    without = contract_text.replace('''    provenance:
      basis: inferred
      ref: "the kit's tests"
''', "")
    error = only_error([write(in_tmp, "c.yaml", without)])
    assert error.key == "contracts[0]" and "missing key 'provenance'" in error.message
    error = only_error([write(in_tmp, "c.yaml", contract_text.replace("basis: inferred", "basis: hearsay"))])
    assert error.key == "contracts[0].provenance.basis" and "'hearsay' is not allowed" in error.message
    error = only_error([write(in_tmp, "c.yaml", contract_text.replace('    since: "1.22"\n', ""))])
    assert "missing key 'since'" in error.message


def test_since_older_than_an_api_the_contract_requires_is_an_error_at_since(in_tmp, contract_text):
    text = contract_text.replace("    isolated: false\n", "    isolated: false\n    requires_api: [memory_info_alloc, copy_tensors]\n")
    error = only_error([write(in_tmp, "c.yaml", text)], checks=known_checks())
    assert error.key == "contracts[0].since"
    assert error.message == "since 1.22 is older than the API it requires: memory_info_alloc, copy_tensors (onnxruntime >= 1.30)"
    assert load_catalogue([write(in_tmp, "c.yaml", text.replace('since: "1.22"', 'since: "1.30"'))], known_checks=known_checks())


def test_every_shipped_contract_names_its_provenance_and_api_level():
    contracts = load_catalogue().contracts
    assert all(c.provenance and c.provenance.ref and c.since for c in contracts)
    assert [c.id for c in contracts if c.contested] == ["memory-info.session-inputs", "ordering.copy-on-stream", "ordering.cross-device-values",
                                                       "ordering.unsynchronized-run"]


def test_a_contract_is_found_by_its_id_and_a_catalogue_of_one_keeps_every_ep():
    catalogue = load_catalogue(shipped())
    last = catalogue.contracts[-1]
    assert catalogue.contract(last.id) is last
    with pytest.raises(KeyError):
        catalogue.contract("no.such-contract")
    one = catalogue.only(last.id)  # what a worker of one own-process case is handed
    assert one.contracts == (last,) and one.eps == catalogue.eps and one.digest == catalogue.digest
