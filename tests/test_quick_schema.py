"""The quick schema test (conformance/catalogue/quick_schema.py) against jsonschema's verdict:
it may leave a document to jsonschema, it must never pass one jsonschema refuses."""

from __future__ import annotations

import copy
from typing import Any, Iterator

import pytest
import yaml

from conformance.catalogue import quick_schema, schema
from conformance.catalogue.spec import load_catalogue
from conformance.data import shipped_spec_dirs

CONTRACT_FILES = sorted(p for folder in shipped_spec_dirs() for p in folder.rglob("*.yaml")
                        if "contracts" in (yaml.safe_load(p.read_text(encoding="utf-8")) or {}))

# What a broken spec puts where a value belongs: each type, empty ones, and near misses.
REPLACEMENTS = [None, True, False, 0, 1, -1, 1.0, 2.5, "", "x", "bad id", "1.22", [], ["x"], [1], {}, {"zz": 1}]


def quick_test():
    test = schema.quick_tests()[schema.CONTRACTS_SCHEMA]
    assert test is not None, "the contracts schema uses only what the quick test judges"
    return test


def jsonschema_valid(document: Any) -> bool:
    return schema.validators()[schema.CONTRACTS_SCHEMA].is_valid(document)


def paths_of(node: Any, at: tuple = ()) -> Iterator[tuple]:
    yield at
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths_of(value, (*at, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from paths_of(value, (*at, index))


def replaced(document: Any, path: tuple, value: Any) -> Any:
    changed = copy.deepcopy(document)
    if not path:
        return value
    parent = changed
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return changed


def mutations(document: dict[str, Any]) -> Iterator[Any]:
    """Every value replaced by each of REPLACEMENTS, every key removed, and an unknown key added
    to every mapping."""
    for path in paths_of(document):
        for value in REPLACEMENTS:
            yield replaced(document, path, value)
        target = document
        for step in path:
            target = target[step]
        if isinstance(target, dict):
            for key in target:
                yield replaced(document, path, {k: v for k, v in target.items() if k != key})
            yield replaced(document, path, {**target, "unknown_key": "x"})
        if isinstance(target, list) and target:
            yield replaced(document, path, target[:-1])


@pytest.mark.parametrize("path", CONTRACT_FILES, ids=lambda p: p.name)
def test_every_shipped_contract_file_passes_the_quick_test_and_jsonschema(path):
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert quick_test()(document) and jsonschema_valid(document)


@pytest.mark.parametrize("path", CONTRACT_FILES, ids=lambda p: p.name)
def test_the_quick_test_passes_no_broken_copy_that_jsonschema_refuses(path):
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document["contracts"] = document["contracts"][:2]  # each contract has the same keys: two show every kind of place
    refused = 0
    for mutated in mutations(document):
        quick, valid = quick_test()(mutated), jsonschema_valid(mutated)
        assert valid or not quick, f"the quick test passed what jsonschema refuses: {mutated}"
        # Nor does it leave to jsonschema what jsonschema passes: the one thing it would, a
        # float where an integer belongs (1.0), has no place in the contracts schema.
        assert quick or not valid, f"the quick test refused what jsonschema passes: {mutated}"
        refused += not valid
    assert refused > 100, "the copies break the schema in many ways"


def test_a_keyword_the_quick_test_does_not_know_leaves_every_document_to_jsonschema():
    assert quick_schema.compile_schema({"type": "object", "oneOf": [{"required": ["a"]}]}) is None
    assert quick_schema.compile_schema({"items": [{"type": "string"}]}) is None
    assert quick_schema.compile_schema({"enum": [1, "a"]}) is None  # jsonschema's equality tells true from 1
    assert quick_schema.compile_schema({"$ref": "#/$defs/x"}) is None
    assert schema.quick_tests()[schema.EP_SCHEMA] is None  # oneOf, if/then, uniqueItems: jsonschema alone


@pytest.mark.parametrize("value, valid", [(1, True), (1.0, False), (True, False), ("1", False), (None, False)])
def test_the_quick_integer_is_json_schemas_except_that_it_never_takes_a_float(value, valid):
    test = quick_schema.compile_schema({"type": "integer"})
    assert test is not None and test(value) is valid


def test_a_catalogue_the_quick_test_passes_loads_as_jsonschema_alone_loads_it(monkeypatch):
    quick = load_catalogue([str(p) for p in shipped_spec_dirs()])
    monkeypatch.setattr(schema, "_QUICK_TESTS", dict.fromkeys(schema.quick_tests()))  # no quick test: jsonschema for every file
    assert load_catalogue([str(p) for p in shipped_spec_dirs()]) == quick
