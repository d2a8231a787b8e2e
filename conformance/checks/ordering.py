"""Ordering on an asynchronous EP: what must be complete, and when, among copies, streams, runs
and IOBinding (specs/contracts/ordering.yaml).

Each check reads a result at the moment its contract names (the return of the call, the
stream's release, synchronize_outputs()) and keeps what it saw then: a copy or a kernel still
queued leaves the sentinel or an old value behind, whatever lands later. Nothing waits by time.
On a synchronous EP every case passes without showing an order; what each case saw queued is in
its evidence (`queued_at_return`, `complete_before_synchronize`), so that a pass on an
asynchronous EP shows the order was there to be kept.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Iterator

import numpy as np

from conformance.calls import Call
from conformance.checks import ordering_scripts as scripts
from conformance.checks.context import CheckContext
from conformance.checks.context.reference import reference
from conformance.checks.context.sessions import SESSION_SHAPE, SessionInfo, cpu_input_run
from conformance.checks.registry import check
from conformance.findings import NotApplicable, NotRun, Violation, message_line
from conformance.testbed import tensors
from conformance.testbed.eps import memory_facts, memory_label
from conformance import proofs

F32 = tensors.DTYPES["float32"]


def _require_device_memory(ctx: CheckContext) -> None:
    ctx.require_memory("default")
    if ctx.is_cpu_memory("default"):
        raise NotApplicable(f"{ctx.target.provider}'s DEFAULT memory is CPU memory: its copies and kernels are done on the calling thread, "
                            "with nothing queued that could be out of order")


def _integers(seed: int, shape: tuple[int, ...] = SESSION_SHAPE) -> np.ndarray:
    """Small float32 integers, exact through every model; `scripts.integers` writes the same."""
    return np.random.default_rng(seed).integers(-8, 9, size=shape).astype(np.float32)


def _feeds(names: tuple[str, ...], seed: int, shape: tuple[int, ...] = SESSION_SHAPE) -> dict[str, np.ndarray]:
    return {name: _integers(seed + i, shape) for i, name in enumerate(names)}


def _bytes(array: np.ndarray) -> np.ndarray:
    """The bytes `array` holds now, kept: a copy, so that what lands later does not change them."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8).copy()


def _read_now(ctx: CheckContext, value, shape: tuple[int, ...], what: str) -> np.ndarray:
    """`value` copied to a CPU sentinel with no stream, as the sentinel is at the copy's return."""
    landing = ctx.memories.guarded_copy(tensors.sentinel(F32, shape, scripts.LANDING), f"read of {what}", "ep")
    ctx.copy([value], [ctx.wrap_cpu(landing, F32)], "default>cpu")
    return _bytes(landing)


def _untouched(expected: np.ndarray, got: np.ndarray, byte: int) -> bool:
    """Whether every byte of `got` that differs from `expected` still holds the sentinel `byte`:
    work not yet done, as against work done wrong."""
    return bool(np.all(got[expected != got] == byte))


def _what_it_held(got: np.ndarray, shape: tuple[int, ...], **known: np.ndarray) -> str:
    """What a wrong read holds, where it is something the check knows (a sentinel, an earlier value)."""
    named = {"the read's own sentinel (the copy had not landed)": tensors.sentinel(F32, shape, scripts.LANDING),
             "the output's sentinel (nothing written yet)": tensors.sentinel(F32, shape, scripts.SENTINEL), **known}
    return next((f": it holds {name}" for name, array in named.items() if tensors.compare(_bytes(array), got) is None), "")


def _wrong(ctx: CheckContext, what: str, expected: np.ndarray, got: np.ndarray, snippet: str, shape: tuple[int, ...],
           **known: np.ndarray) -> Iterator[Violation]:
    diff = ctx.compare(_bytes(expected), got)
    if diff:
        yield Violation(f"{what}: {diff.describe()}{_what_it_held(got, shape, **known)}", expected="the right bytes at that moment",
                        actual=diff.describe(), reproducer=snippet)


