"""A pass proves its statement: every check records what it proved (details["evidence"]), a pass
that recorded nothing is an error, the cases that can prove nothing on an EP are not_applicable
with the reason, and a session run that onnxruntime retried on another EP is a failure naming
the EP's error, never a pass.

The runs here are of the CPU EP; the reference EP's kernel-fails mode is in tests/test_refdev.py.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from onnxruntime.capi import onnxruntime_pybind11_state as C

from conformance import proofs
from conformance.checks import CHECKS
from conformance.outcomes import Outcome
from conformance.report.schema import report_problems
from conformance.engine.runner import NO_EVIDENCE, Runner


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    return Runner("cpu", models_dir=str(tmp_path_factory.mktemp("models")))


@pytest.fixture
def ctx(runner, monkeypatch):
    context = runner.context(0)
    monkeypatch.setattr(context.sessions, "_sessions", {})  # each test makes its own sessions
    return context


def replace_check(monkeypatch, check_id: str, function) -> None:
    monkeypatch.setitem(CHECKS, check_id, dataclasses.replace(CHECKS[check_id], function=function))


# --- the runner's rule ---------------------------------------------------------------------

def test_a_pass_that_recorded_nothing_is_an_error(runner, monkeypatch):
    def proves_nothing(ctx, **params):
        yield from ()

    replace_check(monkeypatch, "memory-info.declaration", proves_nothing)
    result = runner.run("memory-info.declaration", 0, {})
    assert (result["outcome"], result["message"]) == ("error", NO_EVIDENCE)


def test_a_pass_carries_what_its_check_proved(runner, monkeypatch):
    def proves(ctx, **params):
        ctx.prove(proofs.ADDRESS_KEPT, True)
        ctx.tally(proofs.BYTES_COMPARED, 24)
        ctx.tally(proofs.BYTES_COMPARED, 36)
        ctx.prove_item(proofs.MEMORY, "source", "plain CPU memory")
        yield from ()

    replace_check(monkeypatch, "memory-info.declaration", proves)
    result = runner.run("memory-info.declaration", 0, {})
    assert result["outcome"] == "pass"
    assert result["details"]["evidence"] == {"address_kept": True, "bytes_compared": 60, "memory": {"source": "plain CPU memory"}}


def test_a_check_that_proves_a_value_of_the_wrong_type_is_an_error_of_the_kit(runner, monkeypatch):
    def proves_a_word(ctx, **params):
        ctx.prove(proofs.ADDRESS_KEPT, "yes")
        yield from ()

    replace_check(monkeypatch, "memory-info.declaration", proves_a_word)
    result = runner.run("memory-info.declaration", 0, {})
    assert result["outcome"] == "error" and "ProofTypeError: evidence 'address_kept' takes bool, not str" in result["message"], result


def test_what_one_check_proved_is_not_carried_into_the_next(runner, monkeypatch):
    def proves(ctx, **params):
        ctx.prove(proofs.ADDRESS_KEPT, True)
        yield from ()

    def proves_nothing(ctx, **params):
        yield from ()

    replace_check(monkeypatch, "memory-info.declaration", proves)
    assert runner.run("memory-info.declaration", 0, {})["outcome"] == "pass"
    replace_check(monkeypatch, "memory-info.declaration", proves_nothing)
    assert runner.run("memory-info.declaration", 0, {})["outcome"] == "error"


def test_every_pass_of_a_cpu_run_says_what_it_proved_and_the_report_keeps_it(cpu_reports):
    report = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    passes = [r for r in report["results"] if r["outcome"] == "pass"]
    assert len(passes) > 100
    assert [r["nodeid"] for r in passes if not r.get("details", {}).get("evidence")] == []
    assert not [r for r in report["results"] if r["outcome"] == "error"]
    # Evidence is counts and names, not byte dumps: a small part of the report.
    assert len(json.dumps([r["details"]["evidence"] for r in passes])) < 400 * len(passes)
    assert report_problems(report) == []
    broken = json.loads(json.dumps(report))
    next(r for r in broken["results"] if r["outcome"] == "pass")["details"]["evidence"] = {}
    assert any("evidence" in p for p in report_problems(broken))


def test_a_session_check_proves_the_nodes_ran_on_the_ep_and_the_bytes(runner):
    result = runner.run("session.nodes-on-ep", 0, {"recipe": "add", "dtype": "float32"})
    assert result["outcome"] == "pass"
    assert result["details"]["evidence"] == {"nodes_on_ep": ["Add"], "runs_on_ep": 1, "bytes_compared": 3 * 5 * 4}


# --- cases that prove nothing on this EP -----------------------------------------------------

@pytest.mark.parametrize("contract, recipe", [("memory-info.session-inputs", "passthrough"), ("memory-info.session-outputs", "passthrough"),
                                              ("memory-info.session-outputs", "initializer_output")])
def test_session_memory_of_a_model_without_a_node_is_not_applicable(runner, contract, recipe):
    result = runner.run(contract, 0, {"recipe": recipe, "dtype": "float32"})
    assert (result["outcome"], result["message"]) == ("not_applicable", f"model '{recipe}' has no node: the EP places none of its values, onnxruntime does")


def test_session_memory_of_a_model_with_nodes_names_the_memory_seen(runner):
    result = runner.run("memory-info.session-inputs", 0, {"recipe": "add", "dtype": "float32"})
    assert result["outcome"] == "pass"
    memory = result["details"]["evidence"]["memory"]
    assert len(memory) == 2 and all(name.startswith("input ") and label.startswith("Cpu") for name, label in memory.items()), memory
    assert result["details"]["evidence"]["nodes_on_ep"] == ["Add"]


def test_update_inplace_directions_that_are_one_cpu_copy_are_counted_once(runner):
    outcomes = {direction: runner.run("update-inplace.from-ortvalue", 0, {"direction": direction, "dtype": "float32", "shape": "7x13"})
                for direction in ("cpu>default", "default>cpu", "default>default")}
    for direction in ("cpu>default", "default>cpu"):
        assert outcomes[direction]["outcome"] == "not_applicable"
        assert "is the same CPU-to-CPU copy as default>default" in outcomes[direction]["message"]
    counted = outcomes["default>default"]
    assert counted["outcome"] == "pass"
    assert counted["details"]["evidence"]["address_kept"] is True
    assert counted["details"]["evidence"]["bytes_compared"] == 7 * 13 * 4


class RefusingDevice:
    """An EP device whose create_sync_stream is refused, as WebGPU's is."""

    def __init__(self, device):
        self._device = device

    def __getattr__(self, name):
        return getattr(self._device, name)

    def create_sync_stream(self):
        raise RuntimeError("ep_device does not support streams")


