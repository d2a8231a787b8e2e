"""Sessions under threads: several sessions of one EP device created and run at once
(concurrency.sessions), and one session run from several threads at once
(concurrency.shared-session). Copies under threads: concurrency.py.

InferenceSession.run releases the GIL, so Python threads run sessions at once; each run is timed
(`conformance.testbed.spans`) and a pass needs runs of different threads that overlapped in
time. The sessions have more than one intra-op thread (the kit's other sessions have one), and
each thread feeds inputs of its own, three sets in turn, so that an output computed from another
thread's inputs, or left from an earlier run, shows; every output is compared with numpy's.
"""

from __future__ import annotations

import functools
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from conformance.calls import Call
from conformance.checks import concurrency_scripts as scripts
from conformance.checks.context import CheckContext, SessionInfo
from conformance.checks.context.reference import reference
from conformance.checks.context.sessions import SESSION_SHAPE, cpu_input_run
from conformance.checks.registry import check
from conformance.findings import NotRun, Violation, first_line
from conformance.testbed import tensors
from conformance.testbed.spans import Overlap, Span, at_once, on_another_thread, overlap
from conformance import proofs

LOAD_SHAPE = (256, 512)  # 512 KiB a float32 tensor: a run long enough for runs of other threads to overlap it
RUNS = 60  # per thread, in the bounded form
INTRA_OP_THREADS = 2
INPUT_SETS = 3
# onnxruntime's Python InferenceSession holds the GIL for most of a creation, so creations started
# together overlap only now and then: they are started together again, until two overlapped, at most
# this many times; how many overlapped is a figure of the evidence, the runs' overlap what a pass needs.
CREATION_ROUNDS = 5
SHOWN = 3


@dataclass
class Lane:
    """One thread's session and inputs, and what its runs gave."""

    thread: int
    session: Any
    feeds: list[dict[str, np.ndarray]]
    expected: list[np.ndarray]
    runs: int = 0
    spans: list[Span] = field(default_factory=list)
    wrong: list[tuple[int, np.ndarray]] = field(default_factory=list)  # (run, output)
    failed: str = ""  # the error of a run that raised
    error: str = ""  # the kit's own failure in the thread

    def run(self, runs: int, deadline: float, start: threading.Barrier) -> None:
        try:
            start.wait()
            while self.runs < runs or time.monotonic() < deadline:
                index = self.runs % len(self.feeds)
                began = time.monotonic_ns()
                try:
                    (output,) = self.session.run(None, self.feeds[index])
                except Exception as exc:
                    self.failed = f"run {self.runs}: {first_line(exc)}"
                    return
                finally:
                    self.spans.append(Span(self.thread, began, time.monotonic_ns()))
                if not np.array_equal(np.asarray(output), self.expected[index]):
                    self.wrong.append((self.runs, np.asarray(output).copy()))
                    return
                self.runs += 1
        except Exception:
            self.error = traceback.format_exc()


def lanes_of(sessions: list[Any], recipe: str, inputs: tuple[str, ...], shape: tuple[int, ...]) -> list[Lane]:
    lanes = []
    for thread, session in enumerate(sessions):
        rng = np.random.default_rng(1000 + thread)  # the thread's own inputs (as the reproducer makes them)
        feeds = [{name: rng.integers(-8, 9, size=shape).astype(np.float32) for name in inputs} for _ in range(INPUT_SETS)]
        lanes.append(Lane(thread, session, feeds, [reference(recipe, f).astype(np.float32) for f in feeds]))
    return lanes


def _alone_first(ctx: CheckContext, lane: Lane, what: str) -> None:
    """One run of the first lane's session alone, on a thread that is not the one that registered
    the library: where it already goes wrong (at this shape, with these threads in the session),
    runs at once show nothing more."""
    def once() -> bool:
        (output,) = lane.session.run(None, lane.feeds[0])
        return np.array_equal(np.asarray(output), lane.expected[0])

    with ctx.calling(Call("InferenceSession.run", note=f"one thread alone, {scripts.THREAD_NOTE}")):
        right, error, _ = on_another_thread(once)
    if error is not None or not right:
        said = first_line(error) if error is not None else "wrong outputs"
        raise NotRun(f"{what}: one run alone, on a thread other than the one that registered the library, already goes wrong ({said}): "
                     "the functional tier's finding, or concurrency.any-thread's; nothing to learn from threads at once")


