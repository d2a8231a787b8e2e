"""A document checked against one of the kit's JSON Schemas with the standard library alone.

`conformance.fleet` reads fleet.json in an application's environment, where jsonschema may not
be installed, and a table written elsewhere must be checked whole before a row of it is used:
a field of the wrong type would otherwise surface as a TypeError deep in a question. This knows
the keywords fleet.schema.json uses (`KEYWORDS`) and refuses a schema holding any other
(UnknownKeyword), so a keyword added to the schema later is never skipped in silence;
tests/test_fleet.py checks that it finds what jsonschema finds. Standard library only.
"""

from __future__ import annotations

from typing import Any, Iterator

from conformance.errors import KitError

# What a schema may say: annotations (read by people, ignored here) and the assertions below.
ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "$defs"})
KEYWORDS = ANNOTATIONS | {"type", "required", "properties", "additionalProperties", "items", "$ref", "anyOf", "enum", "const", "minimum"}


class UnknownKeyword(KitError):
    """A schema using a keyword this checker does not implement: a defect of the kit, said as such."""


def _of_type(value: Any, name: str) -> bool:
    # bool is an int to Python, never an integer or a number to JSON Schema.
    if name in ("integer", "number"):
        return not isinstance(value, bool) and isinstance(value, int if name == "integer" else (int, float))
    return isinstance(value, {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}[name])


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def problems(schema: dict[str, Any], instance: Any) -> list[str]:
    """Where `instance` departs from `schema`, as 'json path: message' lines in path order
    (none when it follows it), an object's before those inside it. UnknownKeyword when the
    schema says what this cannot check."""
    return sorted(_problems(schema, schema, instance, "$"), key=lambda line: line.split(": ", 1)[0])


def _problems(root: dict[str, Any], schema: dict[str, Any], value: Any, path: str) -> Iterator[str]:
    unknown = sorted(set(schema) - KEYWORDS)
    if unknown:
        raise UnknownKeyword(f"schema {root.get('$id', '')} at {path}: keyword {', '.join(unknown)} is not checked by plain_schema")
    if "$ref" in schema:
        yield from _problems(root, _resolve(root, schema["$ref"]), value, path)
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not any(_of_type(value, name) for name in names):
            yield f"{path}: {_shown(value)} is not of type {' or '.join(names)}"
            return  # the other keywords presume the type
    if "const" in schema and value != schema["const"]:
        yield f"{path}: {_shown(value)} is not {schema['const']!r}"
    if "enum" in schema and value not in schema["enum"]:
        yield f"{path}: {_shown(value)} is not one of {schema['enum']}"
    if "minimum" in schema and _of_type(value, "number") and value < schema["minimum"]:
        yield f"{path}: {value} is less than the minimum of {schema['minimum']}"
    if "anyOf" in schema:
        yield from _any_of(root, schema["anyOf"], value, path)
    if isinstance(value, dict):
        yield from _object(root, schema, value, path)
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            yield from _problems(root, schema["items"], item, f"{path}[{index}]")


def _object(root: dict[str, Any], schema: dict[str, Any], value: dict[str, Any], path: str) -> Iterator[str]:
    missing = [key for key in schema.get("required", ()) if key not in value]
    if missing:
        yield f"{path}: lacks {', '.join(repr(key) for key in missing)}"
    properties = schema.get("properties", {})
    for key, item in value.items():
        if key in properties:
            yield from _problems(root, properties[key], item, f"{path}.{key}")
        elif isinstance(schema.get("additionalProperties"), dict):
            yield from _problems(root, schema["additionalProperties"], item, f"{path}.{key}")


def _any_of(root: dict[str, Any], branches: list[dict[str, Any]], value: Any, path: str) -> Iterator[str]:
    found = [list(_problems(root, branch, value, path)) for branch in branches]
    if all(found):
        # The branch the value's type chose says what is wrong inside it (a memory object with a
        # field of the wrong type), rather than "matches none of its shapes" for the whole object.
        chosen = [each for each in found if not any(p.startswith(f"{path}: ") and " is not of type " in p for p in each)]
        yield from (chosen[0] if chosen else [f"{path}: {_shown(value)} matches none of its allowed shapes"])


def _resolve(root: dict[str, Any], reference: str) -> dict[str, Any]:
    prefix = "#/$defs/"
    if not reference.startswith(prefix) or reference[len(prefix):] not in root.get("$defs", {}):
        raise UnknownKeyword(f"schema {root.get('$id', '')}: $ref {reference!r} is not a definition of the same schema")
    return root["$defs"][reference[len(prefix):]]
