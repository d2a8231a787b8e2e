"""Sessions of the kit's models on the EP under test, built once per worker and shared by the
checks; which EP took which nodes; and why onnxruntime refused a session, where the kit can say."""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from conformance.testbed import tensors
from conformance.calls import Call
from conformance.checks.context.device import DeviceUnderTest
from conformance.checks.context.evidence import Evidence
from conformance.checks.context.progress import CallGuard
from conformance.checks.context.snippets import ASSIGNMENT_CONFIG, Snippets
from conformance.findings import ClaimedButUnrunnable, NotApplicable, NotRun, SilentRetry, Violation, first_line, message_line
from conformance.testbed.models import ModelCache, UnbuildableModel
from conformance import proofs


@dataclass
class SessionInfo:
    session: Any
    model_path: Path | None
    recipe: str
    assignment: dict[str, list[str]]  # EP name -> op types it took
    dtype: str = ""  # the element type and shape the model was built for ('' and () where not known)
    shape: tuple[int, ...] = ()


# The shape of the checks' session models, and the float32 models an EP that works here likely
# takes: the probes that tell an EP declining one model from an EP that takes none.
SESSION_SHAPE = (3, 5)
FUNCTIONAL_PROBES = ("add", "relu", "identity")


def cpu_input_run(shape: tuple[int, ...] = SESSION_SHAPE) -> Call:
    """The call of a session run with its inputs in CPU memory, one call per input shape: the
    checks that make it share it, so that a run that crashed or hung in one is not made again in
    another, while an EP that aborts on an empty or scalar input does not stop the runs of the
    usual 3x5 inputs on its device."""
    return Call("InferenceSession.run", note="inputs in cpu" if shape == SESSION_SHAPE else f"inputs in cpu, shape {list(shape)}")


def plain_run_words(shape: tuple[int, ...]) -> str:
    """A plain run of the model a check needs before it tries its own contract, in words. A run
    of an empty input that fails there is session.empty-tensors' failure (where the EP took the
    nodes): the words name that contract, so that a reader of the not_run case finds the finding."""
    if tensors.element_count(shape):
        return "a plain run of the same model"
    return f"a plain run of the same model on an empty input ({list(shape)}; session.empty-tensors tries that run itself)"


# What onnxruntime's Python InferenceSession prints when it retries a failed run (or a failed
# creation) on its fallback providers: "EP Error: <error> using [...]", then this line.
RETRY_LOG = "Falling back to"