# Rounds of RUNS runs per thread made until two calls of different threads overlap: on an EP whose
# run of the small model takes 0.1 ms (the CPU EP), 240 runs from 4 threads can all fall apart in
# time, which would leave the case not_run by luck.
OVERLAP_ROUNDS = 8


def _run_lanes(ctx: CheckContext, lanes: list[Lane], info: SessionInfo, what: str, snippet: str) -> tuple[Overlap, float]:
    """The lanes' runs at once: `RUNS` each, then more until a soak's deadline, in rounds until
    calls of different threads overlap (at most OVERLAP_ROUNDS); one run of the first alone
    before them."""
    _alone_first(ctx, lanes[0], what)
    deadline = ctx.load.deadline()
    seen = [-1]

    def announce() -> None:
        done = sum(lane.runs for lane in lanes)
        if done != seen[0]:
            seen[0] = done
            ctx.attempt(f"{what}: {done} runs done", snippet)

    seconds = 0.0
    for _ in range(OVERLAP_ROUNDS):
        work = [functools.partial(lane.run, lane.runs + RUNS, deadline) for lane in lanes]
        with ctx.calling(Call("InferenceSession.run", note=f"{len(lanes)} threads at once")), ctx.running(info):
            seconds += at_once(work, announce)
        errors = [lane.error for lane in lanes if lane.error]
        if errors:
            raise RuntimeError(f"a running thread failed in the kit: {errors[0]}")
        measured = overlap([span for lane in lanes for span in lane.spans])
        if measured.overlapping or any(lane.failed or lane.wrong for lane in lanes):
            break
    return measured, seconds


def _run_violations(ctx: CheckContext, lanes: list[Lane], what: str, snippet: str) -> Iterator[Violation]:
    provider = ctx.target.provider
    wrong = [(lane, run, output) for lane in lanes for run, output in lane.wrong]
    for lane, run, output in wrong[:SHOWN]:
        expected = lane.expected[run % len(lane.expected)]
        differing = int(np.count_nonzero(output != expected)) if output.shape == expected.shape else output.size
        whose = next((f"; it is thread {other.thread}'s output" for other in lanes if other is not lane
                      for theirs in other.expected if theirs.shape == output.shape and np.array_equal(theirs, output)), "")
        described = f"thread {lane.thread}, run {run}: {differing} of {expected.size} values differ from numpy's{whose}"
        yield Violation(f"{what} on {provider}: a run gave wrong outputs while other threads ran: {described}",
                        expected="numpy's result for the thread's own inputs", actual=described, reproducer=snippet)
    if len(wrong) > SHOWN:
        yield Violation(f"{what}: {len(wrong) - SHOWN} more threads got wrong outputs", reproducer=snippet)
    for lane in lanes:
        if lane.failed:
            yield Violation(f"{what} on {provider}: a run failed on thread {lane.thread} while other threads ran: {lane.failed}",
                            expected="every run to work", actual=lane.failed, reproducer=snippet)
    for lane in {id(lane.session): lane for lane in lanes}.values():  # each session once
        if provider not in lane.session.get_providers():
            yield Violation(f"{what}: thread {lane.thread}'s session no longer lists {provider} after the runs: {lane.session.get_providers()}",
                            expected=f"{provider} among the session's providers", actual=str(lane.session.get_providers()), reproducer=snippet)


