"""Checks that the reference EP cannot break are made to fail here, on the CPU EP, by putting a
misbehaving stand-in where onnxruntime's object would be: a session whose inputs claim
HOST_ACCESSIBLE memory, a numpy() that copies, an update_inplace that ignores strides, ...
Each test also shows the same check passing without the stand-in, so it is the stand-in, not
the set-up, that makes it fail.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

from conformance.calls import Call
from conformance.facts import MemoryFacts
from conformance.checks.context import SessionInfo
from conformance.findings import CallQuarantined, NotRun, Violation
from conformance.outcomes import Outcome
from conformance.testbed.eps import memory_facts
from conformance.testbed.tensors import DTYPES
from conformance.engine.runner import Runner, raised_by_onnxruntime_python


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    return Runner("cpu", models_dir=str(tmp_path_factory.mktemp("models")))


@pytest.fixture
def ctx(runner, monkeypatch):
    context = runner.context(0)
    # Each test gets the shared context back unchanged: monkeypatch undoes its stand-ins.
    monkeypatch.setattr(context.sessions, "_sessions", {})
    return context


def run(runner, contract: str, **params) -> tuple[Outcome, str]:
    result = runner.run(contract, 0, params)
    return Outcome(result["outcome"]), result["message"]


def memory_info(name: str, device_memory) -> "ort.OrtMemoryInfo":
    return ort.OrtMemoryInfo.create_v2(name, ort.OrtMemoryInfoDeviceType.GPU, 0xBEEF, 0, device_memory, 0,
                                       ort.OrtAllocatorType.ORT_DEVICE_ALLOCATOR)


class SessionClaiming:
    """A real session whose memory-info queries answer `inputs` / `outputs` instead."""

    def __init__(self, session, inputs=None, outputs=None):
        self._session, self._inputs, self._outputs = session, inputs, outputs

    def __getattr__(self, name):
        return getattr(self._session, name)

    def get_input_memory_infos(self):
        return self._inputs or self._session.get_input_memory_infos()

    def get_output_memory_infos(self):
        return self._outputs or self._session.get_output_memory_infos()


def claim_memory(monkeypatch, ctx, **claims):
    real = ctx.session

    def session(recipe, dtype, shape):
        info = real(recipe, dtype, shape)
        n_in, n_out = len(info.session.get_inputs()), len(info.session.get_outputs())
        claimed = {k: [v] * (n_in if k == "inputs" else n_out) for k, v in claims.items()}
        return SessionInfo(SessionClaiming(info.session, **claimed), info.model_path, info.recipe, info.assignment)

    monkeypatch.setattr(ctx, "session", session)


class SessionComputingZeros(SessionClaiming):
    """A real session whose run answers zeros: the EP computed wrong values."""

    def run(self, outputs, feeds):
        return [np.zeros_like(result) for result in self._session.run(outputs, feeds)]


def computes_zeros(monkeypatch, ctx):
    real = ctx.session

    def session(recipe, dtype, shape):
        info = real(recipe, dtype, shape)
        return SessionInfo(SessionComputingZeros(info.session), info.model_path, info.recipe, info.assignment)

    monkeypatch.setattr(ctx, "session", session)


def reproduce(snippet: str) -> str:
    """What the reproducer prints, run as a user pastes it."""
    completed = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


@pytest.mark.parametrize("contract, make_it_fail", [
    ("session.nodes-on-ep", computes_zeros),
    ("memory-info.session-inputs", lambda monkeypatch, ctx: claim_memory(
        monkeypatch, ctx, inputs=memory_info("FakePinned", ort.OrtDeviceMemoryType.HOST_ACCESSIBLE))),
])
def test_a_failing_session_check_gives_a_reproducer_that_runs_with_the_eps_options(contract, make_it_fail, tmp_path, monkeypatch):
    """The reproducer makes its session as the check did: with the session entries given by
    --ep-option (here one that changes nothing the check sees) and the node assignment recorded."""
    runner = Runner("cpu", options={"session.disable_prepacking": "1"}, models_dir=str(tmp_path))
    ctx = runner.context(0)
    make_it_fail(monkeypatch, ctx)
    result = runner.run(contract, 0, {"recipe": "add", "dtype": "float32"})
    assert result["outcome"] == "fail", result
    reproducer = result["details"]["violations"][0]["reproducer"]
    assert "so.add_session_config_entry('session.disable_prepacking', '1')" in reproducer
    assert reproduce(reproducer)


def test_session_inputs_in_host_accessible_memory_fail(runner, ctx, monkeypatch):
    assert run(runner, "memory-info.session-inputs", recipe="add", dtype="float32")[0] is Outcome.PASS
    claim_memory(monkeypatch, ctx, inputs=memory_info("FakePinned", ort.OrtDeviceMemoryType.HOST_ACCESSIBLE))
    outcome, message = run(runner, "memory-info.session-inputs", recipe="add", dtype="float32")
    assert outcome is Outcome.FAIL
    assert "session input 'a' lives in FakePinned" in message and "host_accessible" in message


def as_plugin_ep_with_host_accessible_memory(runner, ctx, monkeypatch, host_accessible, version: str):
    """The CPU EP's run made to look like a plugin EP's whose EP device advertises
    `host_accessible`, on onnxruntime `version`: what the contested rule of
    memory-info.session-inputs selects on."""
    facts = memory_facts(ort, host_accessible)
    device = dataclasses.replace(runner.facts.devices[0], host_accessible_memory=facts)
    monkeypatch.setattr(runner.target, "facts", dataclasses.replace(
        runner.facts, library="/x/libplugin_ep.so", onnxruntime=dataclasses.replace(runner.facts.onnxruntime, version=version),
        devices=(device, *runner.facts.devices[1:])))
    monkeypatch.setattr(ctx.under_test, "facts", device)
    real = ctx.memory_facts
    monkeypatch.setattr(ctx, "memory_facts", lambda kind: facts if kind == "host_accessible" else real(kind))


def test_session_inputs_in_the_plugin_eps_own_host_accessible_memory_pass_where_the_contested_rule_holds(runner, ctx, monkeypatch):
    """memory-info.session-inputs is contested: onnxruntime >= 1.27 places a plugin EP's CPU
    inputs in its HOST_ACCESSIBLE memory (PR 28037). There they pass; in any other
    HOST_ACCESSIBLE memory, or on an older build, they still fail."""
    own = memory_info("FakePinned", ort.OrtDeviceMemoryType.HOST_ACCESSIBLE)
    as_plugin_ep_with_host_accessible_memory(runner, ctx, monkeypatch, own, "1.27.0")
    claim_memory(monkeypatch, ctx, inputs=own)
    result = runner.run("memory-info.session-inputs", 0, {"recipe": "add", "dtype": "float32"})
    assert result["outcome"] == "pass", result
    assert result["details"]["evidence"]["rule"].startswith("contested:")
    # Another memory than the EP device's own HOST_ACCESSIBLE memory still fails.
    claim_memory(monkeypatch, ctx, inputs=memory_info("OtherPinned", ort.OrtDeviceMemoryType.HOST_ACCESSIBLE))
    outcome, message = run(runner, "memory-info.session-inputs", recipe="add", dtype="float32")
    assert outcome is Outcome.FAIL and "session input 'a' lives in OtherPinned" in message
    # On a build before the change the statement's rule judges: never HOST_ACCESSIBLE.
    as_plugin_ep_with_host_accessible_memory(runner, ctx, monkeypatch, own, "1.26.0")
    claim_memory(monkeypatch, ctx, inputs=own)
    result = runner.run("memory-info.session-inputs", 0, {"recipe": "add", "dtype": "float32"})
    assert result["outcome"] == "fail" and "plain CPU memory or" in result["details"]["violations"][0]["expected"]
    assert "onnxruntime >= 1.27" not in result["details"]["violations"][0]["expected"]


def test_session_outputs_in_another_vendors_memory_fail(runner, ctx, monkeypatch):
    assert run(runner, "memory-info.session-outputs", recipe="identity", dtype="float32")[0] is Outcome.PASS
    claim_memory(monkeypatch, ctx, outputs=memory_info("Elsewhere", ort.OrtDeviceMemoryType.DEFAULT))
    outcome, message = run(runner, "memory-info.session-outputs", recipe="identity", dtype="float32")
    assert outcome is Outcome.FAIL
    assert "session output 'y' lives in Elsewhere" in message


def test_cpu_default_ep_with_device_resident_io_fails(runner, ctx, monkeypatch):
    assert run(runner, "memory-info.cpu-default-io", recipe="identity", dtype="int32")[0] is Outcome.PASS
    claim_memory(monkeypatch, ctx, inputs=memory_info("Device", ort.OrtDeviceMemoryType.DEFAULT))
    outcome, message = run(runner, "memory-info.cpu-default-io", recipe="identity", dtype="int32")
    assert outcome is Outcome.FAIL
    assert "without DEFAULT memory lives in Device" in message


class CopyingValue:
    """A value whose numpy() hands out a fresh copy each time, as a non-aliasing memory would."""

    def __init__(self, shape, dtype):
        self._data = np.zeros(shape, dtype)

    def data_ptr(self):
        return self._data.ctypes.data

    def numpy(self):
        return self._data.copy()


def test_host_accessible_memory_that_numpy_copies_fails(runner, ctx, monkeypatch):
    facts = MemoryFacts("FakeHost", 0, 0xBEEF, "host_accessible", "ort_device_allocator", "cpu_output", "gpu")
    monkeypatch.setattr(ctx.under_test, "facts", dataclasses.replace(ctx.facts, host_accessible_memory=facts))
    # An aliasing value (a plain CPU one) passes ...
    monkeypatch.setattr(ctx, "allocate", lambda kind, dt, shape: ort.OrtValue.ortvalue_from_numpy(np.zeros(shape, dt.storage)))
    assert run(runner, "copy.host-accessible-alias", dtype="float32")[0] is Outcome.PASS
    # ... one whose numpy() copies does not.
    monkeypatch.setattr(ctx, "allocate", lambda kind, dt, shape: CopyingValue(shape, dt.storage))
    outcome, message = run(runner, "copy.host-accessible-alias", dtype="float32")
    assert outcome is Outcome.FAIL
    assert "numpy() of a HOST_ACCESSIBLE value does not alias its memory" in message


class RawBufferUpdate:
    """update_inplace that copies the source's memory from its first byte, ignoring strides."""

    def __init__(self, value):
        self._value = value

    def __getattr__(self, name):
        return getattr(self._value, name)

    def update_inplace(self, source):
        import ctypes

        raw = np.ascontiguousarray(np.lib.stride_tricks.as_strided(source, shape=(source.size,), strides=(source.itemsize,)))
        ctypes.memmove(self._value.data_ptr(), raw.ctypes.data, raw.nbytes)  # into the value's own buffer (a guarded copy of what was placed)


