"""What a check works with: the EP device, its memories, values on them, and sessions.

`CheckContext` is the checks' one handle on five parts, each with one job: `guard`
(`progress.CallGuard`: the step announced, the reproducer, the risky call in flight, the calls
quarantined), `evidence` (`evidence.Evidence`: what the check proved, as data), `memories`
(`memories.Memories`: memory infos and facts, placing, copying and reading values), `sessions`
(`sessions.Sessions`: sessions built once per worker and shared, their node assignment, runs
that stay on the EP, refused sessions explained; `taken.TakenModels` finds a model a narrow EP takes) and `snippets` (`snippets.Snippets`:
reproducer code). They share one `DeviceUnderTest`. Checks call `ctx.place(...)`, `ctx.session(...)`; the
context forwards each name to the part that has it.
"""

from __future__ import annotations

from typing import Any

from conformance.checks.context.device import DeviceUnderTest
from conformance.checks.context.evidence import Evidence
from conformance.checks.context.memories import Memories
from conformance.checks.context.progress import CallGuard
from conformance.checks.context.sessions import SessionInfo, Sessions
from conformance.checks.context.snippets import ASSIGNMENT_CONFIG, Snippets
from conformance.checks.context.taken import TakenModels
from conformance.target.eps import EpTarget, import_onnxruntime
from conformance.target.models import ModelCache

__all__ = ["ASSIGNMENT_CONFIG", "CheckContext", "SessionInfo"]


class _Part:
    """An attribute of the context that is a part's attribute of the same name (or `name`).
    Setting it sets the part's, so that a stand-in put on the context (a test's monkeypatch, a
    check dropping its EP device) is what the part itself then uses too."""

    def __init__(self, part: str, name: str = ""):
        self.part, self.name = part, name

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = self.name or name

    def __get__(self, context: Any, owner: type | None = None) -> Any:
        return self if context is None else getattr(getattr(context, self.part), self.name)

    def __set__(self, context: Any, value: Any) -> None:
        setattr(getattr(context, self.part), self.name, value)


class CheckContext:
    def __init__(self, target: EpTarget, device_index: int, models: ModelCache):
        self.under_test = DeviceUnderTest.of(import_onnxruntime(), target, device_index)
        self.models = models
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

    # the EP device
    ort, target, device, facts, require_api = (_Part("under_test") for _ in range(5))
    device_index = _Part("under_test", "index")
    # what the running check does
    attempt, calling, precondition, step, reproducer, quarantined = (_Part("guard") for _ in range(6))
    # what it proved
    prove, prove_item, tally, compare = (_Part("evidence") for _ in range(4))
    # memories and values
    memory_info, memory_facts, is_cpu_memory, require_memory, describe_memory = (_Part("memories") for _ in range(5))
    wrap_cpu, allocate, copy, read, place, only_plain_cpu, watch = (_Part("memories") for _ in range(7))
    # sessions
    session, create_session, assignment_of, require_nodes_on_ep, running, cpu_session = (_Part("sessions") for _ in range(6))
    session_on_ep = _Part("taken_models")
    # reproducers
    preamble, session_snippet, memory_expr = (_Part("snippets") for _ in range(3))
