"""Repetition in one process (issue 36, item 5): thousands of copies in each direction the EP
device copies, thousands of allocations and frees in its DEFAULT memory, a thousand session runs
and a hundred sessions created and released, the last as right as the first, and memory that
does not grow: the process's resident memory, and the DEFAULT allocator's own figures where it
reports them.

Each loop makes its bounded count of calls, the same on every machine (a handle pool that runs
dry at call 8,000 is reached by every run), and under a soak goes on in rounds of that count
until the soak's deadline. Bytes are checked at the first call, at the regular points where
memory is sampled, and at the last; memory is sampled after a warm-up and judged by its slope
(`endurance_growth`). A loop says where it is about once a second: the worker's timeout counts
from the last announcement.

The first call of each loop is the functional tier's to judge: a direction the EP refuses is
not_applicable here, a model it cannot run or an allocation it refuses outright not_run, never a
stress failure. Copies go through Python's copy_tensors: measured on refdev (2 cores), 5.3 µs a
call against 6.1 µs through the C API by ctypes, so the C path buys no time here; allocations
go through the C API, where the allocator's statistics are (AllocatorGetStats).
"""

from __future__ import annotations

import ctypes
import time
from typing import Any, Callable, Generator, Iterator

import numpy as np

from conformance.calls import Call
from conformance.checks import endurance_scripts as scripts
from conformance.checks.context import CheckContext, SessionInfo
from conformance.checks.context.memories import COPIES_WORKED
from conformance.checks.context.reference import reference, small_integers
from conformance.checks.context.sessions import SESSION_SHAPE, cpu_input_run
from conformance.checks.endurance_growth import RSS, Gauge, Heartbeat, Sampler, plural, size_text
from conformance.checks.registry import check
from conformance.errors import KitError
from conformance.findings import NotApplicable, NotRun, Violation, first_line, message_line
from conformance.testbed import tensors
from conformance.testbed.eps import memory_label
from conformance.testbed.guard import GuardedArray
from conformance.testbed.interop import capi as C
from conformance.testbed.interop import rig
from conformance.testbed.interop.default_allocator import DefaultAllocator
from conformance import proofs

COPIES, ALLOCATIONS, RUNS, SESSIONS = 10_000, 10_000, 1_000, 100
ELEMENTS = 4096  # float32: 16 KiB a tensor, so that a leak of the tensor's size per call crosses the threshold too
FEED_SETS = 11  # a run's inputs change from run to run: an EP that hands back a stale output is seen at the next run
FLOAT32 = tensors.DTYPES["float32"]
SENTINEL = 0x5A
STATS = ("InUse", "TotalAllocated")  # the allocator's figure sampled: the first it reports


# Where the bounded count's samples grow, the loop goes on for up to this many more rounds of the
# count and is judged over all of them: a slope is confirmed over more calls, never read off a
# heap that grew once or twice in a short run (the OpenVINO plugin's 100 sessions on a loaded
# machine: two 512 KiB steps of glibc's heap early on, flat after, read 6.4 KiB per session).
CONFIRM_ROUNDS = 2


