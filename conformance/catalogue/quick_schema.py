"""A quick yes to "is this document valid against this schema?", for the keywords the shipped
contracts schema uses, so that a valid spec file is not walked by jsonschema, which took half of
a 10 000-contract catalogue's load (a validator object made for every node it descends into).

`compile_schema` turns a schema into one test function, or None where the schema has a keyword
it does not know (then jsonschema validates every document). The test never says yes where
jsonschema says no: where it says no, or cannot judge a value the way jsonschema would (an
integer written as `1.0`), jsonschema validates the document and words its errors, exactly as
before. `tests/test_spec.py` holds it to jsonschema's verdict on the shipped files and on
thousands of broken copies of them.

Must not know: how documents are loaded, contracts, onnxruntime.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from conformance.errors import KitException

Test = Callable[[Any], bool]

# Keywords that say nothing of a document's validity.
ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples"})


class Unsupported(KitException):
    """A keyword, or a form of one, the quick test does not judge."""


def compile_schema(schema: Any) -> Test | None:
    """`schema`'s test (True: the document is valid), or None where it uses what the quick
    test does not judge. Local `$defs` must be inlined first (schema.inline_local_refs): a
    `$ref` left is not judged."""
    try:
        return _compile(schema)
    except Unsupported:
        return None


def _compile(schema: Any) -> Test:
    if schema is True:
        return _always
    if schema is False:
        return _never
    if not isinstance(schema, dict):
        raise Unsupported(f"a schema that is a {type(schema).__name__}")
    unknown = set(schema) - ANNOTATIONS - set(_KEYWORDS)
    if unknown:
        raise Unsupported(", ".join(sorted(unknown)))
    tests = [_KEYWORDS[key](value, schema) for key, value in schema.items() if key in _KEYWORDS]
    tests = [test for test in tests if test is not _always]
    if not tests:
        return _always
    return _all_of(tests)


def _all_of(tests: list[Test]) -> Test:
    if len(tests) == 1:
        return tests[0]
    if len(tests) == 2:  # the common case (a type and one more), without a loop
        first, second = tests
        return lambda value: first(value) and second(value)

    def test(value: Any) -> bool:
        for each in tests:
            if not each(value):
                return False
        return True

    return test


def _always(value: Any) -> bool:
    return True


def _never(value: Any) -> bool:
    return False


# As jsonschema's Draft 2020-12 type checker, except that a float is never an integer here
# (jsonschema takes 1.0 for one): the quick test may say no where jsonschema says yes, never
# the reverse. bool is an int to Python, never a number or an integer to JSON Schema.
_TYPES: dict[str, Test] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _type(names: Any, schema: dict[str, Any]) -> Test:
    wanted = [names] if isinstance(names, str) else names
    if not isinstance(wanted, list) or any(name not in _TYPES for name in wanted):
        raise Unsupported(f"type {names!r}")
    tests = [_TYPES[name] for name in wanted]
    return tests[0] if len(tests) == 1 else (lambda v: any(test(v) for test in tests))


def _properties(properties: Any, schema: dict[str, Any]) -> Test:
    if not isinstance(properties, dict):
        raise Unsupported("properties that are not a mapping")
    tests = {name: _compile(sub) for name, sub in properties.items()}

    def test(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        for name, sub in tests.items():
            if name in value and not sub(value[name]):
                return False
        return True

    return test


def _additional_properties(additional: Any, schema: dict[str, Any]) -> Test:
    known = frozenset(schema.get("properties", {}))
    if additional is True:
        return _always
    if additional is False:
        return lambda v: not isinstance(v, dict) or known.issuperset(v)
    sub = _compile(additional)
    return lambda v: not isinstance(v, dict) or all(sub(item) for key, item in v.items() if key not in known)


def _required(names: Any, schema: dict[str, Any]) -> Test:
    if not isinstance(names, list):
        raise Unsupported("required that is not a list")
    wanted = frozenset(names)
    return lambda v: not isinstance(v, dict) or v.keys() >= wanted


def _pattern(pattern: Any, schema: dict[str, Any]) -> Test:
    compiled = re.compile(pattern)  # jsonschema's own: re.search, anywhere in the string
    return lambda v: not isinstance(v, str) or compiled.search(v) is not None


def _min_length(least: Any, schema: dict[str, Any]) -> Test:
    return lambda v: not isinstance(v, str) or len(v) >= least


def _min_items(least: Any, schema: dict[str, Any]) -> Test:
    return lambda v: not isinstance(v, list) or len(v) >= least


def _min_properties(least: Any, schema: dict[str, Any]) -> Test:
    return lambda v: not isinstance(v, dict) or len(v) >= least


def _items(items: Any, schema: dict[str, Any]) -> Test:
    if isinstance(items, list):
        raise Unsupported("items as a list (prefixItems)")
    sub = _compile(items)

    def test(value: Any) -> bool:
        if not isinstance(value, list):
            return True
        for item in value:
            if not sub(item):
                return False
        return True

    return test


def _enum(values: Any, schema: dict[str, Any]) -> Test:
    # Strings only: jsonschema's equality sets true apart from 1 and 1 from 1.0, which an `in`
    # over other values would not; a string equals only the same string.
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise Unsupported("enum of values other than strings")
    allowed = frozenset(values)
    return lambda v: isinstance(v, str) and v in allowed


_KEYWORDS: dict[str, Callable[[Any, dict[str, Any]], Test]] = {
    "type": _type,
    "properties": _properties,
    "additionalProperties": _additional_properties,
    "required": _required,
    "pattern": _pattern,
    "minLength": _min_length,
    "minItems": _min_items,
    "minProperties": _min_properties,
    "items": _items,
    "enum": _enum,
}
