"""The shipped JSON Schemas (`conformance/schemas/`, Draft 2020-12) and a document's errors against
them, each worded for a person and placed at its `path:line:column` (an unknown key with the
closest known one, a missing key, a value not among the allowed).

Must not know: how the documents are loaded, contracts, onnxruntime.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, cast

from conformance import data
from conformance.catalogue.quick_schema import Test, compile_schema
from conformance.catalogue.yaml_marks import Document
from conformance.errors import SpecError, closest, unique

if TYPE_CHECKING:
    import jsonschema

CONTRACTS_SCHEMA = "contracts.schema.json"
EP_SCHEMA = "ep.schema.json"
KNOWN_ISSUES_SCHEMA = "known-issues.schema.json"


def schema_text(name: str) -> str:
    return (data.schemas_dir() / name).read_text(encoding="utf-8")


def load_schema(name: str) -> dict[str, Any]:
    return json.loads(schema_text(name))


def _validators() -> dict[str, jsonschema.protocols.Validator]:
    # Imported here, when the first file is validated: a pytest run launches its workers
    # before that, so they start while this process imports jsonschema.
    import jsonschema
    import referencing

    schemas = {name: load_schema(name) for name in (CONTRACTS_SCHEMA, EP_SCHEMA, KNOWN_ISSUES_SCHEMA)}
    registry = referencing.Registry().with_resources(
        (schema["$id"], referencing.Resource.from_contents(schema)) for schema in schemas.values()
    )
    # The shipped schemas themselves are checked by the kit's tests (check_schema in
    # tests/test_spec.py), not at every load, where it took most of the validation time.
    return {name: jsonschema.Draft202012Validator(inline_local_refs(schema), registry=registry) for name, schema in schemas.items()}


LOCAL_REF = "#/$defs/"


def inline_local_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with each `{"$ref": "#/$defs/NAME"}` replaced by that definition (itself
    inlined), the same constraints: jsonschema resolves a `$ref` each time it meets one, a
    third of the time it took to validate a 2000-contract file. A definition that refers to
    itself, and a reference to another schema, stay references (the registry resolves them)."""
    definitions = schema.get("$defs", {})

    def inlined(node: Any, within: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if len(node) == 1 and isinstance(ref, str) and ref.startswith(LOCAL_REF):
                name = ref[len(LOCAL_REF):]
                if name in definitions and name not in within:
                    return inlined(definitions[name], (*within, name))
            return {key: inlined(value, within) for key, value in node.items()}
        if isinstance(node, list):
            return [inlined(item, within) for item in node]
        return node

    return cast(dict[str, Any], inlined(schema, ()))


_VALIDATORS: dict[str, jsonschema.protocols.Validator] | None = None


def validators() -> dict[str, jsonschema.protocols.Validator]:
    global _VALIDATORS
    if _VALIDATORS is None:
        _VALIDATORS = _validators()
    return _VALIDATORS


_QUICK_TESTS: dict[str, Test | None] | None = None


def quick_tests() -> dict[str, Test | None]:
    """Each shipped schema's quick test (see quick_schema), None where it has none."""
    global _QUICK_TESTS
    if _QUICK_TESTS is None:
        _QUICK_TESTS = {name: compile_schema(inline_local_refs(load_schema(name))) for name in (CONTRACTS_SCHEMA, EP_SCHEMA, KNOWN_ISSUES_SCHEMA)}
    return _QUICK_TESTS


def schema_errors(doc: Document, schema_name: str) -> list[SpecError]:
    quick = quick_tests()[schema_name]
    if quick is not None and quick(doc.data):
        return []  # valid: jsonschema would find no error (every other document is left to it)
    validator = validators()[schema_name]
    errors: list[SpecError] = []
    for error in sorted(validator.iter_errors(doc.data), key=lambda e: list(map(str, e.absolute_path))):
        errors.extend(_explain(doc, error))
    return unique(errors)


def _explain(doc: Document, error: jsonschema.ValidationError) -> Iterator[SpecError]:
    json_path = tuple(error.absolute_path)
    if error.validator in ("oneOf", "anyOf") and error.context:
        # Report the branch the author evidently meant: the one whose type matched.
        meant = [e for e in error.context if e.validator != "type" or tuple(e.absolute_path) != json_path]
        if meant:
            for sub in meant:
                yield from _explain(doc, sub)
            return
    if error.validator == "additionalProperties":
        allowed = sorted(cast(Mapping[str, Any], error.schema).get("properties", {}))
        for key in cast(Iterable[Any], error.instance):
            if key in allowed:
                continue
            hint = closest(str(key), allowed, cutoff=0.5)
            suggestion = f" (did you mean '{hint}'?)" if hint else f"; expected one of: {', '.join(allowed)}"
            yield doc.error((*json_path, key), f"unknown key '{key}'{suggestion}", key=True)
        return
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        yield doc.error(json_path, f"missing key '{missing}'")
        return
    if error.validator == "enum":
        choices = ", ".join(repr(c) for c in cast(Iterable[Any], error.validator_value))
        yield doc.error(json_path, f"{error.instance!r} is not allowed; expected one of: {choices}")
        return
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        yield doc.error(json_path, f"expected {expected}, got {type(error.instance).__name__} {error.instance!r}")
        return
    if error.validator == "pattern":
        yield doc.error(json_path, f"{error.instance!r} does not match the expected form {error.validator_value!r}")
        return
    yield doc.error(json_path, error.message)