class _Loop:
    """What a loop of one case shares: its bounded count, the sampler, the heartbeat, the words
    of its step and its reproducer."""

    def __init__(self, ctx: CheckContext, count: int, per: str, gauges: list[Gauge], what: str):
        self.ctx, self.count, self.per, self.what = ctx, count, per, what
        self.sampler = Sampler(count, gauges, per)
        self.beat = Heartbeat()
        self.snippet = ""
        self.started = time.monotonic()
        self.deadline = ctx.load.deadline()
        self.confirming = 0  # rounds of the count added because the bounded count's samples grew (`calls`)

    def calls(self, start: int = 2) -> Iterator[int]:
        """`start` to the bounded count; then, where the samples of the bounded count grew, up to
        CONFIRM_ROUNDS more rounds of the count while they still grow (a leak keeps its slope
        over more calls; an allocator that grew its heap once or twice early on, as a loaded
        machine makes glibc do, is diluted by them); under a soak, rounds of the count until its
        deadline."""
        call = start
        while call <= self.count:
            yield call
            call += 1
        while not self.ctx.load.soaking and self.confirming < CONFIRM_ROUNDS and any(g.grows for g in self.sampler.growths()):
            self.confirming += 1
            for _ in range(self.count):
                yield call
                call += 1
        while self.ctx.load.soaking and time.monotonic() < self.deadline:
            for _ in range(self.count):
                yield call
                call += 1

    def announce(self, call: int) -> None:
        if self.beat.due():
            where = (f"of {self.count:,}" if call <= self.count else f"(confirming a growth: {self.count:,} more per round)" if self.confirming
                     else f"(the soak's rounds of {self.count:,} after the bounded count)")
            self.ctx.attempt(f"{self.what}: {self.per} {call:,} {where}", self.snippet)

    def repeat(self, step: Callable[[int], Violation | None], failed: Callable[[int, Exception], Violation],
               stopped: Violation | None) -> tuple[Violation | None, int]:
        """`step(call)` for each of `calls()` (none when the first call already `stopped` the
        loop) until one gives a violation, or raises what `failed(call, error)` says (a kit
        error goes on up); returns that violation, or None, and the last call that was right."""
        made = 1
        for call in ([] if stopped else self.calls()):
            try:
                stopped = step(call)
            except KitError:
                raise
            except Exception as exc:
                stopped = failed(call, exc)
            if stopped:
                break
            made = call
            self.sampler.after(call)
            self.announce(call)
        return stopped, made

    def ended(self, stopped: Violation | None, made: int) -> Iterator[Violation]:
        """The violation that stopped the loop, with the loop's reproducer, then `judged`."""
        if stopped:
            stopped.reproducer = self.snippet
            yield stopped
        yield from self.judged(made, made, stopped is not None)

    def judged(self, made: int, checks: int, stopped: bool) -> Iterator[Violation]:
        """The evidence of the loop, and a violation for each gauge that grew. Where nothing
        could be sampled (no /proc/self/statm, an allocator that reports nothing) the memory half
        of the contract was not shown: not_run, unless the loop already failed."""
        ctx = self.ctx
        ctx.prove(proofs.CALLS, {"made": made, "bounded": self.count, "per": self.per, "load": ctx.load.describe()})
        if self.confirming:
            ctx.prove(proofs.CONFIRMING_ROUNDS, self.confirming)
        ctx.prove(proofs.CHECKPOINTS, checks)
        ctx.prove(proofs.SECONDS, round(time.monotonic() - self.started, 2))
        growths = self.sampler.growths()
        ctx.prove(proofs.GROWTH, {growth.key: growth.curve() for growth in growths})
        if self.sampler.dropped:
            ctx.prove(proofs.GAUGES_DROPPED, dict(self.sampler.dropped))
        for growth in growths:
            if growth.grows:
                yield Violation(f"{growth.describe()}: above {size_text(growth.threshold)} per {self.per}",
                                expected=f"at most {size_text(growth.threshold)} per {self.per} (the median slope between every two samples after the warm-up)",
                                actual=f"{growth.slope:,.0f} bytes per {self.per}, {growth.per_1000_calls:,.0f} per 1,000 {plural(self.per)}",
                                reproducer=self.snippet)
        if not stopped and not any(growth.judged for growth in growths):
            raise NotRun(f"{made:,} {plural(self.per)} were right, but memory could not be sampled here "
                         f"({'; '.join(self.sampler.dropped.values()) or 'no gauge'}; process RSS is read from /proc/self/statm, Linux): "
                         "whether it grows is not shown")


def _failed_after_working(what: str, worked: dict[str, int], exc: BaseException, snippet: str) -> Violation:
    """A copy that worked earlier in this process fails before this check's repetition began."""
    earlier = ", ".join(f"{count:,} copy_tensors {direction}" for direction, count in worked.items())
    return Violation(f"{what} after {earlier} had worked earlier in this process: {first_line(exc)}",
                     expected="copies that worked in this process to keep working", actual=first_line(exc), reproducer=snippet)