def test_update_inplace_that_ignores_strides_fails(runner, ctx, monkeypatch):
    params = dict(layout="strided", dtype="float32", shape="7x13")
    assert run(runner, "update-inplace.non-contiguous", **params)[0] is Outcome.PASS
    real_place = ctx.place
    monkeypatch.setattr(ctx, "place", lambda storage, kind, dt: RawBufferUpdate(real_place(storage, kind, dt)))
    outcome, message = run(runner, "update-inplace.non-contiguous", **params)
    assert outcome is Outcome.FAIL
    assert message.startswith("strided numpy source: values differ after update_inplace")


class StreamingDevice:
    def __init__(self, device):
        self._device = device

    def __getattr__(self, name):
        return getattr(self._device, name)

    def create_sync_stream(self):
        return object()


def test_sync_stream_on_cpu_default_memory_fails(runner, ctx, monkeypatch):
    assert run(runner, "streams.sync-stream")[0] is Outcome.PASS
    monkeypatch.setattr(ctx, "device", StreamingDevice(ctx.device))
    outcome, message = run(runner, "streams.sync-stream")
    assert outcome is Outcome.FAIL
    assert "succeeded for an EP device whose DEFAULT memory is CPU memory" in message


class CheckingCopy:
    """copy_tensors as onnxruntime should do it, on CPU values: refuses mismatched or mixed
    requests before writing anything, copies the bytes otherwise."""

    def __call__(self, sources, destinations, direction="", stream=None, note=""):
        if not sources or len(sources) != len(destinations):
            raise RuntimeError("Invalid arguments provided to CopyTensors.")
        for source, destination in zip(sources, destinations, strict=True):
            if source.data_type() != destination.data_type() or source.shape() != destination.shape():
                raise RuntimeError("source and destination differ")
        for source, destination in zip(sources, destinations, strict=True):
            destination.update_inplace(source.numpy())


def test_mixed_memory_request_needs_two_memories(runner, ctx, monkeypatch):
    monkeypatch.setattr(ctx, "copy", CheckingCopy())
    outcome, message = run(runner, "copy.bad-requests", request="mixed-memory", direction="cpu>default")
    assert outcome is Outcome.NOT_APPLICABLE and "same memory" in message


def test_bad_copy_request_is_not_applicable_where_a_valid_copy_between_cpu_memories_is_refused(runner, ctx):
    # Plain onnxruntime has no CPU→CPU data transfer, and copy.cpu-default-optional lets an EP
    # whose DEFAULT memory is CPU memory refuse that copy: there is no refusal of a bad request to judge.
    outcome, message = run(runner, "copy.bad-requests", request="size-mismatch", direction="cpu>default")
    assert outcome is Outcome.NOT_APPLICABLE
    assert message.startswith("a valid copy_tensors cpu>default is refused, which copy.cpu-default-optional allows between CPU memories")


@pytest.mark.parametrize("request_kind", ["size-mismatch", "type-mismatch", "unequal-lists", "empty-lists"])
def test_copy_that_accepts_a_bad_request_fails(runner, ctx, monkeypatch, request_kind):
    monkeypatch.setattr(ctx, "copy", CheckingCopy())
    assert run(runner, "copy.bad-requests", request=request_kind, direction="cpu>default")[0] is Outcome.PASS

    def accepting_copy(sources, destinations, direction="", note=""):
        for destination in destinations:
            destination.numpy().reshape(-1).view(np.uint8)[:4] = 0  # writes part of the destination

    monkeypatch.setattr(ctx, "copy", accepting_copy)
    outcome, message = run(runner, "copy.bad-requests", request=request_kind, direction="cpu>default")
    assert outcome is Outcome.FAIL
    assert message.startswith(f"copy_tensors accepted a bad request ({request_kind})")


def test_bad_copy_request_refused_but_written_fails(runner, ctx, monkeypatch):
    checking = CheckingCopy()

    def writes_then_refuses(sources, destinations, direction="", note=""):
        if len(sources) == 1 and sources[0].data_type() == destinations[0].data_type() and sources[0].shape() == destinations[0].shape():
            return checking(sources, destinations)
        destinations[0].numpy().reshape(-1).view(np.uint8)[:4] = 0
        raise RuntimeError("refused, after writing")

    monkeypatch.setattr(ctx, "copy", writes_then_refuses)
    outcome, message = run(runner, "copy.bad-requests", request="unequal-lists", direction="cpu>default")
    assert outcome is Outcome.FAIL
    assert message == "the bad request (unequal-lists) wrote into destination 0 (default memory)"


def test_bad_request_is_not_run_when_valid_values_cannot_be_placed(runner, ctx, monkeypatch):
    def broken_place(storage, kind, dt):
        raise RuntimeError("the EP cannot copy at all")

    monkeypatch.setattr(ctx, "place", broken_place)
    outcome, message = run(runner, "copy.bad-requests", request="type-mismatch", direction="cpu>default")
    assert outcome is Outcome.NOT_RUN
    assert "a valid copy_tensors cpu>default of the same values failed" in message and "placing the values" in message


def test_violations_found_before_a_check_stops_are_kept(runner, ctx):
    def check(ctx):
        yield Violation("first problem")
        raise NotRun("could not go on")

    outcome, message, details = runner._run(check, ctx, {})
    assert outcome is Outcome.FAIL
    assert [v.message for v in details.violations] == ["first problem", "the check stopped after that: could not go on"]


LANDED_LATE = 0x5A5A5A5A5A5A5A5A  # a shape record overwritten by a late copy of RefDev's scrambled zeros (issue 38)


class ReadsOtherwise:
    """A CPU value whose shape and byte size read back as `shape`, as after a copy that landed
    once its call had returned overwrote the value's record."""

    def __init__(self, value, shape):
        self._value, self._shape = value, shape

    def __getattr__(self, name):
        return getattr(self._value, name)

    def shape(self):
        return list(self._shape)

    def tensor_size_in_bytes(self):
        return 4 * int(np.prod(self._shape, dtype=object))


