"""What a check works with: the EP device, its memories, values on them, and sessions.

`CheckContext` is the checks' one handle on five parts, each with one job: `guard`
(`progress.CallGuard`: the step announced, the reproducer, the risky call in flight, the calls
quarantined), `evidence` (`evidence.Evidence`: what the check proved, as data), `memories`
(`memories.Memories`: memory infos and facts, placing, copying and reading values), `sessions`
(`sessions.Sessions`: sessions built once per worker and shared, their node assignment, runs
that stay on the EP, refused sessions explained; `taken.TakenModels` finds a model a narrow EP takes) and `snippets` (`snippets.Snippets`:
reproducer code). They share one `DeviceUnderTest`. Checks call `ctx.place(...)`, `ctx.session(...)`:
each is the part's own method under its own name on the context, typed as the part's, so that
mypy and an editor follow `ctx.place` to `Memories.place`; the device's and the guard's data
are properties. A stand-in set on the context for a part's method replaces the part's too.
"""

from __future__ import annotations

import inspect
from typing import Any

from conformance.calls import Call
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
        self._name_the_parts_methods()
        parts = (self.under_test, self.guard, self.evidence, self.memories, self.sessions, self.snippets, self.taken_models)
        # Each method named above -> the part it is of: where a stand-in set on the context goes too.
        self._parts_of = {name: value.__self__ for name, value in vars(self).items()
                          if inspect.ismethod(value) and any(value.__self__ is part for part in parts)}

    def __setattr__(self, name: str, value: Any) -> None:
        """A stand-in set on the context for one of its parts' methods (a test's monkeypatch)
        replaces the part's own too, so that the parts calling one another use it as the check
        does (a copy stood in for is the one `read` makes)."""
        part = self.__dict__.get("_parts_of", {}).get(name)
        if part is not None:
            setattr(part, name, value)
        super().__setattr__(name, value)

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
    def facts(self) -> dict[str, Any]:
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

    def _name_the_parts_methods(self) -> None:
        """The parts' methods a check calls, each by its own name on the context: typed as the
        part's (a stand-in a test puts on the context replaces it there)."""
        under_test, guard, evidence, memories, sessions, snippets = (self.under_test, self.guard, self.evidence, self.memories,
                                                                    self.sessions, self.snippets)
        self.require_api = under_test.require_api
        self.attempt, self.calling, self.precondition = guard.attempt, guard.calling, guard.precondition
        self.prove, self.prove_item, self.tally, self.compare = evidence.prove, evidence.prove_item, evidence.tally, evidence.compare
        self.memory_info, self.memory_facts, self.is_cpu_memory = memories.memory_info, memories.memory_facts, memories.is_cpu_memory
        self.require_memory, self.describe_memory, self.only_plain_cpu = memories.require_memory, memories.describe_memory, memories.only_plain_cpu
        self.wrap_cpu, self.allocate, self.copy, self.read, self.place, self.watch = (memories.wrap_cpu, memories.allocate, memories.copy,
                                                                                      memories.read, memories.place, memories.watch)
        self.session, self.create_session, self.cpu_session, self.running = sessions.session, sessions.create_session, sessions.cpu_session, sessions.running
        self.assignment_of, self.require_nodes_on_ep = sessions.assignment_of, sessions.require_nodes_on_ep
        self.session_on_ep = self.taken_models.session_on_ep
        self.preamble, self.session_snippet, self.memory_expr = snippets.preamble, snippets.session_snippet, snippets.memory_expr