def test_a_sync_stream_a_device_ep_refuses_is_not_applicable(runner, ctx, monkeypatch):
    # The CPU EP's DEFAULT memory is CPU memory: its refusal is the contract's first half, a pass.
    result = runner.run("streams.sync-stream", 0, {})
    assert result["outcome"] == "pass" and result["details"]["evidence"]["refused"]
    monkeypatch.setattr(ctx, "device", RefusingDevice(ctx.device))
    monkeypatch.setattr(ctx, "is_cpu_memory", lambda kind: False)  # a device EP
    result = runner.run("streams.sync-stream", 0, {})
    assert result["outcome"] == "not_applicable"
    assert result["message"] == "CPUExecutionProvider is not stream-aware: create_sync_stream() refused (ep_device does not support streams)"


# --- no silent retry -------------------------------------------------------------------------

KERNEL_ERROR = "Non-zero status code returned while running Relu node. Status Message: the kernel failed"


class FailingRuns:
    """The session's C object, whose runs fail the way a failed EP kernel makes them fail
    (EPFail), until Python's fallback recreates it."""

    def __init__(self, sess):
        self._sess = sess

    def __getattr__(self, name):
        return getattr(self._sess, name)

    def run(self, *args):
        raise C.EPFail(KERNEL_ERROR)


def kernels_fail(monkeypatch, ctx, *, fallback: bool) -> None:
    real = ctx.create_session

    def create(model, device=None):
        session = real(model, device)
        session._sess = FailingRuns(session._sess)
        if fallback:
            session.enable_fallback()  # what the kit's sessions must not have
        return session

    monkeypatch.setattr(ctx, "create_session", create)


def test_a_failed_kernel_fails_the_check_with_its_error(runner, ctx, monkeypatch):
    kernels_fail(monkeypatch, ctx, fallback=False)
    result = runner.run("session.nodes-on-ep", 0, {"recipe": "relu", "dtype": "float32"})
    assert result["outcome"] == "fail"
    assert result["message"].startswith("onnxruntime raised while running model 'relu' (float32) with inputs in CPU memory: EPFail:")
    assert KERNEL_ERROR in result["message"]


@pytest.mark.filterwarnings("ignore:Specified 'providers'")  # onnxruntime's own fallback, remaking the session
def test_a_retry_on_another_ep_observed_anyway_fails_naming_the_kernels_error(runner, ctx, monkeypatch, capsys):
    kernels_fail(monkeypatch, ctx, fallback=True)
    result = runner.run("session.nodes-on-ep", 0, {"recipe": "relu", "dtype": "float32"})
    assert result["outcome"] == "fail", result
    assert result["message"] == f"a run of model 'relu' failed on CPUExecutionProvider and onnxruntime retried it on CPUExecutionProvider: {KERNEL_ERROR}"
    assert "Falling back" not in capsys.readouterr().out  # the log was the kit's to read, not the worker's stdout
    # The session that was moved to the CPU EP is not shared with later checks.
    assert not ctx.sessions._sessions


def test_a_retry_seen_only_in_the_providers_fails_too(runner, ctx, monkeypatch):
    real = ctx.create_session

    def create(model, device=None):
        session = real(model, device)
        session.get_providers = lambda: ["SomeOtherExecutionProvider"]  # the session was remade elsewhere
        return session

    monkeypatch.setattr(ctx, "create_session", create)
    monkeypatch.setattr(ctx, "require_nodes_on_ep", lambda info: [])
    result = runner.run("session.nodes-on-ep", 0, {"recipe": "relu", "dtype": "float32"})
    assert result["outcome"] == "fail"
    assert result["message"] == ("a run of model 'relu' failed on CPUExecutionProvider and onnxruntime retried it on SomeOtherExecutionProvider: "
                                 "(the EP's error was not logged)")


def test_the_kits_sessions_and_their_reproducers_disable_fallback(runner, ctx):
    from conformance.testbed import tensors

    info = ctx.session("relu", tensors.DTYPES["float32"], (3, 5))
    assert info.session._enable_fallback is False
    assert "enable_fallback=0" in ctx.session_snippet(info.model_path) and "s.disable_fallback()" in ctx.session_snippet(info.model_path)
    assert Outcome(runner.run("session.nodes-on-ep", 0, {"recipe": "relu", "dtype": "float32"})["outcome"]) is Outcome.PASS