def test_a_value_reading_back_otherwise_than_made_is_the_eps_failure_not_the_kits(runner, ctx):
    def check(ctx):
        value = ctx.place(np.zeros((2, 3), np.float32), "cpu", DTYPES["float32"])
        with ctx.precondition("reading the destination back"):  # not a set-up that failed: the EP's result
            ctx.read(ReadsOtherwise(value, [LANDED_LATE]), "cpu", DTYPES["float32"], (2, 3))
        yield from ()

    outcome, message, details = runner._run(check, ctx, {})
    assert outcome is Outcome.FAIL and details.subject == "ep", message
    (violation,) = details.violations
    assert violation.actual == f"its shape reads [{LANDED_LATE}], made [2, 3]"
    assert violation.expected == "the value as made (float32 [2, 3], 24 bytes)"
    assert message.startswith("a value in cpu memory, made float32 [2, 3], reads back otherwise after the EP's calls")


def test_a_bad_requests_destination_reading_back_otherwise_fails_the_case(runner, ctx, monkeypatch):
    real_place = ctx.place
    monkeypatch.setattr(ctx, "place", lambda storage, kind, dt: ReadsOtherwise(real_place(storage, kind, dt), [7]))

    def copy(sources, destinations, direction="", stream=None, *, note=""):
        if note.startswith("bad request"):
            raise RuntimeError("refused: the lists differ in length")  # then the destination is read back

    monkeypatch.setattr(ctx, "copy", copy)
    outcome, message = run(runner, "copy.bad-requests", request="unequal-lists", direction="cpu>default")
    assert outcome is Outcome.FAIL, message
    assert "reads back otherwise after the EP's calls: its shape reads [7], made [2, 3]" in message


def test_an_exception_of_the_kits_own_code_is_still_an_error(runner, ctx):
    def check(ctx):
        differs = np.zeros(64, np.uint8) != np.zeros(3, np.uint8)  # the kit comparing arrays it made wrongly
        yield Violation(str(differs))

    outcome, message, _ = runner._run(check, ctx, {})
    assert outcome is Outcome.ERROR and "operands could not be broadcast" in message


class FailingUpdate:
    """A device value whose update_inplace fails in onnxruntime, as an EP copy that errors would."""

    def __init__(self, value):
        self._value = value

    def __getattr__(self, name):
        return getattr(self._value, name)

    def update_inplace(self, source):
        raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : the device was lost\nat copy.cc:12")


def test_an_onnxruntime_error_fails_with_the_step_what_it_said_and_a_reproducer(runner, ctx, monkeypatch):
    params = dict(direction="default>default", dtype="float32", shape="3x5")  # the CPU EP's one direction (the others are the same copy)
    assert run(runner, "update-inplace.from-ortvalue", **params)[0] is Outcome.PASS
    real_place = ctx.place
    monkeypatch.setattr(ctx, "place", lambda storage, kind, dt: FailingUpdate(real_place(storage, kind, dt)))
    result = runner.run("update-inplace.from-ortvalue", 0, params)
    assert result["outcome"] == "fail"
    (violation,) = result["details"]["violations"]
    assert violation["message"].startswith("onnxruntime raised while update_inplace(OrtValue) default>default: RuntimeError:")
    assert violation["expected"] == "update_inplace(OrtValue) default>default to succeed"
    assert violation["actual"] == "RuntimeError: [ONNXRuntimeError] : 1 : FAIL : the device was lost"
    assert ("destination.update_inplace, source)" in violation["reproducer"]
            and violation["reproducer"].startswith("# Reproduces: update_inplace(OrtValue) default>default"))


def test_a_failure_whose_check_announced_nothing_is_reproduced_through_the_kit(runner, ctx, monkeypatch):
    from conformance.checks import CHECKS

    def silent_check(ctx, **params):
        yield Violation("wrong")

    monkeypatch.setitem(CHECKS, "session.nodes-on-ep", dataclasses.replace(CHECKS["session.nodes-on-ep"], function=silent_check))
    result = runner.run("session.nodes-on-ep", 0, {"recipe": "add", "dtype": "float32"})
    (violation,) = result["details"]["violations"]
    assert violation["reproducer"].endswith("print(Runner('cpu').run('session.nodes-on-ep', 0, {'recipe': 'add', 'dtype': 'float32'}))")


def claim_then_fail_sessions(monkeypatch, ctx):
    """The EP under test claims the nodes of every model, then fails the session with
    NOT_IMPLEMENTED (as onnxruntime-ggml 0.2.0 does for 16-bit integer and bfloat16 models);
    the CPU EP alone, asked by the kit, still runs them."""
    from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented

    def create(model):
        raise OrtNotImplemented("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : unsupported: tensor element type 5")

    monkeypatch.setattr(ctx, "create_session", create)
    monkeypatch.setattr(ctx.sessions, "_sessions", {})


def test_an_ep_that_claims_nodes_it_cannot_run_fails_its_own_contract(runner, ctx, monkeypatch):
    params = dict(recipe="identity", dtype="int16")
    assert run(runner, "session.claimed-nodes-run", **params)[0] is Outcome.PASS
    claim_then_fail_sessions(monkeypatch, ctx)
    result = runner.run("session.claimed-nodes-run", 0, params)
    assert result["outcome"] == "fail"
    (violation,) = result["details"]["violations"]
    assert violation["message"] == ("CPUExecutionProvider claimed the 1 node (Identity) of model 'identity' with int16 in GetCapability but could "
                                    "not create a kernel for them (NOT_IMPLEMENTED); the CPU EP alone runs the model")
    assert violation["actual"] == "session creation failed: NotImplemented: [ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : unsupported: tensor element type 5"
    assert "providers=['CPUExecutionProvider'])  # the CPU EP alone runs it" in violation["reproducer"]
    # Other checks needing that session are not failed for it: they could not run.
    outcome, message = run(runner, "memory-info.session-inputs", **params)
    assert outcome is Outcome.NOT_RUN and message.endswith("(the failure of session.claimed-nodes-run)")


def test_a_type_no_ep_takes_is_not_applicable_even_where_the_ep_session_fails(runner, ctx, monkeypatch):
    claim_then_fail_sessions(monkeypatch, ctx)
    outcome, message = run(runner, "session.claimed-nodes-run", recipe="identity", dtype="int4")
    assert outcome is Outcome.NOT_APPLICABLE and "neither CPUExecutionProvider nor the CPU EP takes it" in message


def placed_elsewhere(monkeypatch, ctx, declined: set[str]):
    """Sessions in which the EP under test declined the nodes of the `declined` element types."""
    real = ctx.session

    def session(recipe, dtype, shape):
        info = real(recipe, dtype, shape)
        assignment = {"OtherExecutionProvider": info.assignment[ctx.target.provider]} if dtype.name in declined else info.assignment
        return dataclasses.replace(info, assignment=assignment)

    monkeypatch.setattr(ctx, "session", session)


def test_a_model_the_ep_declines_is_not_applicable_where_it_takes_another(runner, ctx, monkeypatch):
    declined = {"int16"}
    placed_elsewhere(monkeypatch, ctx, declined)
    outcome, message = run(runner, "session.claimed-nodes-run", recipe="add", dtype="int16")
    assert outcome is Outcome.NOT_APPLICABLE
    assert message == ("CPUExecutionProvider declines model 'add' with int16 [3, 5] (it takes the float32 model 'add'): "
                       "onnxruntime placed the nodes on OtherExecutionProvider")
    declined.add("float32")  # an EP that takes nothing at all is not functional here: not_run
    outcome, message = run(runner, "session.claimed-nodes-run", recipe="add", dtype="int16")
    assert outcome is Outcome.NOT_RUN and "took no node of model 'add'" in message


class KeptInItsMemory:
    """A value whose update_inplace refuses a source in another memory, as onnxruntime's Python
    layer does for WebGPU values ("WebGPU OrtValue copies require WebGPU source and destination
    values"); copy_tensors between the memories works."""

    def __init__(self, value, kind):
        self.value, self.kind = value, kind

    def __getattr__(self, name):
        return getattr(self.value, name)

    def update_inplace(self, source):
        if getattr(source, "kind", "cpu") != self.kind:
            raise ValueError("copies require source and destination values in the same memory")
        self.value.update_inplace(getattr(source, "value", source))