class _Destination:
    """Where copies land, and its bytes read back: in CPU memory a guarded host array read where
    it is; in device memory a value read through copy_tensors into one guarded host array that
    every checkpoint reuses (so a checkpoint keeps nothing alive that the memory samples would see)."""

    def __init__(self, ctx: CheckContext, kind: str):
        self.ctx, self.kind = ctx, kind
        sentinel = tensors.sentinel(FLOAT32, (ELEMENTS,), SENTINEL)
        self.landing = ctx.memories.guarded_copy(sentinel, f"destination of the copies ({kind} memory)" if kind == "cpu" else "read-back landing", "ep")
        self.landing_value = ctx.wrap_cpu(self.landing, FLOAT32)
        self.value = self.landing_value if kind == "cpu" else ctx.place(sentinel, kind, FLOAT32)

    def diff(self, expected: Any) -> tensors.ByteDiff | None:
        if self.kind != "cpu":
            self.landing.reshape(-1).view(np.uint8)[:] = 0xA5
            self.ctx.copy([self.value], [self.landing_value], f"{self.kind}>cpu")
        return self.ctx.compare(expected, tensors.payload(self.landing, FLOAT32))


@check("endurance.copies", apis=("copy_tensors",))
def copies(ctx: CheckContext, direction: str) -> Iterator[Violation]:
    source_kind, destination_kind = direction.split(">")
    for kind in (source_kind, destination_kind):
        ctx.require_memory(kind)
    patterns = [tensors.sample(FLOAT32, (ELEMENTS,), seed=22), tensors.sample(FLOAT32, (ELEMENTS,), seed=21)]  # call n copies patterns[n % 2]
    expected = [tensors.payload(pattern, FLOAT32) for pattern in patterns]
    loop = _Loop(ctx, COPIES, "copy", [RSS], f"copy_tensors {direction}")
    loop.snippet = scripts.copies(ctx.snippets, direction, COPIES, loop.sampler, ELEMENTS)
    ctx.attempt(f"placing two sources in {source_kind} memory and a destination in {destination_kind} memory", loop.snippet)
    placing = f"placing the sources ({source_kind}) and the destination ({destination_kind}) of the copies"
    # Placing device values copies cpu>kind: where those copies worked earlier in this process, a
    # failure now is the EP that stopped copying after repetition (a pool run dry by the checks
    # before this one), which this contract is about, never a set-up that could not be made.
    worked = {used: COPIES_WORKED[used] for used in (f"cpu>{kind}" for kind in dict.fromkeys((source_kind, destination_kind)) if kind != "cpu")
              if COPIES_WORKED[used]}
    try:
        with ctx.precondition(placing):
            sources = [ctx.place(pattern, source_kind, FLOAT32) for pattern in patterns]
            destination = _Destination(ctx, destination_kind)
    except NotRun as not_run:
        if not worked or not_run.__context__ is None:
            raise
        yield _failed_after_working(f"{placing} failed", worked, not_run.__context__, loop.snippet)
        return
    ctx.prove(proofs.MEMORY, {"source": memory_label(ctx.memory_facts(source_kind)), "destination": memory_label(ctx.memory_facts(destination_kind))})
    ctx.prove(proofs.TENSOR_BYTES, ELEMENTS * 4)
    ctx.attempt(f"copy_tensors {direction}: copy 1 of {COPIES:,}", loop.snippet)
    try:
        ctx.copy([sources[1]], [destination.value], direction)
    except KitError:
        raise
    except Exception as exc:
        if COPIES_WORKED[direction]:
            yield _failed_after_working(f"copy 1 of {COPIES:,} failed", {direction: COPIES_WORKED[direction]}, exc, loop.snippet)
            return
        raise NotApplicable(f"copy_tensors {direction} is refused here ({message_line(exc)}): nothing to repeat "
                            "(whether the EP must offer this direction is the functional tier's to judge)") from None
    made, checks = 1, 1
    stopped = _checkpoint(destination, expected[1], direction, 1, 0, loop.snippet)
    right_at = 0 if stopped else 1
    with ctx.calling(Call("copy_tensors", direction, f"{COPIES:,} in a row")):
        for call in ([] if stopped else loop.calls()):
            try:
                ctx.copy([sources[call % 2]], [destination.value], direction)
            except KitError:
                raise
            except Exception as exc:
                stopped = Violation(f"copy_tensors {direction} failed at copy {call:,} of {COPIES:,}, after {call - 1:,} that worked: {first_line(exc)}",
                                    expected=f"all {COPIES:,} copies to work, the last as the first", actual=f"copy {call:,}: {first_line(exc)}",
                                    reproducer=loop.snippet)
                break
            made = call
            if loop.sampler.after(call) or call == COPIES:
                checks += 1
                stopped = _checkpoint(destination, expected[call % 2], direction, call, right_at, loop.snippet)
                if stopped:
                    break
                right_at = call
            loop.announce(call)
        if not stopped and right_at != made:  # the last copy of a soak's last round
            checks += 1
            stopped = _checkpoint(destination, expected[made % 2], direction, made, right_at, loop.snippet)
    if stopped:
        yield stopped
    yield from loop.judged(made, checks, stopped is not None)