class Sessions:
    def __init__(self, under_test: DeviceUnderTest, models: ModelCache, guard: CallGuard, snippets: Snippets,
                 evidence: Evidence | None = None):
        self.under_test, self.models, self.guard, self.snippets = under_test, models, guard, snippets
        self.evidence = evidence if evidence is not None else Evidence()
        self._sessions: dict[tuple[str, str, tuple[int, ...]], SessionInfo] = {}

    def session(self, recipe: str, dtype: tensors.DType, shape: tuple[int, ...]) -> SessionInfo:
        key = (recipe, dtype.name, shape)
        if key not in self._sessions:
            try:
                model, path = self.models.get(recipe, dtype, shape)
            except UnbuildableModel as exc:
                raise NotApplicable(str(exc)) from None
            self.guard.attempt(f"creating a session of model '{recipe}' ({dtype.name} {list(shape)}) on {self.under_test.target.provider}",
                               self.snippets.script(f"a session of model '{recipe}' ({dtype.name} {list(shape)}) on {self.under_test.target.provider}",
                                                    self.snippets.session_snippet(path)))
            try:
                with self.guard.calling(Call("InferenceSession creation")):
                    session = self.create_session(model)
            except Exception as exc:
                Refusal(self.under_test, self.models, self.guard.reproducer).explain(exc, model, path, recipe, dtype)
                raise
            info = self._sessions[key] = SessionInfo(session, path, recipe, self.assignment_of(session), dtype.name, shape)
            if path is not None and info.assignment.get(self.under_test.target.provider):
                self.snippets.taken[os.path.abspath(path)] = sorted(info.assignment[self.under_test.target.provider])
        return self._sessions[key]

    def made(self) -> dict[tuple[str, str, tuple[int, ...]], SessionInfo]:
        """The sessions this worker has made, by (recipe, element type, shape); "cpu:" recipes are the CPU EP's alone."""
        return dict(self._sessions)

    def cpu_session(self, recipe: str, dtype: tensors.DType, shape: tuple[int, ...]) -> SessionInfo:
        """A session of the model on the CPU EP alone, the EP under test not in it: for the
        paths that are onnxruntime's own (CPU memory at every end). Built once per worker."""
        key = ("cpu:" + recipe, dtype.name, shape)
        if key not in self._sessions:
            model, path = self.models.get(recipe, dtype, shape)
            options = self.under_test.ort.SessionOptions()
            options.log_severity_level = 3
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            with self.guard.calling(Call("InferenceSession creation", note="CPU EP alone")):
                session = self.under_test.ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
            self._sessions[key] = SessionInfo(session, path, recipe, {"CPUExecutionProvider": list(self.models.recipes[recipe].ops)})
        return self._sessions[key]

    def create_session(self, model: bytes, device=None, *, intra_op_threads: int = 1, config: dict[str, str] | None = None):
        """A session of `model` on the EP under test, made as every check's session is; on
        `device` (an OrtEpDevice) instead of this context's, where a check has fetched it anew;
        with `intra_op_threads` for a check about sessions under load (the stress tier); with
        the session config entries `config` besides the run's (a check of what one of them does)."""
        ort, target = self.under_test.ort, self.under_test.target
        device = device if device is not None else self.under_test.device
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 3
        # The checks observe where values live and what the nodes compute, not parallel
        # speed: one thread per session, because creating a session's thread pools costs
        # 4-13 ms on a small machine, the largest single cost of a run.
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry(ASSIGNMENT_CONFIG, "1")
        provider_options = target.provider_options
        for key, value in {**target.session_config, **(config or {})}.items():
            options.add_session_config_entry(key, value)
        # No silent retry: Python's InferenceSession reruns a failed EP kernel (and recreates a
        # failed session) on the CPU EP and returns that result; the kit must see the EP's error.
        if device is not None:
            options.add_provider_for_devices([device], provider_options)
            session = ort.InferenceSession(model, options, enable_fallback=0)
        else:
            session = ort.InferenceSession(model, options, providers=[(target.provider, provider_options), "CPUExecutionProvider"],
                                           enable_fallback=0)
        session.disable_fallback()  # builds that predate the keyword ignore it
        return session

    @contextlib.contextmanager
    def running(self, info: SessionInfo) -> Iterator[None]:
        """Around a run of `info`'s session: a run that onnxruntime retried on another EP anyway
        (its providers lost the EP under test, or it logged the retry) is SilentRetry, naming the
        EP's error from the log; a run that stayed on the EP counts as evidence (`runs_on_ep`)."""
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log):
                yield
        finally:
            retry = self._retry_seen(info, log.getvalue())
            if retry is not None:
                # The session now runs elsewhere: later checks get one of their own, on the EP.
                self._sessions = {key: kept for key, kept in self._sessions.items() if kept is not info}
                raise SilentRetry(retry)
        self.evidence.tally(proofs.RUNS_ON_EP, 1)

    def _retry_seen(self, info: SessionInfo, log: str) -> Violation | None:
        provider = self.under_test.target.provider
        providers = info.session.get_providers()
        if RETRY_LOG not in log and provider in providers:
            return None
        error = next((line.split("EP Error: ", 1)[1].rsplit(" using ", 1)[0] for line in log.splitlines() if "EP Error: " in line),
                     "(the EP's error was not logged)")
        return Violation(f"a run of model '{info.recipe}' failed on {provider} and onnxruntime retried it on {', '.join(providers)}: {error}",
                         expected=f"the run on {provider}, or its error (the session's fallback is disabled)",
                         actual=f"retried on {', '.join(providers)} after: {error}")

    def assignment_of(self, session) -> dict[str, list[str]]:
        """{EP name: op types of the nodes it runs}; {} where onnxruntime cannot say (before 1.24)."""
        if not self.under_test.target.has_api("graph_assignment_info"):
            return {}
        assignment: dict[str, list[str]] = {}
        for subgraph in session.get_provider_graph_assignment_info():
            assignment.setdefault(subgraph.ep_name, []).extend(node.op_type for node in subgraph.get_nodes())
        return assignment

    def require_nodes_on_ep(self, info: SessionInfo) -> list[str]:
        """The op types of the model that ran on other EPs ([] when all ran on the EP).

        The EP decides which nodes it takes, so nodes elsewhere are reported, not failed; but
        when the EP took no node of the model at all, nothing here tells about the EP. Where it
        takes some float32 model here, it declined this one (an element type or a shape it does
        not take, such as OpenVINO's scalars and empty tensors): NotApplicable, saying so. Where
        it takes none, it is not functional here, which is how a silent fallback to the CPU EP
        shows (a built-in EP whose hardware or libraries are missing): NotRun."""
        target = self.under_test.target
        ops = list(self.models.recipes[info.recipe].ops)
        if not ops:
            return []
        if not target.has_api("graph_assignment_info"):
            if target.provider not in info.session.get_providers():
                raise NotRun(f"the session did not register {target.provider}: {info.session.get_providers()}")
            self.evidence.prove(proofs.PROVIDERS, info.session.get_providers())
            return []
        if not info.assignment.get(target.provider):
            taken = a_model_it_takes(self)
            if not taken:
                raise NotRun(f"{target.provider} took no node of model '{info.recipe}' ({', '.join(ops)}); nodes ran on {info.assignment}")
            built = f" with {info.dtype} {list(info.shape)}" if info.dtype else ""
            where = ", ".join(info.assignment) or "no EP its node assignment names"
            raise NotApplicable(f"{target.provider} declines model '{info.recipe}'{built} (it takes {taken}): onnxruntime placed the nodes on {where}")
        self.evidence.prove(proofs.NODES_ON_EP, list(info.assignment[target.provider]))
        elsewhere = [op for ep, nodes in info.assignment.items() if ep != target.provider for op in nodes]
        if elsewhere:
            self.evidence.prove(proofs.NODES_ELSEWHERE, elsewhere)
        return elsewhere