def _prove_runs(ctx: CheckContext, lanes: list[Lane], measured: Overlap, seconds: float) -> None:
    ctx.prove(proofs.RUNS, {"threads": len(lanes), "runs_per_thread": sorted({lane.runs for lane in lanes}), **measured.to_dict(),
                       "seconds": round(seconds, 3)})
    ctx.prove(proofs.OVERLAPPING_RUNS, measured.overlapping)
    ctx.tally(proofs.BYTES_COMPARED, sum(lane.runs * lane.expected[0].nbytes for lane in lanes))
    ctx.tally(proofs.RUNS_ON_EP, sum(lane.runs for lane in lanes) - 1)  # ctx.running counted one


def _no_overlap(measured: Overlap, what: str, seconds: float) -> NotRun:
    return NotRun(f"{what}: no two calls of different threads overlapped in time ({measured.calls} calls, {seconds:.3f} s): "
                  "nothing was shown of calls made at once")


def _model(ctx: CheckContext) -> tuple[str, tuple[str, ...]]:
    """The recipe of a model the EP takes (a narrow EP's, where it takes no Add) and its inputs;
    its session run once on this thread first: where that already goes wrong, runs at once show
    nothing more (the functional tier's finding)."""
    chosen = ctx.session_on_ep("add", tensors.DTYPES["float32"], SESSION_SHAPE)
    ctx.require_nodes_on_ep(chosen)
    inputs = ctx.models.recipes[chosen.recipe].inputs
    lane = lanes_of([chosen.session], chosen.recipe, inputs, SESSION_SHAPE)[0]
    ctx.attempt(f"a run of model '{chosen.recipe}' on the thread that registered the library")
    with ctx.precondition("a run of the session on the thread that registered the library"):
        with ctx.calling(cpu_input_run()), ctx.running(chosen):
            (output,) = chosen.session.run(None, lane.feeds[0])
    if not np.array_equal(np.asarray(output), lane.expected[0]):
        raise NotRun(f"a run of model '{chosen.recipe}' on one thread already gives wrong outputs (session.nodes-on-ep's finding)")
    return chosen.recipe, inputs


def _info(ctx: CheckContext, session: Any, path: Any, recipe: str, shape: tuple[int, ...]) -> SessionInfo:
    return SessionInfo(session, path, recipe, ctx.assignment_of(session), "float32", shape)


def _create_at_once(ctx: CheckContext, model: bytes, count: int) -> tuple[list[Any], list[str], Overlap]:
    """`count` sessions created at once, one a thread: the sessions, the errors, the creations' overlap."""
    made: list[Any] = [None] * count
    errors: list[str] = [""] * count
    spans: list[Span] = []

    def create(index: int, start: threading.Barrier) -> None:
        start.wait()
        began = time.monotonic_ns()
        try:
            made[index] = ctx.create_session(model, intra_op_threads=INTRA_OP_THREADS)
        except Exception as exc:
            errors[index] = first_line(exc)
        finally:
            spans.append(Span(index, began, time.monotonic_ns()))

    at_once([functools.partial(create, index) for index in range(count)], lambda: None)
    return made, errors, overlap(spans)


def _sessions_at_once(ctx: CheckContext, recipe: str, count: int, snippet_of: Callable[[Any, tuple[int, ...]], str]):
    """Sessions created at once, again until two creations overlapped (at most CREATION_ROUNDS
    times), on the load shape or, where the EP takes no node of that, the usual session shape."""
    for shape in (LOAD_SHAPE, SESSION_SHAPE):
        model, path = ctx.models.get(recipe, tensors.DTYPES["float32"], shape)
        snippet = snippet_of(path, shape)
        for round_ in range(1, CREATION_ROUNDS + 1):
            ctx.attempt(f"creating {count} sessions of model '{recipe}' ({list(shape)}) at once, round {round_}", snippet)
            with ctx.calling(Call("InferenceSession creation", note=f"{count} threads at once")):
                sessions, errors, measured = _create_at_once(ctx, model, count)
            if any(errors) or measured.overlapping:
                break
        first = next((s for s in sessions if s is not None), None)
        if first is None or ctx.target.provider in _info(ctx, first, path, recipe, shape).assignment or shape == SESSION_SHAPE:
            return sessions, errors, measured, round_, path, shape, snippet
    raise AssertionError("the last shape always returns")