def _checkpoint(destination: _Destination, expected: Any, direction: str, call: int, right_at: int, snippet: str) -> Violation | None:
    """The destination's bytes after copy `call` (`right_at`: the last copy found right, 0 for
    none): a violation where they are wrong, or where they cannot be read back."""
    try:
        diff = destination.diff(expected)
    except KitError:
        raise
    except Exception as exc:
        return Violation(f"after {call:,} copies {direction}, reading the destination back ({destination.kind}>cpu) failed: {first_line(exc)}",
                         expected="the destination read back", actual=first_line(exc), reproducer=snippet)
    if diff is None:
        return None
    when = f"after copy {right_at:,} was right" if right_at else "from the first copy on"
    return Violation(f"copy_tensors {direction} delivered wrong bytes at copy {call:,} of {COPIES:,} ({when}): {diff.describe()}",
                     expected="the source's bytes at every checkpoint, the last as the first", actual=diff.describe(), reproducer=snippet)


# --- allocations and frees in the DEFAULT memory ----------------------------------------------

class _Bytes:
    """A checkpoint of the allocations: a pattern written into a fresh tensor of the allocator's
    and read back; through its address where the CPU reads that memory, else with CopyTensors
    (the C API, as the allocation) from and into two guarded host arrays kept for the whole loop.
    Where the EP copies nothing into its DEFAULT memory, the bytes are not checked (`refusal`)."""

    def __init__(self, ctx: CheckContext, allocator: DefaultAllocator):
        self.ctx, self.allocator, self.api = ctx, allocator, allocator.api
        self.source, self.landing = GuardedArray(np.float32, (ELEMENTS,)), GuardedArray(np.float32, (ELEMENTS,))
        ctx.watch(self.source, "source of the checkpoints' writes", "ep")
        ctx.watch(self.landing, "read-back landing", "ep")
        self.host = [] if allocator.cpu_readable else [C.cpu_tensor_at(self.api, guarded.address, ELEMENTS * 4, (ELEMENTS,), C.ELEMENT_TYPES["float32"])
                                                       for guarded in (self.source, self.landing)]
        self.refusal, self.right_at, self.checks = "", 0, 0

    def check(self, value: Any, call: int) -> Violation | None:
        if self.refusal:
            return None
        pattern = tensors.sample(FLOAT32, (ELEMENTS,), seed=call)  # its own bytes at each checkpoint: a stale read shows
        try:
            got = self._roundtrip(value, pattern)
        except C.OrtError as exc:
            if call == 1:
                self.refusal = f"CopyTensors refused: {exc.message}"
                self.ctx.prove(proofs.BYTES_NOT_CHECKED, f"the EP copies nothing into its DEFAULT memory through the C API ({exc.message})")
                return None
            return Violation(f"after {call - 1:,} allocations and frees, the bytes of allocation {call:,} could not be written and read back: {exc}",
                             expected="the pattern written and read back, as at the first allocation", actual=str(exc))
        self.checks += 1
        diff = self.ctx.compare(tensors.payload(pattern, FLOAT32), got)
        if diff is None:
            self.right_at = call
            return None
        when = f"right at allocation {self.right_at:,}" if self.right_at else "wrong from the first allocation on"
        return Violation(f"allocation {call:,} of {ALLOCATIONS:,} from the DEFAULT allocator gave back other bytes than were written into it ({when}): "
                         f"{diff.describe()}", expected="the pattern written", actual=diff.describe())

    def _roundtrip(self, value: Any, pattern: np.ndarray) -> Any:
        self.source.array[...] = pattern
        self.landing.array.view(np.uint8)[:] = 0xA5
        if self.allocator.cpu_readable:
            address = C.data_address(self.api, value)
            ctypes.memmove(address, self.source.address, ELEMENTS * 4)
            ctypes.memmove(self.landing.address, address, ELEMENTS * 4)
        else:
            with self.ctx.calling(Call("CopyTensors", "cpu>default")):
                C.copy_tensors(self.api, self.allocator.env, [self.host[0]], [value])
            with self.ctx.calling(Call("CopyTensors", "default>cpu")):
                C.copy_tensors(self.api, self.allocator.env, [value], [self.host[1]])
        return tensors.payload(self.landing.array, FLOAT32)

    def close(self) -> None:
        for value in self.host:
            self.api.call("ReleaseValue", value)