# --- copies --------------------------------------------------------------------------------------


@check("ordering.copy-without-stream", apis=("copy_tensors",))
def copy_without_stream(ctx: CheckContext, direction: str) -> Iterator[Violation]:
    """A copy given no stream, read (or its source overwritten) the moment it returns. Every read
    here is itself a copy with no stream, held to the same rule."""
    _require_device_memory(ctx)
    shape = scripts.SHAPE
    snippet = scripts.copy_without_stream(ctx.snippets, direction)
    values, overwrite = tensors.sample(F32, shape, seed=21), tensors.sentinel(F32, shape, scripts.OVERWRITE)
    ctx.attempt(f"copy_tensors {direction} with no stream, read the moment it returns", snippet)
    # A copy that fails is the copy family's to judge (copy.required-directions, copy.device-to-device): here it shows no order.
    with ctx.precondition(f"copy_tensors {direction} and the copies around it"):
        got = _copied_now(ctx, direction, values, overwrite)
    ctx.prove(proofs.DIRECTION, direction)
    yield from _wrong(ctx, f"copy_tensors {direction} with no stream was not complete when it returned", values, got, snippet, shape,
                      **{"the bytes its source was overwritten with after the return": overwrite})


def _copied_now(ctx: CheckContext, direction: str, values: np.ndarray, overwrite: np.ndarray) -> np.ndarray:
    """The copy with no stream in `direction`, its destination read (its source overwritten first) the moment it returns."""
    shape = values.shape
    if direction == "cpu>default":
        host = ctx.memories.guarded_copy(values, "source of copy_tensors cpu>default")
        destination = ctx.allocate("default", F32, shape)
        ctx.copy([ctx.wrap_cpu(host, F32)], [destination], direction)
        host[...] = overwrite  # at once: a copy complete on return no longer reads its source
        return _read_now(ctx, destination, shape, "the destination")
    if direction == "default>cpu":
        return _read_now(ctx, ctx.place(values, "default", F32), shape, "the copy under test")
    first, second = ctx.place(values, "default", F32), ctx.allocate("default", F32, shape)
    ctx.copy([first], [second], direction)
    ctx.copy([ctx.wrap_cpu(overwrite, F32)], [first], "cpu>default")
    return _read_now(ctx, second, shape, "the destination")


@check("ordering.copy-on-stream", apis=("sync_stream", "copy_tensors"))
def copy_on_stream(ctx: CheckContext) -> Iterator[Violation]:
    """CPU > DEFAULT > DEFAULT > CPU queued on one stream with no wait between them, read once the
    stream is released (the one wait onnxruntime's Python has for a stream)."""
    if ctx.device is None:
        raise NotRun("the EP is not listed by get_ep_devices(); streams belong to EP devices")
    _require_device_memory(ctx)
    shape, snippet = scripts.SHAPE, scripts.copy_on_stream(ctx.snippets)
    ctx.attempt("creating the EP device's sync stream", snippet)
    try:
        with ctx.calling(Call("create_sync_stream")):
            stream = ctx.device.create_sync_stream()
    except Exception as exc:
        raise NotApplicable(f"{ctx.target.provider} is not stream-aware: create_sync_stream() refused ({message_line(exc)[:200]}), "
                            "so no copy is queued on a stream of its") from None
    values = tensors.sample(F32, shape, seed=22)
    first = ctx.place(tensors.sentinel(F32, shape, scripts.SENTINEL), "default", F32)
    second = ctx.place(tensors.sentinel(F32, shape, scripts.SENTINEL), "default", F32)
    landing = ctx.memories.guarded_copy(tensors.sentinel(F32, shape, scripts.LANDING), "landing of the copies on the stream", "ep")
    ctx.attempt("three copies queued on the stream with no wait between them", snippet)
    ctx.copy([ctx.wrap_cpu(values, F32)], [first], "cpu>default", stream)
    ctx.copy([first], [second], "default>default", stream)
    ctx.copy([second], [ctx.wrap_cpu(landing, F32)], "default>cpu", stream)
    before_release = _bytes(landing)
    ctx.attempt("releasing the stream: the wait for its copies", snippet)
    with ctx.calling(Call("release sync stream")):
        del stream
    got = _bytes(landing)
    ctx.prove(proofs.COPIES_ON_STREAM, 3)
    ctx.prove(proofs.QUEUED_AT_RETURN, tensors.compare(_bytes(values), before_release) is not None)
    diff = ctx.compare(_bytes(values), got)
    if not diff:
        return
    not_done = _untouched(_bytes(values), got, scripts.LANDING)
    # Where the contested rule holds (an EP built into onnxruntime), a stream that is released
    # with its copies unfinished is onnxruntime's stream: its Python gives no other wait.
    subject = "runtime" if not_done and ctx.contested_rule_holds else ""
    held = _what_it_held(got, shape, **{"the sentinel the DEFAULT values held before the copies": tensors.sentinel(F32, shape, scripts.SENTINEL)})
    what = (f"the copies were not complete once the stream was released: the host buffer still holds its sentinel where it is wrong ({diff.describe()})"
            if not_done else
            f"the copies did not deliver the source's bytes in order: {diff.describe()}{held}")
    yield Violation(what, expected="the source's bytes once the stream is released", actual=diff.describe(), reproducer=snippet, subject=subject)


