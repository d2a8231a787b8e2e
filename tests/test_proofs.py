"""What a check can prove is declared (conformance/proofs.py): each name once, every check proves
under a declared key with a value of its type, and evidence read back from a file keeps what is
declared and of its type, dropping the rest without raising."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from conformance import proofs
from conformance.checks.context.evidence import Evidence
from conformance.outcomes import Details, growth_properties
from conformance.proofs import DECLARED, GrowthCurve, Proof, ProofTypeError, Proven
from conformance.data import schemas_dir

PACKAGE = Path(proofs.__file__).parent
CURVE = GrowthCurve((100, 200, 300), (1000, 1100, 1250), 1.2, "process RSS", "bytes", "copy", 1200, 4096.0, 0, False)
# A value of each plain type a key may declare, for the round trip below.
SAMPLES = {bool: True, int: 3, float: 0.25, str: "plain CPU memory", list: ["Add"], dict: {"calls": 4}, GrowthCurve: CURVE}


def _proof_calls() -> list[tuple[str, int, ast.Call]]:
    """Every call of prove, prove_item and tally in the kit, with where it is."""
    calls = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("prove", "prove_item", "tally"):
                calls.append((str(path.relative_to(PACKAGE)), node.lineno, node))
    return calls


def test_every_evidence_name_is_declared_once_and_every_declaration_is_proved_somewhere():
    keys = [value for value in vars(proofs).values() if isinstance(value, Proof)]
    names = [key.name for key in keys]
    assert sorted(name for name in names if names.count(name) > 1) == []
    assert sorted(DECLARED) == sorted(names) and all(DECLARED[key.name] is key for key in keys)
    assert all(key.meaning and key.types for key in keys)
    used = {node.attr for path in PACKAGE.rglob("*.py") if path.name != "proofs.py" for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "proofs"}
    imported = {alias.name for path in PACKAGE.rglob("*.py") for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.ImportFrom) and node.module == "conformance.proofs" for alias in node.names}
    unused = sorted(attr for attr, value in vars(proofs).items() if isinstance(value, Proof) and attr not in used | imported)
    assert unused == []


def test_no_check_proves_under_a_bare_name():
    bare = [f"{path}:{line}" for path, line, call in _proof_calls() if call.args and isinstance(call.args[0], ast.Constant)]
    assert bare == []


@pytest.mark.parametrize("key, value", [(proofs.ADDRESS_KEPT, "yes"), (proofs.BYTES_COMPARED, True), (proofs.BYTES_COMPARED, 1.5),
                                        (proofs.STREAM_CREATED, 1), (proofs.MEMORY, 7), (proofs.GROWTH, {"rss": CURVE.to_wire()}),
                                        (proofs.ALLOCATION_SECONDS, {"DEFAULT #1": "slow"})])
def test_proving_a_value_of_the_wrong_type_is_the_kits_defect(key, value):
    with pytest.raises(ProofTypeError, match=key.name):
        Evidence().prove(key, value)


def test_a_bare_name_an_undeclared_key_and_a_wrong_item_are_refused_too():
    evidence = Evidence()
    with pytest.raises(ProofTypeError, match="key of conformance.proofs"):
        evidence.prove("address_kept", True)
    with pytest.raises(ProofTypeError, match="key of conformance.proofs"):
        evidence.prove(Proof("address_kept", str, "a twin of the declared key"), "yes")
    with pytest.raises(ProofTypeError, match="as an item"):
        evidence.prove_item(proofs.ADDRESS_KEPT, "destination", True)  # no items: proved whole
    with pytest.raises(ProofTypeError, match="as an item"):
        evidence.prove_item(proofs.MEMORY, "destination", 3)
    evidence.prove(proofs.MEMORY, "DEFAULT")
    with pytest.raises(ProofTypeError, match="proved whole"):
        evidence.prove_item(proofs.MEMORY, "destination", "DEFAULT")
    with pytest.raises(ProofTypeError, match="key of conformance.proofs"):
        Proven({"bytes_compared": 4})
    with pytest.raises(ProofTypeError, match="takes int"):
        Proven({proofs.BYTES_COMPARED: "4"})
    assert not evidence.proven().get(proofs.ADDRESS_KEPT) and evidence.proven().get(proofs.MEMORY) == "DEFAULT"


def test_what_a_check_proved_is_read_by_key_as_its_declared_type():
    evidence = Evidence()
    evidence.prove(proofs.ADDRESS_KEPT, True)
    evidence.tally(proofs.BYTES_COMPARED, 24)
    evidence.tally(proofs.BYTES_COMPARED, 36)
    evidence.prove_item(proofs.MEMORY, "source", "plain CPU memory")
    evidence.prove(proofs.GROWTH, {"rss": CURVE})
    proven = evidence.proven()
    assert proven.get(proofs.BYTES_COMPARED) == 60 and proven.get(proofs.STREAM_CREATED) is None
    assert proven.get(proofs.GROWTH) == {"rss": CURVE} and proofs.MEMORY in proven and "memory" not in proven
    assert proven.to_wire() == {"address_kept": True, "bytes_compared": 60, "memory": {"source": "plain CPU memory"},
                                "growth": {"rss": CURVE.to_wire()}}


@pytest.mark.parametrize("key", DECLARED.values(), ids=DECLARED)
def test_every_declared_item_round_trips_through_json_as_the_value_it_is(key):
    value = {"one": SAMPLES[key.items[0]]} if key.items and dict in key.types else SAMPLES[key.types[0]]
    details = Details(evidence=Proven({key: value}))
    wire = json.loads(json.dumps(details.to_wire()))
    assert Details.from_wire(wire) == details and Details.from_wire(wire).evidence.get(key) == value


def test_the_curve_keeps_report_jsons_shape():
    schema = json.loads((schemas_dir() / "report.schema.json").read_text())
    growth = schema["$defs"]["result"]["properties"]["details"]["properties"]["evidence"]["properties"]["growth"]["additionalProperties"]
    assert list(CURVE.to_wire()) == list(growth["properties"]) and set(growth["required"]) <= set(CURVE.to_wire())
    assert GrowthCurve.from_wire(CURVE.to_wire()) == CURVE
    assert growth_properties(Details(evidence=Proven({proofs.GROWTH: {"rss": CURVE}}))) == [
        ("growth.rss.slope_per_call", "1.2"), ("growth.rss.per_1000_calls", "1200")]


@pytest.mark.parametrize("hostile", [None, "x", [1], 3, {"address_kept": "yes"}, {"bytes_compared": True}, {"unknown": 1},
                                     {"growth": {"rss": "x"}}, {"growth": {"rss": {"calls": [1, "<script>"], "values": [1, 2], "slope_per_call": 1}}},
                                     {"growth": {"rss": {"calls": [1, 2], "values": [1], "slope_per_call": 1}}}, {"growth": [CURVE.to_wire()]},
                                     {"memory": 5}, {"memory": ["DEFAULT"]}, {"stream_created": "no"}, {"runs": False}])
def test_a_hostile_or_older_evidence_value_is_dropped_never_raised(hostile):
    proven = Details.from_wire({"evidence": hostile}).evidence
    assert proven.get(proofs.ADDRESS_KEPT) is None and proven.get(proofs.BYTES_COMPARED) is None and proven.get(proofs.MEMORY) is None
    assert not proven.get(proofs.GROWTH) and proven.get(proofs.STREAM_CREATED) is None and proven.get(proofs.RUNS) is None


def test_what_is_declared_and_of_its_type_is_kept_beside_what_is_dropped():
    wire = {"bytes_compared": 7, "address_kept": "yes", "unknown": 1, "memory": {"source": "plain CPU memory", "destination": 3},
            "growth": {"rss": CURVE.to_wire(), "junk": {"calls": "x"}}}
    proven = Details.from_wire({"evidence": wire}).evidence
    assert proven.to_wire() == {"bytes_compared": 7, "memory": {"source": "plain CPU memory"}, "growth": {"rss": CURVE.to_wire()}}
