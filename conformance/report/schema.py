"""report.json as the kit reads it back: parsed, and checked against its published schema.

`conformance/schemas/report.schema.json` describes what a run writes (the keys the kit's
interface names are required, the others typed when present), and the report's `schema`
field names its version, the way jsonschema's `validator_for` dispatches on `$schema`.
`verify`, `diff` and `found` check a report here before they read it, so that a file altered
by hand is problems with their JSON paths (`$.results[3].outcome: 3 is not one of [...]`),
never a TypeError or KeyError of the reader. Knows nothing of bundles or rendering.
"""

from __future__ import annotations

import json
from typing import Any

REPORT_SCHEMA_PREFIX = "ort-ep-conformance/report/"
REPORT_SCHEMAS = {"ort-ep-conformance/report/1": "report.schema.json"}  # version -> schema file


def parse_json(text: bytes | str) -> Any:
    """json.loads, JSON nested too deep for its parser (a RecursionError) being a ValueError as
    any other malformed JSON is: a report or manifest is data to check, whatever its bytes."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deep to read") from None


_VALIDATORS: dict[str, Any] = {}


def report_validator(version: str):
    """The validator of report.json schema `version` (a key of REPORT_SCHEMAS), made once."""
    if version not in _VALIDATORS:
        from jsonschema import Draft202012Validator  # imported here: most commands never need it

        from conformance.data import schemas_dir

        schema = json.loads((schemas_dir() / REPORT_SCHEMAS[version]).read_text(encoding="utf-8"))
        _VALIDATORS[version] = Draft202012Validator(schema)
    return _VALIDATORS[version]


def report_problems(report: Any) -> list[str]:
    """Where `report` is not a report.json of a schema this kit reads, as 'json path: message'
    lines (none when it is one). The schema is the one its `schema` field names; a report of
    another version is that one problem, and anything else is checked against version 1."""
    version = report.get("schema") if isinstance(report, dict) else None
    version = version if isinstance(version, str) else ""
    if version.startswith(REPORT_SCHEMA_PREFIX) and version not in REPORT_SCHEMAS:
        return [f"$.schema: {version!r} is a report version this kit does not read (it reads {', '.join(REPORT_SCHEMAS)})"]
    return problems(report_validator(version if version in REPORT_SCHEMAS else next(iter(REPORT_SCHEMAS))), report)


def problems(validator, instance: Any) -> list[str]:
    """Every error `validator` finds in `instance`, as 'json path: message' lines in path order."""
    errors = sorted((e for error in validator.iter_errors(instance) for e in _meant(error)), key=lambda e: e.json_path)
    return [f"{e.json_path}: {e.message[:160]}" for e in errors]


def _meant(error) -> list:
    """For a value that matches no branch of an anyOf (null, or an object of some shape), the
    errors inside the branch its type chose: `$.devices[0].ep_vendor: 3 is not of type
    'string'`, not the whole object "is not valid under any of the given schemas"."""
    if error.validator in ("anyOf", "oneOf") and error.context:
        deeper = [e for e in error.context if len(e.absolute_path) > len(error.absolute_path)]
        if deeper:
            return [e for sub in deeper for e in _meant(sub)]
    return [error]