# --- runs ----------------------------------------------------------------------------------------


def _session(ctx: CheckContext, recipe: str) -> tuple[SessionInfo, list[str]]:
    _require_device_memory(ctx)
    info = ctx.session(recipe, F32, SESSION_SHAPE)
    return info, ctx.require_nodes_on_ep(info)


def _run_and_read(ctx: CheckContext, info: SessionInfo, feeds: dict[str, np.ndarray], path: str, *, unsynchronized: bool = False) -> np.ndarray:
    """Runs `info`'s session on `feeds` and reads its output at the moment it must be complete:
    as run() returns it (path run), or copied with no stream when run_with_iobinding() (or,
    `unsynchronized`, synchronize_outputs()) returns, from an output bound in DEFAULT memory."""
    if path == "run":
        with ctx.calling(cpu_input_run()), ctx.running(info):
            (output,) = info.session.run(None, feeds)
            return _bytes(np.asarray(output))
    binding = info.session.io_binding()
    for name, value in feeds.items():
        binding.bind_ortvalue_input(name, ctx.place(value, "default", F32))
    output = ctx.place(tensors.sentinel(F32, SESSION_SHAPE, scripts.SENTINEL), "default", F32)
    binding.bind_ortvalue_output(info.session.get_outputs()[0].name, output)
    if not unsynchronized:
        with ctx.calling(Call("run_with_iobinding", "default")), ctx.running(info):
            info.session.run_with_iobinding(binding)
        return _read_now(ctx, output, SESSION_SHAPE, "the bound output")
    options = ctx.ort.RunOptions()
    options.add_run_config_entry(scripts.NO_SYNC_OPTION, "1")
    with ctx.calling(Call("run_with_iobinding", "default", "EPs not synchronised")), ctx.running(info):
        info.session.run_with_iobinding(binding, options)
    early = _read_now(ctx, output, SESSION_SHAPE, "before synchronize_outputs")
    ctx.prove(proofs.COMPLETE_BEFORE_SYNCHRONIZE, tensors.compare(_bytes(_expected_of(info, feeds)), early) is None)
    with ctx.calling(Call("IOBinding synchronize_outputs")):
        binding.synchronize_outputs()
    return _read_now(ctx, output, SESSION_SHAPE, "the bound output")


