"""The kit's exceptions share one root, and spec errors cross from a worker to pytest's process as
data (file, line, column, key, message), never as text split back into lines."""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path

from conformance.engine.serve import Handler
from conformance.errors import KitError, KitException, SpecError, SpecErrors
from conformance.findings import CallQuarantined
from conformance.isolation.controller import WorkerRefused

PACKAGE = Path(__file__).resolve().parents[1] / "conformance"


def _kit_exceptions() -> list[type[BaseException]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        module = importlib.import_module(name)
        found += [cls for _, cls in inspect.getmembers(module, inspect.isclass) if issubclass(cls, BaseException) and cls.__module__ == name]
    return found


def test_every_exception_of_the_kit_derives_from_its_root():
    exceptions = _kit_exceptions()
    assert len(exceptions) >= 20, exceptions  # the walk found them (WorkerLost, SpecErrors, NotRun, ...)
    assert [cls.__qualname__ for cls in exceptions if not issubclass(cls, KitException)] == []


def test_the_kits_errors_are_caught_as_errors_and_its_one_signal_is_not():
    assert issubclass(SpecErrors, Exception) and issubclass(SpecErrors, KitError)
    assert issubclass(CallQuarantined, KitException) and not issubclass(CallQuarantined, Exception)


def test_a_spec_error_round_trips_through_its_wire_dict():
    error = SpecError("specs/contracts/copy.yaml", 12, 5, "contracts[0].check", "unknown check 'copy.nope'")
    assert SpecError.from_wire(json.loads(json.dumps(error.to_wire()))) == error


def test_spec_errors_a_worker_finds_reach_the_parent_as_data():
    """The worker's answer to init carries each error's wire dict; the parent's WorkerRefused
    holds them as SpecError, whatever the text of the message (here one with a line break)."""
    errors = [SpecError("my.yaml", 3, 7, "contracts[0].check", "unknown check 'x'\n(did you mean 'y'?)"),
              SpecError("my.yaml", 9, 1, "", "duplicate contract id 'a.b'")]

    def handed():
        raise SpecErrors(errors)

    reply = Handler(handed=handed).handle({"op": "init", "ep": "cpu", "handover": True})
    refused = WorkerRefused.from_reply(json.loads(json.dumps(reply)))
    assert refused.kind == "SpecErrors" and list(refused.errors) == errors
