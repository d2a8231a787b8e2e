"""report.json's published schema (conformance/schemas/report.schema.json, read by
conformance/report/schema.py): the kit's own report validates against it, and `found`, `diff`
and `verify` check a report against it before reading it, so that a malformed field is one
problem naming the file and the JSON path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from conformance.tools import bundle

from conformance import cli

from conformance.report import schema as report_schema
from conformance.data import schemas_dir
from conformance.report import SCHEMA

DESIGN_KEYS = ["schema", "kit_version", "onnxruntime", "ep", "devices", "verdict", "summary", "results", "capabilities"]


def published() -> dict:
    return json.loads((schemas_dir() / "report.schema.json").read_text(encoding="utf-8"))


def test_the_published_schema_is_a_valid_schema_of_the_version_reports_carry():
    schema = published()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"] == {"const": SCHEMA}
    assert report_schema.REPORT_SCHEMAS[SCHEMA] == "report.schema.json"
    assert schema["required"] == DESIGN_KEYS
    assert {"contract", "ep", "device", "params", "outcome", "message", "spec"} <= set(schema["$defs"]["result"]["required"])


def test_the_report_of_a_cpu_run_validates_against_the_published_schema(cpu_reports):
    report = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    errors = [f"{e.json_path}: {e.message}" for e in jsonschema.Draft202012Validator(published()).iter_errors(report)]
    assert errors == []
    assert report_schema.report_problems(report) == []
    assert set(report) <= set(published()["properties"]), "a key the kit writes is missing from the published schema"


def altered(cpu_reports: Path, folder: Path, edit) -> Path:
    report = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    edit(report)
    path = folder / "lane" / "report.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report))
    return path


def _set_result_field(key, value):
    def edit(report):
        report["results"][0][key] = value
    return edit


def _set_hardware(report):
    report["devices"][0]["hardware"]["vendor_id"] = "0x0"


def _set_pairs(report):
    report["capabilities"][0]["pairs"] = {"cpu": "cpu"}


def _set_run(report):
    report["run"] = []


@pytest.mark.parametrize("edit, path", [
    (_set_result_field("outcome", 3), "$.results[0].outcome"),
    (_set_result_field("params", "dtype=float32"), "$.results[0].params"),
    (_set_hardware, "$.devices[0].hardware.vendor_id"),
    (_set_pairs, "$.capabilities[0].pairs"),
    (_set_run, "$.run"),
], ids=["outcome-number", "params-string", "vendor-id-string", "pairs-object", "run-list"])
def test_found_and_diff_name_the_file_and_the_json_path_of_a_malformed_field(cpu_reports, tmp_path, capsys, edit, path):
    report = altered(cpu_reports, tmp_path, edit)
    assert cli.main(["found", str(report)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert re.match(rf"ort-conformance: {re.escape(str(report))}: not a conformance report: {re.escape(path)}: ", err), err
    assert cli.main(["diff", str(report), str(cpu_reports)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{report}: not a conformance report: {path}: " in err


def test_a_report_of_another_version_is_one_problem_naming_it(cpu_reports, tmp_path, capsys):
    report = altered(cpu_reports, tmp_path, lambda data: data.update(schema="ort-ep-conformance/report/2"))
    assert cli.main(["diff", str(report), str(report)]) == 2
    assert capsys.readouterr().err.strip() == (f"ort-conformance: {report}: not a conformance report: $.schema: "
                                               f"'ort-ep-conformance/report/2' is a report version this kit does not read (it reads {SCHEMA})")


def test_reports_altered_at_random_are_problems_or_read_whole_never_a_crash(cpu_reports, tmp_path):
    """A little fuzzing: values of a real report replaced or removed at random. verify lists
    problems; a report the schema passes is one that diff and found read without an error."""
    import copy
    import random

    from conformance.tools import diff, found
    from conformance.checks import known_checks
    from conformance.catalogue.spec import load_catalogue

    output, _ = bundle.write(cpu_reports, tmp_path / "b.tar.gz")
    files = bundle.read(output)
    original = json.loads(files["report.json"])
    catalogue = load_catalogue(known_checks=known_checks())
    rng = random.Random(19)
    values = [None, 1, -1, 1.5, "x", "", [], {}, True, [1], {"a": 1}]

    def paths(value, path=()):
        yield path
        children = value.items() if isinstance(value, dict) else enumerate(value[:2]) if isinstance(value, list) else ()
        for key, child in children:
            yield from paths(child, (*path, key))

    every = list(paths(original))[1:]
    (tmp_path / "lane").mkdir()
    for _ in range(150):
        report = copy.deepcopy(original)
        for path in rng.sample(every, rng.randint(1, 3)):
            parent = report
            try:
                for key in path[:-1]:
                    parent = parent[key]
                if isinstance(parent, dict) and rng.random() < 0.2:
                    del parent[path[-1]]
                else:
                    parent[path[-1]] = rng.choice(values)
            except (KeyError, IndexError, TypeError):
                continue  # a value above it was replaced already
        assert isinstance(bundle.verify(output, {**files, "report.json": json.dumps(report).encode()}), list)
        if not report_schema.report_problems(report):
            diff.render(diff.compare(report, original))
            (tmp_path / "lane" / "report.json").write_text(json.dumps(report))
            try:
                found.render(found.load_reports([str(tmp_path / "lane" / "report.json")]), catalogue)
            except found.ReportError:
                pass  # a key found needs that version 1 does not require