@check("concurrency.sessions")
def sessions(ctx: CheckContext) -> Iterator[Violation]:
    recipe, inputs = _model(ctx)
    count = ctx.load.threads()

    def snippet_of(path: Any, shape: tuple[int, ...]) -> str:
        return scripts.sessions(ctx, model_path=path, recipe=recipe, inputs=inputs, shape=shape, threads=count, runs=RUNS,
                                intra_op_threads=INTRA_OP_THREADS, shared=False)

    made, errors, creations, rounds, path, shape, snippet = _sessions_at_once(ctx, recipe, count, snippet_of)
    what = f"{count} sessions of model '{recipe}' ({list(shape)}, {INTRA_OP_THREADS} intra-op threads) created at once"
    failed = [Violation(f"{what}: creating the session on thread {index} failed: {error}", expected="every session created",
                        actual=error, reproducer=snippet) for index, error in enumerate(errors) if error]
    if failed:
        yield from failed
        return
    infos = [_info(ctx, session, path, recipe, shape) for session in made]
    ctx.require_nodes_on_ep(infos[0])
    for index, info in enumerate(infos[1:], start=1):
        if sorted(info.assignment.get(ctx.target.provider, [])) != sorted(infos[0].assignment.get(ctx.target.provider, [])):
            yield Violation(f"{what}: the sessions got different nodes on {ctx.target.provider}: thread 0's {infos[0].assignment}, "
                            f"thread {index}'s {info.assignment}", expected="the same nodes on the EP in every session",
                            actual=str(info.assignment), reproducer=snippet)
    ctx.prove(proofs.SESSIONS, {"count": count, "intra_op_threads": INTRA_OP_THREADS, "shape": list(shape), "creation_rounds": rounds,
                           "creations": creations.to_dict()})
    lanes = lanes_of(made, recipe, inputs, shape)
    measured, seconds = _run_lanes(ctx, lanes, infos[0], f"{what}, then run at once", snippet)
    _prove_runs(ctx, lanes, measured, seconds)
    violations = list(_run_violations(ctx, lanes, f"{what}, then run at once", snippet))
    yield from violations
    if not violations and not measured.overlapping:
        raise _no_overlap(measured, f"{what}, then run at once", seconds)


@check("concurrency.shared-session")
def shared_session(ctx: CheckContext) -> Iterator[Violation]:
    recipe, inputs = _model(ctx)
    count = ctx.load.threads()
    for shape in (LOAD_SHAPE, SESSION_SHAPE):
        model, path = ctx.models.get(recipe, tensors.DTYPES["float32"], shape)
        snippet = scripts.sessions(ctx, model_path=path, recipe=recipe, inputs=inputs, shape=shape, threads=count, runs=RUNS,
                                   intra_op_threads=INTRA_OP_THREADS, shared=True)
        ctx.attempt(f"creating a session of model '{recipe}' ({list(shape)}, {INTRA_OP_THREADS} intra-op threads)", snippet)
        with ctx.calling(Call("InferenceSession creation", note=f"{INTRA_OP_THREADS} intra-op threads")):
            info = _info(ctx, ctx.create_session(model, intra_op_threads=INTRA_OP_THREADS), path, recipe, shape)
        if ctx.target.provider in info.assignment or shape == SESSION_SHAPE:
            break
    ctx.require_nodes_on_ep(info)
    ctx.prove(proofs.SESSION, {"intra_op_threads": INTRA_OP_THREADS, "shape": list(shape)})
    what = f"one session of model '{recipe}' ({list(shape)}) run from {count} threads at once"
    lanes = lanes_of([info.session] * count, recipe, inputs, shape)
    measured, seconds = _run_lanes(ctx, lanes, info, what, snippet)
    _prove_runs(ctx, lanes, measured, seconds)
    violations = list(_run_violations(ctx, lanes, what, snippet))
    yield from violations
    if not violations and not measured.overlapping:
        raise _no_overlap(measured, what, seconds)