def _expected_of(info: SessionInfo, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return np.asarray(reference(info.recipe, feeds)).astype(np.float32)


def _outputs(ctx: CheckContext, recipe: str, path: str, *, unsynchronized: bool = False, crossing: bool = False) -> Iterator[Violation]:
    info, elsewhere = _session(ctx, recipe)
    if crossing and not elsewhere:
        raise NotApplicable(f"{ctx.target.provider} takes every node of model '{recipe}': no value crosses between it and the CPU")
    inputs = ctx.models.recipes[recipe].inputs
    feeds = _feeds(inputs, 31)
    snippet = scripts.run_outputs(ctx.snippets, info.model_path, recipe, inputs, SESSION_SHAPE, path, unsynchronized=unsynchronized)
    when = "synchronize_outputs() returned" if unsynchronized else "the run returned"
    ctx.attempt(f"running model '{recipe}' ({path}) and reading its output when {when}", snippet)
    got = _run_and_read(ctx, info, feeds, path, unsynchronized=unsynchronized)
    ctx.prove(proofs.PATH, path)
    if crossing:
        ctx.prove(proofs.NODES_ELSEWHERE, elsewhere)
    expected = _bytes(_expected_of(info, feeds))
    for violation in _wrong(ctx, f"the output of model '{recipe}' was not complete when {when}", _expected_of(info, feeds), got, snippet, SESSION_SHAPE):
        if unsynchronized and ctx.contested_rule_holds and _untouched(expected, got, scripts.SENTINEL):
            # The rule held for plugin EPs (ordering.yaml): onnxruntime skipped the run's end
            # synchronisation and reaches such an EP afterwards only through OrtEp::Sync.
            violation.subject = "runtime"
            violation.message += ("; onnxruntime skipped the stream's OnSessionRunEnd and Flush at the end of the run and reaches a plugin EP "
                                  "after it only through OrtEp::Sync (C API 25, onnxruntime PR 27538), which an EP built against an earlier C API lacks")
        yield violation


@check("ordering.run-outputs")
def run_outputs(ctx: CheckContext, recipe: str, path: str) -> Iterator[Violation]:
    yield from _outputs(ctx, recipe, path)


@check("ordering.cross-device-values")
def cross_device_values(ctx: CheckContext, recipe: str, path: str) -> Iterator[Violation]:
    """A model whose value goes EP → CPU → EP: the CPU node reads what the EP's node produced,
    after the wait onnxruntime makes on the EP's notification."""
    yield from _outputs(ctx, recipe, path, crossing=True)


@check("ordering.unsynchronized-run")
def unsynchronized_run(ctx: CheckContext, recipe: str) -> Iterator[Violation]:
    yield from _outputs(ctx, recipe, "iobinding", unsynchronized=True)


# --- IOBinding -----------------------------------------------------------------------------------


def _require_device_input(ctx: CheckContext, info: SessionInfo) -> None:
    """NotApplicable where the session's input is not in the EP's DEFAULT memory: a CPU input
    bound there is used where it is, with no upload to order."""
    if not ctx.target.has_api("session_memory_infos"):
        return
    facts, default = memory_facts(ctx.ort, info.session.get_input_memory_infos()[0]), ctx.memory_facts("default")
    if not facts or not default or (facts.name, facts.device_id, facts.device_mem_type) != (default.name, default.device_id, "default"):
        raise NotApplicable(f"the session's input lives in {memory_label(facts)}, not the EP's DEFAULT memory: a bound CPU input is not uploaded")


@check("ordering.bound-input")
def bound_input(ctx: CheckContext, path: str, request: str) -> Iterator[Violation]:
    """Two runs, each right after binding a new CPU input (and a new output in DEFAULT memory);
    with request after-unsynchronized-run the first run leaves its work queued (the run option),
    so that the second upload is queued behind it. The second run ends synchronised: both
    outputs are read after it."""
    info, _ = _session(ctx, "relu")
    _require_device_input(ctx, info)
    snippet = scripts.bound_input(ctx.snippets, info.model_path, SESSION_SHAPE, path, request)
    xs = [_integers(41), _integers(42)]  # kept alive: a queued upload may read them later
    ctx.attempt("placing the outputs in DEFAULT memory", snippet)
    outputs = [ctx.place(tensors.sentinel(F32, SESSION_SHAPE, scripts.SENTINEL), "default", F32) for _ in xs]
    binding = info.session.io_binding()
    options = ctx.ort.RunOptions()
    if request == "after-unsynchronized-run":
        options.add_run_config_entry(scripts.NO_SYNC_OPTION, "1")
    for round, (x, output) in enumerate(zip(xs, outputs, strict=True), start=1):
        ctx.attempt(f"binding input {round} ({path}) and running right after", snippet)
        with ctx.calling(Call(f"IOBinding {path}")):
            if path == "bind-cpu-input":
                binding.bind_cpu_input("x", x)
            else:
                binding.bind_ortvalue_input("x", ctx.wrap_cpu(x, F32))
        binding.bind_ortvalue_output("y", output)
        with ctx.calling(Call("run_with_iobinding", path)), ctx.running(info):
            info.session.run_with_iobinding(binding, options if round == 1 else None)
    ctx.prove(proofs.RUNS, len(xs))
    ctx.prove(proofs.PATH, path)
    for round, (x, output) in enumerate(zip(xs, outputs, strict=True), start=1):
        got = _read_now(ctx, output, SESSION_SHAPE, f"output of run {round}")
        yield from _wrong(ctx, f"run {round} ({request}) did not compute from the input bound just before it ({path})", np.maximum(x, 0), got,
                          snippet, SESSION_SHAPE, **{f"Relu of input {other}": np.maximum(xs[other - 1], 0) for other in (1, 2) if other != round})


@check("ordering.produced-values")
def produced_values(ctx: CheckContext, path: str) -> Iterator[Violation]:
    """A run's IOBinding output in DEFAULT memory, copied out or updated right after the run."""
    if path == "update_inplace-ortvalue":
        ctx.require_api("update_inplace_ortvalue", "has no update_inplace(OrtValue)")
    info, _ = _session(ctx, "relu")
    snippet = scripts.produced_values(ctx.snippets, info.model_path, SESSION_SHAPE, path)
    x, update = _integers(51), _integers(52)
    binding = info.session.io_binding()
    binding.bind_ortvalue_input("x", ctx.place(x, "default", F32))
    binding.bind_ortvalue_output("y", ctx.place(tensors.sentinel(F32, SESSION_SHAPE, scripts.SENTINEL), "default", F32))
    ctx.attempt(f"running, then {path} on the value the run produced", snippet)
    with ctx.calling(Call("run_with_iobinding", "default")), ctx.running(info):
        info.session.run_with_iobinding(binding)
    produced = binding.get_outputs()[0]
    ctx.prove(proofs.PATH, path)
    if path == "copy_tensors":
        got = _read_now(ctx, produced, SESSION_SHAPE, "the produced value")
        yield from _wrong(ctx, "copy_tensors of a value the run had just produced did not give the run's result", np.maximum(x, 0), got,
                          snippet, SESSION_SHAPE)
        return
    with ctx.calling(Call("update_inplace", "numpy>default") if path == "update_inplace-numpy" else Call("update_inplace ortvalue", "default>default")):
        produced.update_inplace(update if path == "update_inplace-numpy" else ctx.place(update, "default", F32))
    got = _read_now(ctx, produced, SESSION_SHAPE, "the updated value")
    yield from _wrong(ctx, f"{path} of a value the run had just produced did not leave the update", update, got, snippet, SESSION_SHAPE,
                      **{"the run's result (it landed after the update)": np.maximum(x, 0)})


# --- two sessions at once ----------------------------------------------------------------------

ROUNDS = 24  # runs per thread, always made
OVERLAP_DEADLINE_S = 5.0  # more rounds, until two runs overlapped in time, at most this long


def _work(session: Any, recipe: str, inputs: tuple[str, ...], thread: int, rounds: int, start: threading.Barrier,
          spans: list[tuple[int, int]], wrong: list[str], failed: list[BaseException]) -> None:
    try:
        start.wait()
        for i in range(rounds):
            feeds = _feeds(inputs, 1000 * thread + 10 * i)
            begun = time.monotonic_ns()
            (output,) = session.run(None, feeds)
            spans.append((begun, time.monotonic_ns()))
            got, expected = np.asarray(output), np.asarray(reference(recipe, feeds)).astype(np.float32)
            if not np.array_equal(got, expected):
                wrong.append(f"session {thread + 1}, run {i + 1}: {int(np.count_nonzero(got != expected))} of {expected.size} values wrong")
    except BaseException as exc:  # noqa: B036 - the thread's failure is the check's to report
        failed.append(exc)


def _overlaps(first: list[tuple[int, int]], second: list[tuple[int, int]]) -> int:
    return sum(1 for a0, a1 in first for b0, b1 in second if a0 < b1 and b0 < a1)


@check("ordering.concurrent-sessions")
def concurrent_sessions(ctx: CheckContext, recipe: str) -> Iterator[Violation]:
    model, path = ctx.models.get(recipe, F32, SESSION_SHAPE)
    inputs = ctx.models.recipes[recipe].inputs
    ctx.attempt(f"creating two sessions of model '{recipe}'")
    with ctx.calling(Call("InferenceSession creation")):
        sessions = [ctx.create_session(model), ctx.create_session(model)]
    for session in sessions:
        ctx.require_nodes_on_ep(SessionInfo(session, path, recipe, ctx.assignment_of(session), F32.name, SESSION_SHAPE))
    # One run of each session on its own first: a model that fails alone says nothing of two at once.
    with ctx.precondition(f"a run of each session of model '{recipe}' on its own"), ctx.calling(cpu_input_run()):
        alone: list[str] = []
        raised: list[BaseException] = []
        for index, session in enumerate(sessions):
            _work(session, recipe, inputs, index, 1, threading.Barrier(1), [], alone, raised)
        if raised:
            raise raised[0]
        if alone:
            raise NotRun(f"a run of each session on its own already computed wrong values ({alone[0]}): session.nodes-on-ep's to judge")
    deadline, rounds, overlapped, made = time.monotonic() + OVERLAP_DEADLINE_S, ROUNDS, 0, 0
    while True:
        snippet = scripts.concurrent_sessions(ctx.snippets, path, recipe, inputs, SESSION_SHAPE, rounds)
        ctx.attempt(f"two sessions of model '{recipe}' running {rounds} times each at once, from two threads", snippet)
        spans: list[list[tuple[int, int]]] = [[], []]
        wrong: list[str] = []
        failed: list[BaseException] = []
        start = threading.Barrier(2)
        threads = [threading.Thread(target=_work, args=(sessions[t], recipe, inputs, t, rounds, start, spans[t], wrong, failed)) for t in range(2)]
        with ctx.calling(Call("InferenceSession.run", note="two sessions at once, from two threads")):
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        if failed:
            raise failed[0]
        made += 2 * rounds
        overlapped += _overlaps(*spans)
        if wrong:
            yield Violation(f"two sessions run at once from two threads: {len(wrong)} runs computed wrong values ({'; '.join(wrong[:3])})",
                            expected="each run the result of its own inputs", actual="; ".join(wrong[:5]), reproducer=snippet)
            return
        if overlapped or time.monotonic() > deadline:
            break
    ctx.prove(proofs.RUNS, made)
    ctx.prove(proofs.OVERLAPPING_RUNS, overlapped)
    if not overlapped:
        raise NotRun(f"the two threads' {made} runs never overlapped in time: nothing was shown about two sessions running at once")