def test_no_host_staging_is_timed_where_update_inplace_across_memories_is_refused(runner, ctx, monkeypatch):
    real_place, real_allocate = ctx.place, ctx.allocate

    def device(kind):
        return "default" if kind == "default" else "cpu"

    monkeypatch.setattr(ctx, "place", lambda storage, kind, dt: KeptInItsMemory(real_place(storage, kind, dt), device(kind)))
    monkeypatch.setattr(ctx, "allocate", lambda kind, dt, shape: KeptInItsMemory(real_allocate(kind, dt, shape), device(kind)))

    def copy(sources, destinations):  # plain onnxruntime has no CPU→CPU copy_tensors: the same bytes moved
        for source, destination in zip(sources, destinations, strict=True):
            destination.value.update_inplace(source.value)

    monkeypatch.setattr(ctx, "copy", copy)
    result = runner.run("update-inplace.no-host-staging", 0, {"dtype": "float32", "shape": "64x64"})
    assert result["outcome"] == "pass", result


def test_onnxruntime_python_layer_refusals_are_told_apart_from_c_errors():
    namespace: dict = {}
    fake_file = os.path.join(os.sep, "site-packages", "onnxruntime", "capi", "fake.py")
    exec(compile("def refuse(kind):\n    raise kind('refused')\n", fake_file, "exec"), namespace)
    caught = {}
    for kind in (ValueError, RuntimeError):
        try:
            namespace["refuse"](kind)
        except Exception as exc:
            caught[kind] = exc
    assert raised_by_onnxruntime_python(caught[ValueError])
    assert not raised_by_onnxruntime_python(caught[RuntimeError])  # the C layer's errors come as RuntimeError
    try:
        raise ValueError("the kit's own")
    except ValueError as exc:
        assert not raised_by_onnxruntime_python(exc)


class SessionWrapper:
    """A real session, some of whose methods a subclass replaces."""

    def __init__(self, session):
        self._session = session

    def __getattr__(self, name):
        return getattr(self._session, name)


def wrap_sessions(monkeypatch, ctx, wrapper):
    real = ctx.session

    def session(recipe, dtype, shape):
        info = real(recipe, dtype, shape)
        return SessionInfo(wrapper(info.session), info.model_path, info.recipe, info.assignment)

    monkeypatch.setattr(ctx, "session", session)


class GivesAnotherOutput(SessionWrapper):
    """A real session whose run gives a [1] float64 output: not the empty output the model defines."""

    def run(self, output_names, feeds):
        return [np.zeros((1,), np.float64)]


def test_a_run_on_empty_tensors_must_give_the_models_empty_output(runner, ctx, monkeypatch):
    params = dict(recipe="add", dtype="float32", shape="2x0x4")
    result = runner.run("session.empty-tensors", 0, params)
    assert result["outcome"] == "pass" and result["details"]["evidence"]["output"] == {"shape": [2, 0, 4], "dtype": "float32"}
    wrap_sessions(monkeypatch, ctx, GivesAnotherOutput)
    outcome, message = run(runner, "session.empty-tensors", **params)
    assert outcome is Outcome.FAIL and message == "model 'add' on CPUExecutionProvider gave an output of shape [1] and float64 for empty inputs"
    outcome, message = run(runner, "session.empty-tensors", recipe="add", dtype="float32", shape="3x5")
    assert outcome is Outcome.NOT_RUN and "is not empty" in message


def test_claiming_an_empty_tensors_node_then_failing_the_session_breaks_session_empty_tensors(runner, ctx, monkeypatch):
    claim_then_fail_sessions(monkeypatch, ctx)
    outcome, message = run(runner, "session.empty-tensors", recipe="relu", dtype="float32", shape="0x3")
    assert outcome is Outcome.FAIL and message.startswith("CPUExecutionProvider claimed the 1 node (Relu) of model 'relu' with float32")


class AcceptingSession(SessionWrapper):
    """run_with_iobinding that swallows onnxruntime's refusal, as a runtime that does not
    validate bound outputs would."""

    def run_with_iobinding(self, binding, run_options=None):
        try:
            self._session.run_with_iobinding(binding, run_options)
        except RuntimeError:
            pass


def test_bad_output_binding_that_is_accepted_fails(runner, ctx, monkeypatch):
    params = dict(request="wrong-shape", memory="default")
    assert run(runner, "iobinding.rejects-bad-output", **params)[0] is Outcome.PASS
    wrap_sessions(monkeypatch, ctx, AcceptingSession)
    outcome, message = run(runner, "iobinding.rejects-bad-output", **params)
    assert outcome is Outcome.FAIL
    assert message.startswith("run_with_iobinding accepted an output bound to a float32 [3, 3] value in default memory")


class StickyBinding:
    """An IOBinding that keeps the first value bound to each name: a rebind is lost."""

    def __init__(self, binding):
        self._binding, self._bound = binding, set()

    def __getattr__(self, name):
        return getattr(self._binding, name)

    def _first(self, bind, name, value):
        if name not in self._bound:
            self._bound.add(name)
            bind(name, value)

    def bind_ortvalue_input(self, name, value):
        self._first(self._binding.bind_ortvalue_input, name, value)

    def bind_ortvalue_output(self, name, value):
        self._first(self._binding.bind_ortvalue_output, name, value)


class StickyBindingSession(SessionWrapper):
    def io_binding(self):
        return StickyBinding(self._session.io_binding())

    def run_with_iobinding(self, binding, run_options=None):
        self._session.run_with_iobinding(binding._binding, run_options)


@pytest.mark.parametrize("binding", ["input", "output"])
def test_rebind_that_does_not_take_fails(runner, ctx, monkeypatch, binding):
    params = dict(binding=binding, request="wrong-shape", memory="default")
    assert run(runner, "iobinding.rebind-after-failure", **params)[0] is Outcome.PASS
    wrap_sessions(monkeypatch, ctx, StickyBindingSession)
    outcome, message = run(runner, "iobinding.rebind-after-failure", **params)
    assert outcome is Outcome.FAIL
    assert message.startswith(f"after a bad {binding} binding (a float32 [3, 3] value in default memory; refused: ")
    assert "binding it again with a valid value did not work" in message


def test_lifecycle_needs_a_plugin_library(runner, ctx):
    # The CPU EP is built in; in a plugin run the contract is decided not_applicable before it
    # runs, and the check itself refuses too.
    outcome, message = run(runner, "lifecycle.plugin-library")
    assert outcome is Outcome.NOT_APPLICABLE and "not loaded from a plugin library" in message


class OtherEpDevice:
    """An EP device of another EP, advertising DEFAULT memory of its own."""

    def __init__(self, ep_name, info):
        self.ep_name, self._info = ep_name, info

    def memory_info(self, kind):
        return self._info if kind == ort.OrtDeviceMemoryType.DEFAULT else None


def test_copy_matrix_pairs_every_other_ep_device_once(ctx, monkeypatch):
    from conformance.engine.capabilities import capability_matrix

    other = memory_info("OtherGpu", ort.OrtDeviceMemoryType.DEFAULT)
    devices = ort.get_ep_devices() + [OtherEpDevice("OtherExecutionProvider", other), OtherEpDevice("OtherExecutionProvider", other)]
    monkeypatch.setattr(ctx.ort, "get_ep_devices", lambda: devices)
    matrix = capability_matrix(ctx)
    name = "OtherExecutionProvider:OtherGpu:0"
    assert list(matrix["memories"]) == ["cpu", name]  # the CPU EP's own memory is plain CPU; the other device once
    statuses = {(p["source"], p["destination"]): p["status"] for p in matrix["pairs"]}
    # No allocator serves the stand-in's memory, so every copy touching it is refused, and none is required.
    assert statuses == {("cpu", "cpu"): "not_required", ("cpu", name): "unsupported", (name, "cpu"): "unsupported", (name, name): "unsupported"}


def test_every_shipped_contract_has_a_test_that_makes_it_fail():
    """Named in a test that breaks it: a refdev fault mode (test_refdev.py, and test_interop.py and
    test_imports_host.py for the import family), a stand-in here, or a finding against onnxruntime that the CPU run
    shows (test_plugin.py)."""
    from pathlib import Path

    from conformance.checks import known_checks
    from conformance.catalogue.spec import load_catalogue

    tests = Path(__file__).parent
    named = ("test_refdev.py", "test_checks.py", "test_plugin.py", "test_interop.py", "test_imports_host.py", "test_upstream_invariants.py",
             "test_bad_requests.py", "test_endurance.py", "test_concurrency.py", "test_size.py", "test_ordering.py")
    text = "".join((tests / name).read_text(encoding="utf-8") for name in named)
    untested = [c.id for c in load_catalogue(known_checks=known_checks()).contracts if f'"{c.id}"' not in text]
    assert not untested