@check("endurance.allocations")
def allocations(ctx: CheckContext) -> Iterator[Violation]:
    ctx.memory_info("default")  # the case is about the device's DEFAULT memory (plain CPU memory where it advertises none)
    api, env, device = rig.c_device(ctx)
    try:
        allocator = DefaultAllocator(api, env, device)
    except (C.Unavailable, C.OrtError) as exc:
        raise NotRun(f"the EP device's DEFAULT allocator cannot be had through the C API: {exc}") from None
    before = allocator.stats()
    gauges = [RSS]
    stat = next((key for key in STATS if before.get(key, "").isdigit()), "")
    if stat:
        gauges.append(Gauge(f"allocator_{stat}", f"the DEFAULT allocator's {stat}", lambda: allocator.stat(stat)))
    loop = _Loop(ctx, ALLOCATIONS, "allocation", gauges, f"allocations and frees in {allocator.label}")
    loop.snippet = scripts.allocations(ctx.snippets, C.API_VERSION, ALLOCATIONS, loop.sampler, ELEMENTS, stat or None)
    ctx.prove(proofs.MEMORY, {"default": allocator.label})
    ctx.prove(proofs.TENSOR_BYTES, ELEMENTS * 4)
    checker = _Bytes(ctx, allocator)
    try:
        made, stopped = yield from _allocate(ctx, loop, allocator, checker)
    finally:
        checker.close()
    ctx.prove(proofs.ALLOCATOR_STATS, {"before": before, "after": allocator.stats()} if before else
              f"the allocator reports none{f' ({allocator.stats_refusal})' if allocator.stats_refusal else ''}")
    yield from loop.judged(made, checker.checks, stopped)