def a_model_it_takes(sessions: Sessions) -> str:
    """A float32 model of which the EP takes nodes, in words ('' when it takes none of them)."""
    float32 = tensors.DTYPES["float32"]
    for recipe in FUNCTIONAL_PROBES:
        try:
            info = sessions.session(recipe, float32, SESSION_SHAPE)
        except (NotApplicable, NotRun):
            continue
        if info.assignment.get(sessions.under_test.target.provider):
            return f"the float32 model '{recipe}'"
    return ""


class Refusal:
    """Why the EP's session of a model failed, where the kit can tell: no EP takes the model,
    or the EP claimed nodes it cannot run. `reproducer`: the snippet of the failed creation."""

    def __init__(self, under_test: DeviceUnderTest, models: ModelCache, reproducer: str):
        self.under_test, self.models, self.reproducer = under_test, models, reproducer

    def explain(self, exc: Exception, model: bytes, path: Path | None, recipe: str, dtype: tensors.DType) -> None:
        """Asks the CPU EP alone for the same model (onnxruntime's message differs when a plugin
        EP is registered, so the kit asks directly). If the CPU EP has no kernel either, no EP
        takes the model: the case does not apply. If the CPU EP runs it and the EP's session
        failed with NOT_IMPLEMENTED, the EP claimed nodes it could not run
        (ClaimedButUnrunnable). Otherwise the error stands as it is."""
        provider = self.under_test.target.provider
        refusal = self._cpu_alone_refuses(model)
        if refusal is not None:
            if "NOT_IMPLEMENTED" in refusal or "Could not find an implementation" in refusal:
                raise NotApplicable(f"{recipe} with {dtype.name}: neither {provider} nor the CPU EP takes it ({refusal[:200]})") from None
            return
        if "NOT_IMPLEMENTED" not in str(exc):
            return
        ops = list(self.models.recipes[recipe].ops)
        # The nodes the EP claimed are not observable through the public API when the session
        # fails; a one-node model says it exactly.
        claimed = f"the 1 node ({ops[0]})" if len(ops) == 1 else f"1 or more of the {len(ops)} nodes ({', '.join(ops)})"
        raise ClaimedButUnrunnable(Violation(
            f"{provider} claimed {claimed} of model '{recipe}' with {dtype.name} in GetCapability but could not create "
            "a kernel for them (NOT_IMPLEMENTED); the CPU EP alone runs the model",
            expected=f"{provider} runs the nodes it claims, or declines them so that onnxruntime places them on another EP",
            actual=f"session creation failed: {first_line(exc)}",
            reproducer=f"{self.reproducer}  # fails: NOT_IMPLEMENTED\n"
                       f"ort.InferenceSession({str(path)!r}, providers=['CPUExecutionProvider'])  # the CPU EP alone runs it")) from None

    def _cpu_alone_refuses(self, model: bytes) -> str | None:
        """The first line of the CPU EP's refusal of `model` (None when it creates the session)."""
        ort = self.under_test.ort
        options = ort.SessionOptions()
        options.log_severity_level = 3
        try:
            ort.InferenceSession(model, options, providers=["CPUExecutionProvider"], enable_fallback=0)
        except Exception as exc:
            return message_line(exc)
        return None