def test_cpu_default_copy_may_be_refused_but_not_wrong(runner, ctx, monkeypatch):
    params = dict(direction="cpu>default", dtype="float32", shape="3x5")
    # Plain onnxruntime refuses CPU→CPU copies: a missing data transfer is not a failure here,
    # nor a pass: no bytes moved, so the case shows nothing (not_applicable, with the refusal).
    outcome, message = run(runner, "copy.cpu-default-optional", **params)
    assert outcome is Outcome.NOT_APPLICABLE
    assert message.startswith("copy_tensors cpu>default is refused, which this contract allows: RuntimeError: Data transfer")

    def flipping_copy(sources, destinations, direction=""):
        for source, destination in zip(sources, destinations, strict=True):
            data = source.numpy().copy()
            data.view(np.uint8).reshape(-1)[0] ^= 1
            destination.update_inplace(data)

    monkeypatch.setattr(ctx, "copy", flipping_copy)
    outcome, message = run(runner, "copy.cpu-default-optional", **params)
    assert outcome is Outcome.FAIL
    assert message.startswith("copy_tensors cpu>default did not deliver the source bytes")


def test_a_call_in_flight_is_passed_on_when_it_starts_and_when_it_returns(ctx):
    heard = []
    ctx.begin(heard.append)
    with ctx.calling(Call("IOBinding rebind input")):
        for _ in range(3):
            with ctx.calling(Call("copy_tensors", "default>cpu")):  # part of the outer call: nothing passed on
                pass
    with pytest.raises(RuntimeError), ctx.calling(Call("copy_tensors", "cpu>default")):
        raise RuntimeError("refused")  # a call that raised has returned too
    assert heard == [{"call": {"kind": "IOBinding rebind input", "direction": "", "note": ""}}, {"call": None},
                     {"call": {"kind": "copy_tensors", "direction": "cpu>default", "note": ""}}, {"call": None}]


def test_a_quarantined_call_is_not_made(ctx):
    """The request carries the quarantine as the agreed wire list; the guard compares calls as
    values, so another direction or note of the same kind is still made."""
    ctx.begin(quarantined=[{"call": Call("copy_tensors", "cpu>default").to_wire(), "reason": "it crashed in check x"}])
    made = []
    with pytest.raises(CallQuarantined, match="^copy_tensors cpu>default: it crashed in check x"), ctx.calling(Call("copy_tensors", "cpu>default")):
        made.append(True)
    with pytest.raises(CallQuarantined), ctx.calling(Call("run_with_iobinding", "default")), ctx.calling(Call("copy_tensors", "cpu>default")):
        made.append(True)  # not within another call either
    assert not made
    with ctx.calling(Call("copy_tensors", "default>cpu")), ctx.calling(Call("copy_tensors", "cpu>default", "timed")):
        made.append(True)
    assert made == [True]
    ctx.begin()


def test_a_stand_in_set_on_the_context_is_what_its_parts_use(ctx, monkeypatch):
    """The context forwards each name to the part that has it, setting as well as getting: a
    check dropping its EP device, or a test's stand-in copy, reaches the part's own calls too."""
    copies = []
    monkeypatch.setattr(ctx, "copy", lambda sources, destinations, direction="", stream=None, note="": copies.append(direction))
    assert ctx.memories.copy is ctx.copy
    monkeypatch.setattr(ctx.memories, "is_cpu_memory", lambda kind: False)
    ctx.read(ctx.wrap_cpu(np.zeros(3, np.float32), DTYPES["float32"]), "default", DTYPES["float32"], (3,))
    assert copies == ["default>cpu"]
    monkeypatch.setattr(ctx, "device", None)
    assert ctx.under_test.device is None and "dev = " not in ctx.snippets.preamble()


class SizedByElement:
    """A value whose tensor_size_in_bytes() counts one byte per element, as a size computed
    without the packing of 4-bit types would."""

    def __init__(self, value):
        self.value = value

    def __getattr__(self, name):
        return getattr(self.value, name)

    def tensor_size_in_bytes(self):
        return int(np.prod(self.value.shape()))


def test_a_value_reporting_the_wrong_size_fails_memory_info_tensor_size(runner, ctx, monkeypatch):
    assert run(runner, "memory-info.tensor-size", dtype="int4", shape="3x5")[0] is Outcome.PASS
    real_allocate = ctx.allocate
    monkeypatch.setattr(ctx, "allocate", lambda kind, dt, shape: SizedByElement(real_allocate(kind, dt, shape)))
    assert run(runner, "memory-info.tensor-size", dtype="uint8", shape="3x5")[0] is Outcome.PASS  # one byte an element is right here
    result = runner.run("memory-info.tensor-size", 0, {"dtype": "int4", "shape": "3x5"})
    assert (result["outcome"], result["message"]) == ("fail", "tensor_size_in_bytes() of a [3, 5] int4 value in DEFAULT memory is 15"), result
    violation = result["details"]["violations"][0]
    assert (violation["expected"], violation["actual"]) == ("8 bytes", "15 bytes")
    reproduce(violation["reproducer"])  # onnxruntime's own value is right, without the stand-in: the assert holds


# --- CPU memory everywhere, placement --------------