def _allocate(ctx: CheckContext, loop: _Loop, allocator: DefaultAllocator, checker: _Bytes) -> Generator[Violation, None, tuple[int, bool]]:
    """The loop of allocations and frees; returns (the allocations made, whether it stopped on a violation)."""
    ctx.attempt(f"allocation 1 of {ALLOCATIONS:,} from the DEFAULT allocator ({allocator.label})", loop.snippet)
    with ctx.precondition("the first allocation from the DEFAULT allocator (memory-info.allocatable judges it)"):
        with ctx.calling(Call("CreateTensorAsOrtValue", "default")):
            value = allocator.tensor(ELEMENTS)
        if not C.data_address(allocator.api, value):
            allocator.release(value)
            raise NotRun("the first allocation from the DEFAULT allocator returned OK and a tensor with no memory (a NULL data pointer): "
                         "memory-info.allocatable judges a first allocation")
    stopped = checker.check(value, 1)
    allocator.release(value)
    made = 1
    with ctx.calling(Call("CreateTensorAsOrtValue", "default", f"{ALLOCATIONS:,} in a row")):
        for call in ([] if stopped else loop.calls()):
            try:
                value = allocator.tensor(ELEMENTS)
            except C.OrtError as exc:
                stopped = Violation(f"allocation {call:,} of {ALLOCATIONS:,} from the DEFAULT allocator failed, after {call - 1:,} allocations and "
                                    f"frees that worked: {exc.message}", expected=f"all {ALLOCATIONS:,} allocations to work, the last as the first",
                                    actual=f"allocation {call:,}: {exc.message}")
                break
            if not C.data_address(allocator.api, value):  # an allocator that has run dry and says nothing
                stopped = Violation(f"allocation {call:,} of {ALLOCATIONS:,} from the DEFAULT allocator returned OK and a tensor with no memory "
                                    f"(a NULL data pointer), after {call - 1:,} allocations and frees that worked",
                                    expected="a tensor with memory, as at the first allocation", actual="a NULL data pointer")
            elif loop.sampler.is_due(call) or call == ALLOCATIONS:
                stopped = checker.check(value, call)
            allocator.release(value)
            if stopped:
                break
            made = call
            loop.sampler.after(call)
            loop.announce(call)
    if stopped:
        stopped.reproducer = loop.snippet
        yield stopped
    return made, stopped is not None


# --- session runs, and sessions created and released ------------------------------------------

