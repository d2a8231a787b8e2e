"""What a check works with: the EP device, its memories, values on them, and sessions.

`CheckContext` is the checks' one handle on five parts, each with one job: `guard`
(`progress.CallGuard`: the step announced, the reproducer, the risky call in flight, the calls
quarantined), `evidence` (`evidence.Evidence`: what the check proved, as data), `memories`
(`memories.Memories`: memory infos and facts, placing, copying and reading values), `sessions`
(`sessions.Sessions`: sessions built once per worker and shared, their node assignment, runs
that stay on the EP, refused sessions explained; `taken.TakenModels` finds a model a narrow EP takes) and `snippets` (`snippets.Snippets`:
reproducer code). They share one `DeviceUnderTest`. Checks call `ctx.place(...)`, `ctx.session(...)`:
each is declared on the context with the part's own function (`place =
_PartsMethod("memories", Memories.place)`), typed as it, so that mypy and an editor follow
`ctx.place` to `Memories.place`; the device's and the guard's data are properties. A stand-in
set on the context for a part's method is set on the part, and one set on the part is what the
context calls.
"""

from __future__ import annotations

from typing import Any, Callable, Concatenate, Generic, ParamSpec, TypeVar

from conformance.calls import Call
from conformance.checks.context.device import DeviceUnderTest
from conformance.checks.context.evidence import Evidence
from conformance.checks.context.load import Load
from conformance.checks.context.memories import Memories
from conformance.checks.context.progress import CallGuard
from conformance.checks.context.sessions import SessionInfo, Sessions
from conformance.checks.context.snippets import ASSIGNMENT_CONFIG, Snippets
from conformance.checks.context.taken import TakenModels
from conformance.facts import DeviceFacts
from conformance.testbed.eps import EpTarget, import_onnxruntime
from conformance.testbed.models import ModelCache

__all__ = ["ASSIGNMENT_CONFIG", "CheckContext", "SessionInfo"]

P = ParamSpec("P")
R = TypeVar("R")


class _PartsMethod(Generic[P, R]):
    """A method of the context that is one of its part's (`part`), named with the part's own
    function (`method`): typed as that function, so that mypy and an editor follow `ctx.place` to
    `Memories.place`, and looked up on the part at each call, so that a stand-in set on the part
    (or on the context, which sets the part's) is what the check and the other parts both use."""

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]):
        self.part, self.name = part, method.__name__

    def __get__(self, context: Any, owner: type | None = None) -> Callable[P, R]:
        return getattr(getattr(context, self.part), self.name)

    def __set__(self, context: Any, stand_in: Callable[P, R]) -> None:
        setattr(getattr(context, self.part), self.name, stand_in)


class CheckContext:
    def __init__(self, target: EpTarget, device_index: int, models: ModelCache, load: Load | None = None):
        self.under_test = DeviceUnderTest.of(import_onnxruntime(), target, device_index)
        self.models = models
        self.load = load or Load()  # the stress tier's iterations, threads and sizes (--conformance-soak)
        self.guard = CallGuard()
        self.evidence = Evidence()
        self.memories = Memories(self.under_test, self.guard)
        self.snippets = Snippets(self.under_test)
        self.sessions = Sessions(self.under_test, models, self.guard, self.snippets, self.evidence)
        self.taken_models = TakenModels(self.sessions)
        # Whether the rule a contested contract holds for some EPs and builds (its `contested`)
        # applies to this EP device and build: set by the runner for each case.
        self.contested_rule_holds = False
    def begin(self, on_progress=None, quarantined: list[dict[str, Any]] | None = None) -> None:
        """A new check starts (see CallGuard.begin); it has proved nothing yet."""
        self.guard.begin(on_progress, quarantined)
        self.evidence.clear()
        self.memories.touched.clear()
        self.memories.guarded = []

    # The EP device (read through the shared DeviceUnderTest; a check that drops the library's
    # devices sets `device` to None, which every part then sees).
    @property
    def ort(self) -> Any:
        return self.under_test.ort

    @property
    def target(self) -> EpTarget:
        return self.under_test.target

    @property
    def device(self) -> Any:
        return self.under_test.device

    @device.setter
    def device(self, device: Any) -> None:
        self.under_test.device = device

    @property
    def facts(self) -> DeviceFacts:
        return self.under_test.facts

    @property
    def device_index(self) -> int:
        return self.under_test.index

    # What the running check does now (the guard's, as it last announced them).
    @property
    def step(self) -> str:
        return self.guard.step

    @property
    def reproducer(self) -> str:
        return self.guard.reproducer

    @property
    def quarantined(self) -> dict[Call, str]:
        return self.guard.quarantined

    # The parts' methods a check calls, each under its own name.
    require_api = _PartsMethod("under_test", DeviceUnderTest.require_api)
    attempt = _PartsMethod("guard", CallGuard.attempt)
    calling = _PartsMethod("guard", CallGuard.calling)
    precondition = _PartsMethod("guard", CallGuard.precondition)
    prove = _PartsMethod("evidence", Evidence.prove)
    prove_item = _PartsMethod("evidence", Evidence.prove_item)
    tally = _PartsMethod("evidence", Evidence.tally)
    compare = _PartsMethod("evidence", Evidence.compare)
    memory_info = _PartsMethod("memories", Memories.memory_info)
    memory_facts = _PartsMethod("memories", Memories.memory_facts)
    is_cpu_memory = _PartsMethod("memories", Memories.is_cpu_memory)
    require_memory = _PartsMethod("memories", Memories.require_memory)
    describe_memory = _PartsMethod("memories", Memories.describe_memory)
    only_plain_cpu = _PartsMethod("memories", Memories.only_plain_cpu)
    wrap_cpu = _PartsMethod("memories", Memories.wrap_cpu)
    allocate = _PartsMethod("memories", Memories.allocate)
    copy = _PartsMethod("memories", Memories.copy)
    read = _PartsMethod("memories", Memories.read)
    place = _PartsMethod("memories", Memories.place)
    watch = _PartsMethod("memories", Memories.watch)
    session = _PartsMethod("sessions", Sessions.session)
    create_session = _PartsMethod("sessions", Sessions.create_session)
    cpu_session = _PartsMethod("sessions", Sessions.cpu_session)
    running = _PartsMethod("sessions", Sessions.running)
    assignment_of = _PartsMethod("sessions", Sessions.assignment_of)
    require_nodes_on_ep = _PartsMethod("sessions", Sessions.require_nodes_on_ep)
    session_on_ep = _PartsMethod("taken_models", TakenModels.session_on_ep)
    preamble = _PartsMethod("snippets", Snippets.preamble)
    session_snippet = _PartsMethod("snippets", Snippets.session_snippet)
    memory_expr = _PartsMethod("snippets", Snippets.memory_expr)