class HalfWritten:
    """A CPU value whose update_inplace writes only the first half of the source, as a copy
    that stops early would; everything else is the real value's."""

    def __init__(self, value, storage: np.ndarray):
        self.value, self.storage = value, storage

    def __getattr__(self, name):
        return getattr(self.value, name)

    def update_inplace(self, source):
        flat = self.storage.reshape(-1)
        flat[: flat.size // 2] = np.asarray(source).reshape(-1)[: flat.size // 2]


def test_a_cpu_copy_path_that_drops_bytes_fails_cpu_memory_copy_paths(runner, ctx, monkeypatch):
    params = dict(path="update_inplace-numpy", dtype="float16")
    assert run(runner, "cpu-memory.copy-paths", **params)[0] is Outcome.PASS
    real_wrap = ctx.wrap_cpu
    monkeypatch.setattr(ctx, "wrap_cpu", lambda storage, dt: HalfWritten(real_wrap(storage, dt), storage))
    result = runner.run("cpu-memory.copy-paths", 0, params)
    assert result["outcome"] == "fail" and "did not deliver the source bytes" in result["message"], result
    reproduce(result["details"]["violations"][0]["reproducer"])  # onnxruntime's own update_inplace is right


def test_copy_tensors_between_two_cpu_values_is_onnxruntimes_finding_and_its_script_fails_alone(runner):
    """onnxruntime 1.32 has no CPU→CPU data transfer behind copy_tensors: the runtime-subject
    contract fails on the CPU EP alone, and its script fails without the kit."""
    result = runner.run("cpu-memory.copy-paths", 0, {"path": "copy_tensors", "dtype": "int8"})
    assert result["outcome"] == "fail" and "Data transfer implementation" in result["message"], result
    script = result["details"]["violations"][0]["reproducer"]
    completed = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 1 and "expected it to succeed" in completed.stderr


def test_every_cpu_copy_path_passes_with_the_bytes_it_compared(runner):
    for path in ("update_inplace-ortvalue", "ortvalue_from_numpy", "iobinding", "iobinding-ortvalue"):
        result = runner.run("cpu-memory.copy-paths", 0, {"path": path, "dtype": "float32"})
        assert result["outcome"] == "pass", (path, result)
        assert result["details"]["evidence"]["bytes_compared"] == 60


def test_placement_on_the_cpu_ep_has_no_boundary_and_a_named_record_must_hold_something(runner, ctx, monkeypatch):
    assert run(runner, "placement.kernel-inputs", recipe="sub_relu") == (
        Outcome.NOT_APPLICABLE, "CPUExecutionProvider took every node of 'sub_relu': no partition boundary at a CPU node's output")
    assert run(runner, "placement.kernel-inputs", recipe="add")[0] is Outcome.NOT_APPLICABLE  # no record, CPU memory
    # An EP that names a record of its kernels' inputs but writes nothing there has shown nothing.
    monkeypatch.setattr(ctx.under_test, "facts", dataclasses.replace(ctx.under_test.facts, ep_metadata={"conformance.kernel_input_log": "KIT_TEST_INPUT_LOG"}))
    outcome, message = run(runner, "placement.kernel-inputs", recipe="add")
    assert outcome is Outcome.NOT_RUN and "recorded none" in message
    assert "KIT_TEST_INPUT_LOG" not in os.environ  # set around the run only


# --- subjects stay honest --------------------------------


def test_a_case_of_an_ep_contract_with_plain_cpu_memory_at_every_end_is_the_runtimes(runner, ctx, monkeypatch):
    """On the CPU EP, DEFAULT memory is onnxruntime's plain CPU memory: update_inplace into it is
    onnxruntime's own copy, so the case is the runtime's, said with its reason."""
    result = runner.run("update-inplace.from-numpy", 0, {"dtype": "float32", "shape": "7x13"})
    assert (result["outcome"], result["details"]["subject"]) == ("pass", "runtime"), result
    assert "plain CPU memory" in result["details"]["subject_reason"]
    # A session that ran nodes on the EP keeps the EP's promise, whatever memory its values used.
    result = runner.run("session.nodes-on-ep", 0, {"recipe": "add", "dtype": "float32"})
    assert result["outcome"] == "pass" and "subject" not in result["details"], result
    # The same update_inplace into memory the EP device advertises is the EP's again.
    stand_in = MemoryFacts("Stand-in", device_id=0, vendor_id=0xBEEF, device_mem_type="default", device_type="cpu")
    monkeypatch.setattr(ctx.under_test, "facts", dataclasses.replace(ctx.under_test.facts, default_memory=stand_in))
    ctx.memories.touched.update({"cpu", "default"})
    assert not ctx.only_plain_cpu()


def test_every_copy_and_update_case_of_the_cpu_run_is_the_runtimes(cpu_reports):
    """The rule, on a whole run: on the CPU EP every copy and update case whose check ran no
    session has plain CPU memory at both ends, so none of them may count against the EP."""
    import json

    report = json.loads((cpu_reports / "report.json").read_text())
    cases = [r for r in report["results"] if r["contract"].split(".")[0] in ("copy", "update-inplace", "cpu-memory")
             and r["outcome"] in ("pass", "fail") and "runs_on_ep" not in r["details"].get("evidence", {})]
    assert cases and all(r["subject"] == "runtime" for r in cases), [(r["nodeid"], r["subject"]) for r in cases if r["subject"] != "runtime"]


# --- what a package lists must run ------------------------


def test_a_built_in_ep_listed_but_unable_to_run_fails_package_listed_eps_run_against_the_package(runner, ctx, monkeypatch):
    result = runner.run("package.listed-eps-run", 0, {})
    assert result["outcome"] == "pass" and result["details"]["evidence"]["listed_and_runs"]["provider"] == "CPUExecutionProvider", result
    from conformance.checks import packaging

    reason = "CPUExecutionProvider is listed by onnxruntime but is not functional here: a session created for it silently fell back to X"
    monkeypatch.setattr(packaging.eps, "fallback_reason", lambda ort, target: reason)
    result = runner.run("package.listed-eps-run", 0, {})
    assert result["outcome"] == "fail" and "lists CPUExecutionProvider in get_available_providers(), but it cannot run here" in result["message"]
    assert "subject" not in result["details"]  # the contract's own subject, package, stands
    reproduce(result["details"]["violations"][0]["reproducer"])  # the real CPU EP runs: the script passes
    monkeypatch.setattr(ctx.target, "library", "/some/plugin.so")
    assert run(runner, "package.listed-eps-run")[0] is Outcome.NOT_APPLICABLE


# --- guard memory, the copy and creation surface ---------------------


def test_a_write_past_a_host_buffer_the_kit_handed_out_fails_the_check_against_the_ep(runner, ctx, monkeypatch):
    """Every host buffer `place` and `read` hand onnxruntime sits between canaries: one byte
    written past the destination of update_inplace fails the case, which passes without it."""
    import ctypes

    params = dict(dtype="float32", shape="7x13")
    assert run(runner, "update-inplace.from-numpy", **params)[0] is Outcome.PASS
    read = ctx.memories.read

    def read_after_an_overrun(value, kind, dtype, shape):
        ctypes.memset(value.data_ptr() + value.tensor_size_in_bytes(), 0xEE, 1)  # what a careless copy does
        return read(value, kind, dtype, shape)

    monkeypatch.setattr(ctx, "read", read_after_an_overrun)  # the context sets its part's too
    result = runner.run("update-inplace.from-numpy", 0, params)
    assert result["outcome"] == "fail", result
    assert "wrote 1 byte after the end (at +364)" in result["message"]
    assert "host buffer of the value placed in default memory" in result["message"]
    assert ctx.memories.guarded == []  # the next check starts with none


class _Lying:
    """An OrtValue that reports one accessor wrong (`accessor`: the value it returns instead)."""

    def __init__(self, value, **lies):
        self._value, self._lies = value, lies

    def __getattr__(self, name):
        if name in self._lies:
            return lambda: self._lies[name]
        return getattr(self._value, name)


def creating(monkeypatch, ctx, factory: str, make):
    """ctx.ort with OrtValue.<factory> replaced by `make(real_factory, *args, **kwargs)`."""
    real_ort = ctx.ort
    real = getattr(real_ort.OrtValue, factory)
    value_class = type("OrtValueStandIn", (), {factory: staticmethod(lambda *a, **k: make(real, *a, **k))})
    for name in ("ortvalue_from_numpy", "ortvalue_from_shape_and_type", "ortvalue_from_numpy_with_onnx_type"):
        if name != factory:
            setattr(value_class, name, staticmethod(getattr(real_ort.OrtValue, name)))
    ort_stand_in = type("OrtStandIn", (), {"__getattr__": lambda self, name: getattr(real_ort, name), "OrtValue": value_class})()
    monkeypatch.setattr(ctx.under_test, "ort", ort_stand_in)


@pytest.mark.parametrize("contract, params", [("create.from-numpy", dict(dtype="int16", shape="7x13")),
                                              ("create.from-numpy-layouts", dict(dtype="float32", shape="7x13", layout="transposed"))])
def test_ortvalue_from_numpy_that_keeps_the_raw_buffer_or_misreports_fails(runner, ctx, monkeypatch, contract, params):
    assert run(runner, contract, **params)[0] is Outcome.PASS
    # a creation that takes a Fortran-ordered array's buffer as it lies in memory, as if C-ordered
    creating(monkeypatch, ctx, "ortvalue_from_numpy",
             lambda real, array, *args: real(array if array.flags.c_contiguous else array.T.copy().reshape(array.shape), *args))
    if params.get("layout") == "transposed":
        outcome, message = run(runner, contract, **params)
        assert outcome is Outcome.FAIL and "does not hold the array's values" in message, message
    creating(monkeypatch, ctx, "ortvalue_from_numpy", lambda real, array, *args: _Lying(real(array, *args), tensor_size_in_bytes=7))
    outcome, message = run(runner, contract, **params)
    assert outcome is Outcome.FAIL and "tensor_size_in_bytes() is 7, not the" in message, message


@pytest.mark.parametrize("contract, form, shape", [("create.cpu-from-shape-and-type-shapes", "device-args", "3x5x7"),
                                                   ("create.cpu-from-shape-and-type", "default-args", "7x13")])
def test_a_cpu_value_of_the_wrong_size_or_type_fails_from_shape_and_type(runner, ctx, monkeypatch, contract, form, shape):
    params = dict(memory="cpu", form=form, dtype="int4", shape=shape)
    assert run(runner, contract, **params)[0] is Outcome.PASS
    # allocated for one byte an element: tensor_size_in_bytes() tells the 4-bit packing was lost
    creating(monkeypatch, ctx, "ortvalue_from_shape_and_type",
             lambda real, shape, element_type, **kw: real(shape, 2 if element_type == 22 else element_type, **kw))
    outcome, message = run(runner, contract, **params)
    assert outcome is Outcome.FAIL, message
    assert message.startswith(f"ortvalue_from_shape_and_type({[int(n) for n in shape.split('x')]}, int4) in cpu memory ({form}): element_type() is 2"), message


def test_a_read_only_array_written_through_its_value_fails_and_a_copying_creation_passes(runner, ctx, monkeypatch):
    """onnxruntime 1.32 wraps a read-only array and lets update_inplace write into it: the
    finding the CPU run shows. Made to copy the array, the same case passes."""
    outcome, message = run(runner, "create.read-only-source", dtype="uint8", shape="2x3")
    assert outcome is Outcome.FAIL and "reached the read-only array it was made from (aliased)" in message
    reproducer = runner.run("create.read-only-source", 0, dict(dtype="uint8", shape="2x3"))["details"]["violations"][0]["reproducer"]
    with pytest.raises(AssertionError, match="the read-only array after a write through the value made from it"):
        reproduce(reproducer)
    creating(monkeypatch, ctx, "ortvalue_from_numpy", lambda real, array, *args: real(array.copy(), *args))
    assert run(runner, "create.read-only-source", dtype="uint8", shape="2x3")[0] is Outcome.PASS


@pytest.mark.parametrize("broken, expected", [
    ("destination", "after the refused bad request (size-mismatch), a valid copy into destination 0 (default memory) did not deliver"),
    ("source", "after the refused bad request (size-mismatch), source 0 (cpu memory) no longer holds its values"),
])
def test_a_refusal_that_leaves_its_values_unusable_fails(runner, ctx, monkeypatch, broken, expected):
    """The state after a refusal: a copy that, once it refused a request, ignores later copies
    into the destination it refused (or spoils the source it refused) fails the bad request."""
    checking = CheckingCopy()
    monkeypatch.setattr(ctx, "copy", checking)
    assert run(runner, "copy.bad-requests", request="size-mismatch", direction="cpu>default")[0] is Outcome.PASS
    refused: list = []

    def refuses_then_sticks(sources, destinations, direction="", note=""):
        if note.startswith("bad request"):
            refused.append((sources[0], destinations[0]))
            if broken == "source":
                sources[0].numpy().reshape(-1).view(np.uint8)[:4] = 0
            raise RuntimeError("size mismatch")
        if any(destination is stuck for _, stuck in refused for destination in destinations):
            return  # the refused destination takes nothing any more
        checking(sources, destinations)

    monkeypatch.setattr(ctx, "copy", refuses_then_sticks)
    outcome, message = run(runner, "copy.bad-requests", request="size-mismatch", direction="cpu>default")
    assert outcome is Outcome.FAIL and message.startswith(expected), message


class StuckAfterRefusal:
    """A destination whose update_inplace, once it refused a source, takes no other."""

    def __init__(self, value):
        self._value, self._stuck = value, False

    def __getattr__(self, name):
        return getattr(self._value, name)

    def update_inplace(self, source):
        if self._stuck:
            return
        try:
            self._value.update_inplace(source)
        except Exception:
            self._stuck = True
            raise


def test_a_destination_unusable_after_a_refused_update_inplace_fails(runner, ctx, monkeypatch):
    params = dict(source="ortvalue", request="fewer-elements")
    assert run(runner, "update-inplace.rejects-mismatch", **params)[0] is Outcome.PASS
    real_place = ctx.place

    def place(storage, kind, dt):
        value = real_place(storage, kind, dt)
        return StuckAfterRefusal(value) if storage.shape == (2, 3) and dt.name == "float32" else value

    monkeypatch.setattr(ctx, "place", place)
    outcome, message = run(runner, "update-inplace.rejects-mismatch", **params)
    assert outcome is Outcome.FAIL
    assert message.startswith("a valid update_inplace(ortvalue) after the refused one (fewer-elements): values differ"), message



# --- refusals people can act on (errors.*) ---------------------------------

class RefusingWith:
    """A value whose update_inplace refuses with `message`."""

    def __init__(self, value, message):
        self.value, self.message = value, message

    def __getattr__(self, name):
        return getattr(self.value, name)

    def update_inplace(self, source):
        raise RuntimeError(self.message)


def test_an_update_inplace_refusal_that_does_not_name_the_sizes_fails(runner, ctx, monkeypatch, tmp_path):
    params = dict(source="ortvalue", request="element-count", memory="default")
    result = runner.run("errors.update-inplace-refusal", 0, params)  # onnxruntime 1.32's own message names neither size
    assert result["outcome"] == "fail" and "does not name both sizes (source 28 bytes, [7]; destination 24 bytes, [2, 3])" in result["message"]
    script = tmp_path / "repro.py"
    script.write_text(result["details"]["violations"][0]["reproducer"])
    completed = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert completed.returncode == 1 and "expected a message naming both sizes" in completed.stderr
    real_place = ctx.place
    for message, outcome in [("source of 28 bytes, destination of 24 bytes", Outcome.PASS), ("sizes differ: [7] and [2, 3]", Outcome.PASS),
                             ("the sizes do not match", Outcome.FAIL)]:
        monkeypatch.setattr(ctx, "place", lambda storage, kind, dt, m=message: RefusingWith(real_place(storage, kind, dt), m))
        assert run(runner, "errors.update-inplace-refusal", **params)[0] is outcome, message


def test_a_copy_refusal_that_names_another_problem_fails(runner, ctx, monkeypatch):
    said = []

    def copy(sources, destinations, direction="", stream=None, *, note=""):
        if note.startswith("bad request"):
            raise RuntimeError(said[-1])

    monkeypatch.setattr(ctx, "copy", copy)  # the CPU EP copies nothing: a stand-in that copies valid requests
    for message, outcome in [("Invalid arguments provided to CopyTensors.", Outcome.FAIL), ("2 sources but 1 destinations", Outcome.PASS)]:
        said.append(message)
        assert run(runner, "errors.copy-refusal", request="unequal-lists", direction="cpu>default")[0] is outcome, message
    said.append("source is 28 bytes but the destination 24 bytes")
    assert run(runner, "errors.copy-refusal", request="size-mismatch", direction="cpu>default")[0] is Outcome.PASS
    said.append("Data transfer implementation between source and destination device was not found.")
    outcome, message = run(runner, "errors.copy-refusal", request="size-mismatch", direction="cpu>default")
    assert outcome is Outcome.FAIL and "does not name both sizes" in message


class RefusingSession(SessionWrapper):
    def run_with_iobinding(self, binding, run_options=None):
        raise RuntimeError("Error in execution: invalid argument")


@pytest.mark.parametrize("request_name", ["wrong-shape", "wrong-rank", "wrong-element-type"])
def test_an_iobinding_refusal_that_does_not_say_what_is_wrong_fails(runner, ctx, monkeypatch, request_name):
    params = dict(request=request_name, binding="output", memory="default")
    result = runner.run("errors.iobinding-refusal", 0, params)
    assert result["outcome"] == "pass", result
    wrap_sessions(monkeypatch, ctx, RefusingSession)
    monkeypatch.setattr("conformance.checks.context.bad_bindings.require_valid_run", lambda ctx, setup: None)
    outcome, message = run(runner, "errors.iobinding-refusal", **params)
    assert outcome is Outcome.FAIL and message.startswith(f"the refusal of run_with_iobinding with a bad output ({request_name}) does not name both")


def test_a_refusal_names_the_device_by_its_name_or_onnxruntimes_code():
    from conformance.checks.errors import device, shapes, types

    npu = device("npu")
    assert npu.said_in("no data transfer from Device:[DeviceType:3 MemoryType:0 VendorId:0]") and npu.said_in("the NPU device 0 is not reachable")
    assert not npu.said_in("allocator != nullptr")
    assert types(DTYPES["float64"], DTYPES["float32"]).said_in("Actual: (tensor(double)) , expected: (tensor(float))")
    assert not types(DTYPES["float64"], DTYPES["float32"]).said_in("float64 and float64")
    assert shapes((3, 3), (2, 3)).said_in("index: 0 Got: 3 Expected: 2") and shapes((3, 3), (2, 3)).said_in("bound {3,3}, expected {2,3}")
    assert not shapes((3, 3), (2, 3)).said_in("Got invalid dimensions for output: y")


# --- each IOBinding call on valid requests (iobinding.bind-calls) ----------

class LosingBinding:
    """An IOBinding that binds an output given by address as one onnxruntime allocates (the
    buffer is never written), and whose copy_outputs_to_cpu() answers zeros."""

    def __init__(self, binding, lose: str):
        self._binding, self._lose = binding, lose

    def __getattr__(self, name):
        return getattr(self._binding, name)

    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None, shape=None, buffer_ptr=None):
        if self._lose == "pointer":
            return self._binding.bind_output(name, device_type, device_id)
        if buffer_ptr is not None:
            self.end = buffer_ptr + np.dtype(element_type).itemsize * int(np.prod(shape))
        return self._binding.bind_output(name, device_type, device_id, element_type, shape, buffer_ptr)

    def overrun(self):
        """After the run: four bytes written past the end of the output bound by address."""
        if self._lose == "overrun":
            import ctypes

            ctypes.memset(self.end, 0, 4)

    def copy_outputs_to_cpu(self):
        real = self._binding.copy_outputs_to_cpu()
        return [np.zeros_like(v) for v in real] if self._lose == "copy" else real