def _feed_sets(recipe: str, inputs: tuple[str, ...]) -> tuple[list[dict[str, np.ndarray]], list[Any]]:
    """FEED_SETS inputs (the small integers of the session checks, moved by k - FEED_SETS // 2:
    exact in float32) and the bytes numpy computes for each."""
    base = small_integers(inputs, FLOAT32)
    feeds = [{name: (values + np.float32(k - FEED_SETS // 2)).astype(np.float32) for name, values in base.items()} for k in range(FEED_SETS)]
    return feeds, [tensors.payload(np.asarray(reference(recipe, one)).astype(np.float32), FLOAT32) for one in feeds]


@check("endurance.session-runs")
def session_runs(ctx: CheckContext) -> Iterator[Violation]:
    info = ctx.session_on_ep("add", FLOAT32, SESSION_SHAPE)
    ctx.require_nodes_on_ep(info)
    recipe, inputs = info.recipe, ctx.models.recipes[info.recipe].inputs
    feeds, expected = _feed_sets(recipe, inputs)
    loop = _Loop(ctx, RUNS, "run", [RSS], f"running model '{recipe}' on {ctx.target.provider}")
    loop.snippet = scripts.session_runs(ctx.snippets, info.model_path, recipe, inputs, SESSION_SHAPE, RUNS, loop.sampler, FEED_SETS)
    ctx.attempt(f"running model '{recipe}': run 1 of {RUNS:,}", loop.snippet)
    with ctx.precondition(f"the first run of model '{recipe}' (session.nodes-on-ep judges it)"), ctx.calling(cpu_input_run()), ctx.running(info):
        (output,) = info.session.run(None, feeds[1])
    stopped = _wrong_output(ctx, f"run 1 of {RUNS:,} of model '{recipe}'", 0, expected[1], output)

    def run(call: int) -> Violation | None:
        (output,) = info.session.run(None, feeds[call % FEED_SETS])
        return _wrong_output(ctx, f"run {call:,} of {RUNS:,} of model '{recipe}'", call - 1, expected[call % FEED_SETS], output)

    def failed(call: int, exc: Exception) -> Violation:
        return Violation(f"run {call:,} of {RUNS:,} of model '{recipe}' failed, after {call - 1:,} that worked: {first_line(exc)}",
                         expected=f"all {RUNS:,} runs to work, the last as the first", actual=f"run {call:,}: {first_line(exc)}")

    with ctx.calling(Call("InferenceSession.run", note=f"inputs in cpu, {RUNS:,} in a row")), ctx.running(info):
        stopped, made = loop.repeat(run, failed, stopped)
    yield from loop.ended(stopped, made)


def _wrong_output(ctx: CheckContext, what: str, right_before: int, expected: Any, output: Any) -> Violation | None:
    """A violation where `output` is not numpy's result (`right_before`: how many runs before it were right)."""
    diff = ctx.compare(expected, tensors.payload(np.ascontiguousarray(output, dtype=np.float32), FLOAT32))
    if diff is None:
        return None
    before = f"the {right_before:,} before it right" if right_before else "wrong from the first on"
    return Violation(f"{what} gave wrong values ({before}): {diff.describe()}", expected="numpy's result for the run's inputs", actual=diff.describe())


@check("endurance.session-lifecycle")
def session_lifecycle(ctx: CheckContext) -> Iterator[Violation]:
    """Sessions of the model the EP takes, each created as every check's session is, its nodes
    on the EP as the first one's, run once with inputs of its own, and released."""
    info = ctx.session_on_ep("add", FLOAT32, SESSION_SHAPE)
    ctx.require_nodes_on_ep(info)
    recipe, inputs = info.recipe, ctx.models.recipes[info.recipe].inputs
    model, _ = ctx.models.get(recipe, FLOAT32, SESSION_SHAPE)
    feeds, expected = _feed_sets(recipe, inputs)
    loop = _Loop(ctx, SESSIONS, "session", [RSS], f"creating, running and releasing sessions of model '{recipe}'")
    loop.snippet = scripts.session_lifecycle(ctx.snippets, info.model_path, recipe, inputs, SESSION_SHAPE, SESSIONS, loop.sampler, FEED_SETS)
    nodes = sorted(info.assignment.get(ctx.target.provider, []))
    ctx.attempt(f"session 1 of {SESSIONS:,} of model '{recipe}': created, run, released", loop.snippet)
    with ctx.precondition(f"creating and running a session of model '{recipe}' (session.nodes-on-ep judges it)"):
        with ctx.calling(Call("InferenceSession creation")):
            stopped = _one_session(ctx, model, recipe, 1, nodes, feeds[1], expected[1])

    def session(call: int) -> Violation | None:
        return _one_session(ctx, model, recipe, call, nodes, feeds[call % FEED_SETS], expected[call % FEED_SETS])

    def failed(call: int, exc: Exception) -> Violation:
        return Violation(f"session {call:,} of {SESSIONS:,} of model '{recipe}' could not be created or run, after {call - 1:,} that were: "
                         f"{first_line(exc)}", expected=f"all {SESSIONS:,} sessions created and run, the last as the first",
                         actual=f"session {call:,}: {first_line(exc)}")

    with ctx.calling(Call("InferenceSession creation", note=f"{SESSIONS:,} in a row, each run once")):
        stopped, made = loop.repeat(session, failed, stopped)
    yield from loop.ended(stopped, made)


def _one_session(ctx: CheckContext, model: bytes, recipe: str, call: int, nodes: list[str], feeds: dict[str, np.ndarray],
                 expected: Any) -> Violation | None:
    """Session `call`: created, its nodes compared with the first session's, run, released (its
    last reference dropped on return)."""
    session = ctx.create_session(model)
    if ctx.target.has_api("graph_assignment_info"):
        taken = sorted(ctx.assignment_of(session).get(ctx.target.provider, []))
        if taken != nodes:
            return Violation(f"session {call:,} of {SESSIONS:,} of model '{recipe}': {ctx.target.provider} took {taken or 'no node'}, "
                             f"the first session's {nodes}", expected=f"the nodes {nodes} on {ctx.target.provider}", actual=f"{taken}")
    with ctx.calling(cpu_input_run()), ctx.running(SessionInfo(session, None, recipe, {})):
        (output,) = session.run(None, feeds)
    return _wrong_output(ctx, f"the run of session {call:,} of {SESSIONS:,} of model '{recipe}'", call - 1, expected, output)
