"""onnxruntime's own EP conformance invariants (PR 28968) carried over: the checks of
`conformance/checks/ep_device.py` pass on a correct EP and fail where the invariant is broken;
the mapping of every invariant onto the contracts (`conformance/catalogue/upstream_invariants.yaml`)
names only contracts that exist and says why for each one the public API cannot reach, and
docs/contracts.md carries it."""

from __future__ import annotations

import onnxruntime as ort
import pytest

from conformance.catalogue import upstream
from conformance.catalogue.markdown import render
from conformance.catalogue.spec import load_catalogue
from conformance.checks import known_checks
from conformance.engine.runner import Runner
from conformance.outcomes import Outcome


@pytest.fixture(scope="module")
def runner(tmp_path_factory) -> Runner:
    """The CPU EP's checks, run in this process; each test's stand-ins are undone by monkeypatch."""
    return Runner("cpu", models_dir=str(tmp_path_factory.mktemp("upstream-models")))


def outcome(runner, contract: str, **params) -> tuple[Outcome, str]:
    result = runner.run(contract, 0, params)
    return Outcome(result["outcome"]), result["message"]


class Relisted:
    """An EP device whose `changed` query answers otherwise on each new listing."""
    listings = 0

    def __init__(self, device, changed: str):
        self._device, self._changed = device, changed

    def __getattr__(self, name):
        value = getattr(self._device, name)
        return {"listing": str(Relisted.listings)} if name == self._changed else value


def test_the_carried_over_checks_pass_on_the_cpu_ep(runner):
    assert outcome(runner, "ep-device.name-stable")[0] is Outcome.PASS
    assert outcome(runner, "ep-device.queries-stable")[0] is Outcome.PASS


def test_an_ep_whose_devices_come_and_go_or_whose_sessions_name_another_ep_breaks_name_stable(runner, monkeypatch):
    ctx = runner.context(0)
    listed = ort.get_ep_devices
    calls = iter(range(100))
    monkeypatch.setattr(ort, "get_ep_devices", lambda: listed() if next(calls) % 2 == 0 else [])
    result, message = outcome(runner, "ep-device.name-stable")
    assert result is Outcome.FAIL and "lists 1 then 0 devices" in message, message
    monkeypatch.setattr(ort, "get_ep_devices", listed)

    class Renamed:
        def get_providers(self):
            return ["SomeOtherName", "CPUExecutionProvider"]

    monkeypatch.setattr(ctx, "create_session", lambda model, device=None: Renamed())
    result, message = outcome(runner, "ep-device.name-stable")
    assert result is Outcome.FAIL and "lists its providers as ['SomeOtherName'" in message, message


def test_a_query_that_answers_otherwise_on_a_second_listing_breaks_queries_stable(runner, monkeypatch):
    listed = ort.get_ep_devices

    def relisting():
        Relisted.listings += 1
        return [Relisted(d, "ep_metadata") for d in listed()]

    monkeypatch.setattr(ort, "get_ep_devices", relisting)
    result, message = outcome(runner, "ep-device.queries-stable")
    assert result is Outcome.FAIL and "answers ep_metadata differently" in message, message


def _advertise(monkeypatch, ctx, info) -> None:
    monkeypatch.setattr(ctx, "memory_info", lambda kind: info)
    from conformance.facts import MemoryFacts

    monkeypatch.setattr(ctx, "memory_facts", lambda kind: MemoryFacts(info.name, device_id=0, vendor_id=0xBEEF, device_mem_type="default", device_type="gpu"))
    monkeypatch.setattr(ctx, "require_memory", lambda kind: None)


def test_a_nameless_memory_info_or_one_buffer_twice_breaks_allocator_well_formed(runner, monkeypatch):
    ctx = runner.context(0)
    nameless = ort.OrtMemoryInfo.create_v2("", ort.OrtMemoryInfoDeviceType.GPU, 0xBEEF, 0, ort.OrtDeviceMemoryType.DEFAULT, 0,
                                           ort.OrtAllocatorType.ORT_DEVICE_ALLOCATOR)
    one = ort.OrtValue.ortvalue_from_shape_and_type([256], 2)
    _advertise(monkeypatch, ctx, nameless)
    monkeypatch.setattr(ctx, "allocate", lambda kind, dtype, shape: ort.OrtValue.ortvalue_from_shape_and_type(list(shape), 2))
    result, message = outcome(runner, "memory-info.allocator-well-formed", memory="default")
    assert result is Outcome.FAIL and message.startswith("the DEFAULT memory info is malformed"), message
    named = ort.OrtMemoryInfo.create_v2("Device", ort.OrtMemoryInfoDeviceType.GPU, 0xBEEF, 0, ort.OrtDeviceMemoryType.DEFAULT, 0,
                                        ort.OrtAllocatorType.ORT_DEVICE_ALLOCATOR)
    _advertise(monkeypatch, ctx, named)
    monkeypatch.setattr(ctx, "allocate", lambda kind, dtype, shape: one)
    result, message = outcome(runner, "memory-info.allocator-well-formed", memory="default")
    assert result is Outcome.FAIL and "2 allocations from the DEFAULT memory info gave" in message, message