@pytest.mark.parametrize("lose, request_name, expected", [
    ("pointer", "bind-output-pointer", "the output buffer bound by address does not hold the model's result"),
    ("copy", "bind-cpu-input-readonly", "copy_outputs_to_cpu() does not hold the model's result"),
    ("overrun", "bind-output-pointer", "the run wrote 4 bytes after the end (at +480) of the output buffer handed to onnxruntime"),
])
def test_an_iobinding_call_that_loses_what_it_was_given_fails(runner, ctx, monkeypatch, tmp_path, lose, request_name, expected):
    params = dict(request=request_name, recipe="relu", dtype="float32", shape="2x3x4x5")
    assert run(runner, "iobinding.bind-calls", **params)[0] is Outcome.PASS
    assert run(runner, "iobinding.bind-calls", **{**params, "dtype": "float16", "shape": "scalar"})[0] is Outcome.PASS

    class Session(SessionWrapper):
        def io_binding(self):
            return LosingBinding(self._session.io_binding(), lose)

        def run_with_iobinding(self, binding, run_options=None):
            self._session.run_with_iobinding(binding._binding, run_options)
            binding.overrun()

    wrap_sessions(monkeypatch, ctx, Session)
    result = runner.run("iobinding.bind-calls", 0, params)
    assert result["outcome"] == "fail" and result["message"].startswith(expected), result
    script = tmp_path / "repro.py"  # onnxruntime itself keeps the binding: the script passes on its own
    script.write_text(result["details"]["violations"][0]["reproducer"])
    completed = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr


# --- the accessors name the memory the EP advertised (memory-info.identity) --

def test_an_accessor_that_names_another_memory_fails_memory_info_identity(refdev_library, tmp_path):
    """On the reference EP (a GPU-typed DEFAULT memory of vendor 0xc0de) onnxruntime 1.32's
    device_name() says 'cuda', as for any GPU memory: the finding against onnxruntime, with a
    reproducer that fails on its own. A device_name() that says 'gpu' passes, and a Python memory
    info that differs from the C API's fails."""
    import json

    code = f"""
import json
import onnxruntime as ort
from conformance import data
from conformance.testbed.interop import capi
from conformance.engine.runner import Runner
runner = Runner("RefDevExecutionProvider", specs=[str(data.contracts_dir())], library={str(refdev_library)!r})
def case():
    result = runner.run("memory-info.identity", 0, {{"memory": "default", "recipe": "relu"}})
    return result["outcome"], result["message"], (result["details"].get("violations") or [{{}}])[0].get("reproducer", "")
out = {{"real": case()}}
ort.OrtValue.device_name = lambda self: "gpu"
out["gpu"] = case()
real = capi.ep_device_memory
capi.ep_device_memory = lambda *args: dict(real(*args), vendor_id=0x10DE)
out["other_vendor"] = case()
print(json.dumps(out))
"""
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    out = json.loads(completed.stdout.strip().splitlines()[-1])
    assert out["real"][:2] == ["fail", "device_name() of a value in default memory (RefDev (gpu, vendor 0xc0de, device 0, default)) says 'cuda'"]
    assert out["gpu"][0] == "pass", out["gpu"]
    assert out["other_vendor"][0] == "fail" and out["other_vendor"][1] == (  # and the session's input and output
        "OrtEpDevice.memory_info(DEFAULT) says vendor_id 49374 (advertised 4318) (and 2 more)"), out["other_vendor"]
    script = tmp_path / "repro.py"
    script.write_text(out["real"][2])
    run_alone = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run_alone.returncode == 1 and "device_name() of a value in DEFAULT memory: expected one of ['gpu', 'refdev'], got 'cuda'" in run_alone.stderr


def test_a_refused_buffer_bound_by_address_that_is_written_past_fails(runner, ctx, monkeypatch):
    params = dict(request="wrong-shape-buffer", memory="default")
    assert run(runner, "iobinding.rejects-bad-output", **params)[0] is Outcome.PASS

    class Session(SessionWrapper):  # writes past the buffer it was given by address, then refuses the run
        def io_binding(self):
            return LosingBinding(self._session.io_binding(), "overrun")

        def run_with_iobinding(self, binding, run_options=None):
            if getattr(binding, "end", None):
                binding.overrun()
            self._session.run_with_iobinding(binding._binding, run_options)

    wrap_sessions(monkeypatch, ctx, Session)
    monkeypatch.setattr("conformance.checks.context.bad_bindings.require_valid_run", lambda ctx, setup: None)
    outcome, message = run(runner, "iobinding.rejects-bad-output", **params)
    assert outcome is Outcome.FAIL
    assert message == "the refused run wrote 4 bytes after the end (at +36) of the buffer bound to a host buffer of shape [3, 3] by address"


def test_a_run_of_an_empty_input_that_crashed_stops_only_runs_of_that_shape(runner):
    """An EP that aborts on an empty input (ggml does) loses that call; iobinding.bind-calls'
    plain run of an empty input is then not made again, and session.nodes-on-ep's 3x5 run still is."""
    lost = [{"call": Call("InferenceSession.run", note="inputs in cpu, shape [0, 3]").to_wire(), "reason": "it crashed in check x"}]
    empty = runner.run("iobinding.bind-calls", 0, dict(request="bind-input-pointer", recipe="relu", dtype="float32", shape="0x3"), quarantined=lost)
    assert empty["outcome"] == "not_run" and "shape [0, 3]" in empty["message"], empty
    full = runner.run("iobinding.bind-calls", 0, dict(request="bind-input-pointer", recipe="relu", dtype="float32", shape="2x3x4x5"), quarantined=lost)
    assert full["outcome"] == "pass", full
    assert runner.run("session.nodes-on-ep", 0, dict(recipe="relu", dtype="float32"), quarantined=lost)["outcome"] == "pass"


def test_device_name_may_be_the_family_the_memory_is_named_after_but_not_another():
    from conformance.checks.identity import device_names

    assert "webgpu" in device_names("gpu", 0x0, "WebGPU_Buf")  # WebGPU's buffers: device_name() 'webgpu' is true
    assert "cuda" in device_names("gpu", 0x10DE, "Cuda")
    assert "cuda" not in device_names("gpu", 0xC0DE, "RefDev")  # onnxruntime 1.32 says 'cuda' of every GPU memory


# --- copy.c-api-roundtrip: CopyTensors through the C API (refdev's corrupt and overrun faults fail it: tests/test_refdev.py) ---

def test_c_api_copy_on_an_ep_device_whose_default_memory_is_the_cpus_is_not_applicable(ctx):
    """Called past applies_when: the check reads the EP device's DEFAULT memory through the C
    API itself, and the CPU EP's gives no device end to copy to."""
    from conformance.checks import capi_copy
    from conformance.findings import NotApplicable

    with pytest.raises(NotApplicable, match="plain CPU memory"):
        list(capi_copy.c_api_copy(ctx, "cpu>default"))


def test_a_copy_that_writes_its_source_fails_copy_source_unchanged(runner, ctx, monkeypatch):
    # Plain onnxruntime refuses a CPU→CPU copy_tensors: the stand-in copies as a data transfer should.
    monkeypatch.setattr(ctx, "copy", CheckingCopy())
    assert run(runner, "copy.source-unchanged", direction="cpu>default", dtype="float32", shape="7x13")[0] is Outcome.PASS

    def scribbling_copy(sources, destinations, direction="", stream=None, note=""):
        CheckingCopy()(sources, destinations)
        sources[0].numpy().reshape(-1).view(np.uint8)[:4] = 0  # the source used as scratch space

    monkeypatch.setattr(ctx, "copy", scribbling_copy)
    outcome, message = run(runner, "copy.source-unchanged", direction="cpu>default", dtype="float32", shape="7x13")
    assert outcome is Outcome.FAIL
    assert message.startswith("copy_tensors cpu>default changed its source (cpu memory): ")
