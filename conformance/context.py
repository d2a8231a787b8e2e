"""What a check works with: the EP device, its memories, values on them, and sessions.

Memory kinds are named as the contracts name them: `cpu` (plain CPU memory), `default` (the EP
device's DEFAULT memory; plain CPU memory when it advertises none) and `host_accessible`.
Sessions and models are built once per worker and shared by the checks.
"""

from __future__ import annotations

import contextlib
import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from conformance import tensors
from conformance.findings import CallQuarantined, ClaimedButUnrunnable, NotApplicable, NotRun, Violation, first_line, message_line  # noqa: F401
from conformance.eps import EpTarget, import_onnxruntime, memory_label
from conformance.models import ModelCache, UnbuildableModel

ASSIGNMENT_CONFIG = "session.record_ep_graph_assignment_info"


@dataclass
class SessionInfo:
    session: Any
    model_path: Path | None
    recipe: str
    assignment: dict[str, list[str]]  # EP name -> op types it took


class CheckContext:
    def __init__(self, target: EpTarget, device_index: int, models: ModelCache):
        # call -> why it must not be made again on this device (set per request by the runner)
        self.quarantined_calls: dict[str, str] = {}
        self.ort = import_onnxruntime()
        self.target = target
        self.device_index = device_index
        self.device = target.devices[device_index] if target.devices else None
        self.facts = target.facts["devices"][device_index]
        self.models = models
        self._sessions: dict[tuple[str, str, tuple[int, ...]], SessionInfo] = {}
        self.step = ""  # what the running check does now, in words
        self.reproducer = ""  # how to reproduce it
        self._call: str | None = None  # the risky call in flight (see calling)
        self._on_progress: Callable[[dict[str, str]], None] | None = None

    # --- what the running check does ---------------------------------------------------------

    def begin(self, on_progress: Callable[[dict[str, str]], None] | None = None, quarantined: dict[str, str] | None = None) -> None:
        """A new check starts: it has said nothing yet; `on_progress` hears each `attempt`, and
        each call as it starts and returns (see calling); `quarantined`: the calls it must not
        make (see calling), with why."""
        self.step, self.reproducer, self._call, self._on_progress = "", "", None, on_progress
        self.quarantined_calls = quarantined or {}

    def attempt(self, step: str, reproducer: str | None = None) -> None:
        """Says what the check does next, and how to reproduce it, before doing it. A call that
        kills the process or hangs leaves no answer: the worker passes this on at once
        (`on_progress`), so the parent still knows the step and the reproducer; a call that
        raises is reported with them. The reproducer stands until the next one is given."""
        self.step = step
        if reproducer is not None:
            self.reproducer = reproducer
        if self._on_progress is not None:
            self._on_progress({"step": self.step, "reproducer": self.reproducer})

    # --- calls in flight -------------------------------------------------------------------

    @contextlib.contextmanager
    def calling(self, call: str) -> Iterator[None]:
        """Around a risky onnxruntime call on this EP device ('copy_tensors cpu>default',
        'update_inplace numpy>default', 'InferenceSession creation', ...): raises
        CallQuarantined instead when that call crashed or hung in an earlier check. The call is
        passed on (`on_progress`) before it is made and again when it has returned, so that the
        parent knows which call was in flight when the EP aborts or hangs, and blames no call
        for a loss after it returned. A call made within another is part of it: the outer one
        names what is in flight (and a timed loop of calls sends nothing)."""
        reason = self.quarantined_calls.get(call)
        if reason is not None:
            raise CallQuarantined(call, reason)
        if self._call is not None:
            yield
            return
        self._in_flight(call)
        try:
            yield
        finally:
            self._in_flight(None)

    def _in_flight(self, call: str | None) -> None:
        self._call = call
        if self._on_progress is not None:
            self._on_progress({"call": call})

    # --- memories --------------------------------------------------------------------------

    def memory_info(self, kind: str):
        """The OrtMemoryInfo of a memory kind; None means plain CPU memory."""
        if kind == "cpu" or self.device is None:
            return None
        types = {"default": self.ort.OrtDeviceMemoryType.DEFAULT, "host_accessible": self.ort.OrtDeviceMemoryType.HOST_ACCESSIBLE}
        return self.device.memory_info(types[kind])

    def memory_facts(self, kind: str) -> dict[str, Any] | None:
        return None if kind == "cpu" else self.facts["memory"][kind]

    def is_cpu_memory(self, kind: str) -> bool:
        facts = self.memory_facts(kind)
        return facts is None or facts["device_type"] == "cpu"

    def require_memory(self, kind: str) -> None:
        if kind == "host_accessible" and self.memory_facts(kind) is None:
            raise NotApplicable("the EP device advertises no HOST_ACCESSIBLE memory")

    def describe_memory(self, kind: str) -> str:
        return f"{kind}: {memory_label(self.memory_facts(kind))}"

    # --- values ----------------------------------------------------------------------------

    def wrap_cpu(self, storage: np.ndarray, dtype: tensors.DType):
        """A CPU OrtValue over `storage` itself (no copy): what a copy writes into it shows in numpy."""
        if dtype.name == "string":
            raise NotApplicable("onnxruntime's Python API creates no OrtValue from a string array")
        if dtype.numpy_native:
            value = self.ort.OrtValue.ortvalue_from_numpy(storage)
        else:
            value = self.ort.OrtValue.ortvalue_from_numpy_with_onnx_type(storage, dtype.onnx_type)
        if storage.size and value.data_ptr() != storage.ctypes.data:
            raise NotRun("onnxruntime copied the numpy array instead of wrapping it; bytes cannot be observed")
        return value

    def allocate(self, kind: str, dtype: tensors.DType, shape: tuple[int, ...]):
        """A new value in memory `kind`, allocated by onnxruntime from the EP's allocator."""
        info = self.memory_info(kind)
        if info is None:
            return self.ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype.onnx_type)
        if not self.target.facts["api"]["memory_info_alloc"]:
            raise NotRun(f"onnxruntime {self.ort.__version__} cannot allocate from an EP memory info (needs >= 1.30)")
        with self.calling(f"allocate {kind}"):
            return self.ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype.onnx_type, memory_info=info)

    def copy(self, sources: list, destinations: list, direction: str = "", stream=None) -> None:
        """copy_tensors; `direction` ('cpu>default', ...) names the call in flight precisely."""
        if not self.target.facts["api"]["copy_tensors"]:
            raise NotRun(f"onnxruntime {self.ort.__version__} has no copy_tensors (needs >= 1.23)")
        with self.calling(f"copy_tensors {direction}".strip()):
            self.ort.copy_tensors(sources, destinations, stream)

    def read(self, value, kind: str, dtype: tensors.DType, shape: tuple[int, ...]) -> tensors.Bytes:
        """The bytes of `value`: CPU values directly, device values through a copy to a
        CPU buffer pre-filled with a sentinel, so a copy that did nothing cannot look right."""
        if self.is_cpu_memory(kind):
            if dtype.numpy_native:
                return tensors.payload(value.numpy(), dtype)
            # numpy() has no bfloat16, float8 or 4-bit type: read the CPU buffer the value owns
            # through its data_ptr(), for exactly tensor_size_in_bytes() bytes.
            size = value.tensor_size_in_bytes()
            return ctypes.string_at(value.data_ptr(), size) if size else b""
        landing = tensors.sentinel(dtype, shape, 0xA5)
        self.copy([value], [self.wrap_cpu(landing, dtype)], f"{kind}>cpu")
        return tensors.payload(landing, dtype)

    def place(self, storage: np.ndarray, kind: str, dtype: tensors.DType):
        """A value in memory `kind` holding `storage`'s bytes (device values via copy_tensors)."""
        if kind == "cpu" or (self.memory_info(kind) is None):
            return self.wrap_cpu(storage, dtype)
        value = self.allocate(kind, dtype, storage.shape)
        self.copy([self.wrap_cpu(storage, dtype)], [value], f"cpu>{kind}")
        return value

    @contextlib.contextmanager
    def precondition(self, what: str):
        """A step that must work for the check to mean anything (e.g. placing valid values on
        the device before a bad request is tried): if onnxruntime fails there, the contract
        under test was not reached, so the case is not_run, not a failure of that contract."""
        try:
            yield
        except (NotApplicable, NotRun):
            raise
        except Exception as exc:
            raise NotRun(f"{what} failed, so the contract could not be tried: {type(exc).__name__}: {exc}") from None

    # --- sessions --------------------------------------------------------------------------

    def session(self, recipe: str, dtype: tensors.DType, shape: tuple[int, ...]) -> SessionInfo:
        key = (recipe, dtype.name, shape)
        if key not in self._sessions:
            try:
                model, path = self.models.get(recipe, dtype, shape)
            except UnbuildableModel as exc:
                raise NotApplicable(str(exc)) from None
            self.attempt(f"creating a session of model '{recipe}' ({dtype.name} {list(shape)}) on {self.target.provider}",
                         f"{self.preamble()}\n{self.session_snippet(path)}")
            try:
                with self.calling("InferenceSession creation"):
                    session = self.create_session(model)
            except Exception as exc:
                self._explain_refused_session(exc, model, path, recipe, dtype)
                raise
            self._sessions[key] = SessionInfo(session, path, recipe, self.assignment_of(session))
        return self._sessions[key]

    def create_session(self, model: bytes, device=None):
        """A session of `model` on the EP under test, made as every check's session is; on
        `device` (an OrtEpDevice) instead of this context's, where a check has fetched it anew."""
        device = device if device is not None else self.device
        options = self.ort.SessionOptions()
        options.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 3
        # The checks observe where values live and what the nodes compute, not parallel
        # speed: one thread per session, because creating a session's thread pools costs
        # 4-13 ms on a small machine, the largest single cost of a run.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry(ASSIGNMENT_CONFIG, "1")
        provider_options = self.target.provider_options
        for key, value in self.target.session_config.items():
            options.add_session_config_entry(key, value)
        if device is not None:
            options.add_provider_for_devices([device], provider_options)
            return self.ort.InferenceSession(model, options)
        return self.ort.InferenceSession(model, options, providers=[(self.target.provider, provider_options), "CPUExecutionProvider"])

    def _explain_refused_session(self, exc: Exception, model: bytes, path: Path | None, recipe: str, dtype: tensors.DType) -> None:
        """When a session for the EP fails, asks the CPU EP alone for the same model (onnxruntime's
        message differs when a plugin EP is registered, so the kit asks directly). If the CPU EP
        has no kernel either, no EP takes the model: the case does not apply. If the CPU EP runs
        it and the EP's session failed with NOT_IMPLEMENTED, the EP claimed nodes it could not
        run (ClaimedButUnrunnable). Otherwise the error stands as it is."""
        refusal = self._cpu_alone_refuses(model)
        if refusal is not None:
            if "NOT_IMPLEMENTED" in refusal or "Could not find an implementation" in refusal:
                raise NotApplicable(f"{recipe} with {dtype.name}: neither {self.target.provider} nor the CPU EP takes it ({refusal[:200]})") from None
            return
        if "NOT_IMPLEMENTED" not in str(exc):
            return
        ops = list(self.models.recipes[recipe].ops)
        # The nodes the EP claimed are not observable through the public API when the session
        # fails; a one-node model says it exactly.
        claimed = f"the 1 node ({ops[0]})" if len(ops) == 1 else f"1 or more of the {len(ops)} nodes ({', '.join(ops)})"
        raise ClaimedButUnrunnable(Violation(
            f"{self.target.provider} claimed {claimed} of model '{recipe}' with {dtype.name} in GetCapability but could not create "
            "a kernel for them (NOT_IMPLEMENTED); the CPU EP alone runs the model",
            expected=f"{self.target.provider} runs the nodes it claims, or declines them so that onnxruntime places them on another EP",
            actual=f"session creation failed: {first_line(exc)}",
            reproducer=f"{self.reproducer}  # fails: NOT_IMPLEMENTED\n"
                       f"ort.InferenceSession({str(path)!r}, providers=['CPUExecutionProvider'])  # the CPU EP alone runs it")) from None

    def _cpu_alone_refuses(self, model: bytes) -> str | None:
        """The first line of the CPU EP's refusal of `model` (None when it creates the session)."""
        options = self.ort.SessionOptions()
        options.log_severity_level = 3
        try:
            self.ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            return message_line(exc)
        return None

    def assignment_of(self, session) -> dict[str, list[str]]:
        """{EP name: op types of the nodes it runs}; {} where onnxruntime cannot say (before 1.24)."""
        if not self.target.facts["api"]["graph_assignment_info"]:
            return {}
        assignment: dict[str, list[str]] = {}
        for subgraph in session.get_provider_graph_assignment_info():
            assignment.setdefault(subgraph.ep_name, []).extend(node.op_type for node in subgraph.get_nodes())
        return assignment

    def require_nodes_on_ep(self, info: SessionInfo) -> list[str]:
        """The op types of the model that ran on other EPs ([] when all ran on the EP).

        The EP decides which nodes it takes, so nodes elsewhere are reported, not failed; but
        when the EP took no node of the model at all, nothing here tells about the EP: NotRun.
        That is also how a silent fallback to the CPU EP shows (a built-in EP whose hardware
        or libraries are missing)."""
        ops = list(self.models.recipes[info.recipe].ops)
        if not ops:
            return []
        if not self.target.facts["api"]["graph_assignment_info"]:
            if self.target.provider not in info.session.get_providers():
                raise NotRun(f"the session did not register {self.target.provider}: {info.session.get_providers()}")
            return []
        if not info.assignment.get(self.target.provider):
            raise NotRun(f"{self.target.provider} took no node of model '{info.recipe}' ({', '.join(ops)}); nodes ran on {info.assignment}")
        return [op for ep, nodes in info.assignment.items() if ep != self.target.provider for op in nodes]

    # --- reproducers -----------------------------------------------------------------------

    def preamble(self) -> str:
        lines = ["import numpy as np, onnxruntime as ort"]
        if self.target.registration:
            lines.append(f"ort.register_execution_provider_library({self.target.registration!r}, {self.target.library!r})")
        if self.device is not None:
            lines.append(f"dev = [d for d in ort.get_ep_devices() if d.ep_name == {self.target.provider!r}][{self.device_index}]")
        return "\n".join(lines)

    def session_snippet(self, model_path: Path | str | None) -> str:
        """Lines that create `s`, a session of the model on the EP under test (after `preamble`),
        made as `create_session` makes it: its node assignment recorded, the EP's options given."""
        provider_options = self.target.provider_options
        lines = ["so = ort.SessionOptions()", f"so.add_session_config_entry({ASSIGNMENT_CONFIG!r}, '1')"]
        lines += [f"so.add_session_config_entry({k!r}, {v!r})" for k, v in self.target.session_config.items()]
        if self.device is not None:
            lines += [f"so.add_provider_for_devices([dev], {provider_options!r})", f"s = ort.InferenceSession({str(model_path)!r}, so)"]
        else:
            lines.append(f"s = ort.InferenceSession({str(model_path)!r}, so, providers=[({self.target.provider!r}, {provider_options!r}), 'CPUExecutionProvider'])")
        return "\n".join(lines)

    def memory_expr(self, kind: str) -> str:
        if kind == "cpu" or self.memory_info(kind) is None:
            return "None"
        return f"dev.memory_info(ort.OrtDeviceMemoryType.{kind.upper()})"