def test_every_invariant_is_mapped_onto_contracts_that_exist_or_says_why_it_cannot_be():
    catalogue = load_catalogue(known_checks=known_checks())
    ids = {contract.id for contract in catalogue.contracts}
    invariants = upstream.load()
    assert len(invariants.items) >= 13
    for item in invariants.items:
        assert bool(item.reached_by) != bool(item.not_reached), item
        assert set(item.reached_by) <= ids, item
    markdown = render(catalogue)
    assert "## onnxruntime's own EP conformance invariants" in markdown
    for item in invariants.items:
        assert f"`{item.name}`" in markdown
        if item.not_reached:
            assert item.not_reached.split(".")[0] in markdown


def test_the_ep_context_model_of_a_session_on_the_cpu_ep_holds_no_ep_context_node(runner):
    """The CPU EP compiles nothing: onnxruntime writes no EPContext model, and the case passes on
    the nodes it took with none standing for them."""
    result = runner.run("session.ep-context-model", 0, {"recipe": "add_relu"})
    assert (result["outcome"], result["details"]["evidence"]["ep_context_nodes"]) == ("pass", 0), result["message"]


def test_an_ep_context_node_where_the_ep_compiled_nothing_breaks_the_invariant(runner, monkeypatch):
    """No plugin EP can do this (onnxruntime takes one EPContext node per compiled partition from
    OrtEp::Compile, and refuses a NULL one), so a stand-in writes it: the session's model holds an
    EPContext node though the EP took no node."""
    import onnx
    from onnx import helper

    from conformance.checks import ep_context
    from conformance.testbed import onnx_wire

    ctx = runner.context(0)
    stray = helper.make_node("EPContext", ["x"], ["y"], domain="com.microsoft", source="CPUExecutionProvider")
    graph = helper.make_graph([stray], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    monkeypatch.setattr(ep_context, "read_context_model", lambda path: onnx_wire.read_graph(helper.make_model(graph).SerializeToString()))
    monkeypatch.setattr(ctx, "assignment_of", lambda session: {"OtherExecutionProvider": ["Relu"]})
    result, message = outcome(runner, "session.ep-context-model", recipe="relu")
    assert result is Outcome.FAIL
    assert message.startswith("the EPContext model has 1 EPContext nodes, but CPUExecutionProvider took no node"), message


def test_an_ep_context_model_that_is_not_onnx_breaks_the_contract(runner, monkeypatch, tmp_path):
    """A file where the EPContext model should be that does not read as ONNX is a failure of
    what wrote it, never an error of the kit."""
    from conformance.checks import ep_context

    garbage = tmp_path / "ctx.onnx"
    garbage.write_bytes(b"\x3a\x05ab")  # a graph field cut short
    monkeypatch.setattr(ep_context, "read_context_model", lambda path, real=ep_context.read_context_model: real(str(garbage)))
    monkeypatch.setattr(runner.context(0), "assignment_of", lambda session: {"CPUExecutionProvider": ["Relu"]})
    result, message = outcome(runner, "session.ep-context-model", recipe="relu")
    assert result is Outcome.FAIL
    assert message.startswith("the EPContext model the session wrote is not an ONNX model: field 7 runs past the end"), message


def test_ep_context_nodes_that_name_another_ep_break_the_contract(refdev_library, tmp_path):
    """refdev compiles each node it takes and writes an EPContext node for it; naming another EP
    as their source (ORT_REFDEV_EP_CONTEXT_SOURCE) is caught, and the reproducer fails alone."""
    import json
    import os
    import subprocess
    import sys

    from conftest import conformance_run

    (tmp_path / "good").mkdir()
    (tmp_path / "bad").mkdir()
    good = conformance_run(tmp_path / "good", "--ep-library", str(refdev_library), "--ep", "refdev", "-k", "ep-context").report
    assert {(r["outcome"], r["details"]["evidence"]["ep_context_nodes"]) for r in good["results"]} == {("pass", 1), ("pass", 2)}
    broken = conformance_run(tmp_path / "bad", "--ep-library", str(refdev_library), "--ep", "refdev", "-k", "ep-context",
                             env={"ORT_REFDEV_EP_CONTEXT_SOURCE": "QNNExecutionProvider"})
    results = json.loads((broken.reports / "report.json").read_text())["results"]
    assert {r["outcome"] for r in results} == {"fail"}
    assert all(r["message"] == "EPContext nodes written by a session on RefDevExecutionProvider name another EP as their source: QNNExecutionProvider"
               for r in results)
    (script, _) = sorted((broken.reports / "repro").glob("session.ep-context-model_*.py"))
    run = {name: subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                                env={**os.environ, **extra})
           for name, extra in (("broken", {"ORT_REFDEV_EP_CONTEXT_SOURCE": "QNNExecutionProvider"}), ("good", {}))}
    assert run["broken"].returncode == 1 and "name another EP as their source" in run["broken"].stderr, run["broken"].stderr[-1500:]
    assert run["good"].returncode == 0, run["good"].stderr[-1500:]
