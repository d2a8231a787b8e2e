"""Copies from several threads at once (concurrency.copies), and every call from a thread that
did not register the library (concurrency.any-thread). Sessions under threads: concurrency_sessions.py.

The copies go through the C API by ctypes (`conformance.testbed.interop.threaded_copies`): the GIL
is released during each CopyTensors call, so the calls of different threads really run at once,
which each call's timing shows (`overlapping_calls`); Python's copy_tensors holds the GIL and
would show nothing. A pass needs calls that overlapped: without one, the case is not_run.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable, Iterator

import numpy as np

from conformance.calls import Call
from conformance.checks import concurrency_scripts as scripts
from conformance.checks.context import CheckContext, SessionInfo
from conformance.checks.context.reference import reference
from conformance.checks.context.sessions import SESSION_SHAPE
from conformance.checks.registry import check
from conformance.findings import NotApplicable, NotRun, Violation, first_line, message_line
from conformance.testbed import bandwidth, tensors
from conformance.testbed.interop import capi as C
from conformance.testbed.interop import rig
from conformance.testbed.interop.threaded_copies import ConcurrentCopies, CopiesRun, Ends, probe
from conformance.testbed.spans import on_another_thread, overlap
from conformance import proofs

# The bounded form: the same counts on every machine (a soak adds rounds until its deadline).
ROUNDS = 150  # per thread: each direction of the chain once a round
CHAIN_BYTES = 256 * bandwidth.KIB
BATCH_ROUNDS = 40
BATCH_PAIRS = 16  # pairs of distinct tensors in one CopyTensors call
BATCH_BYTES = 16 * bandwidth.KIB
SHOWN = 3  # wrong copies reported one by one; the rest are counted
SENTINEL = 0x5A  # what a destination holds before a copy


def _chain(ctx: CheckContext, found: dict[str, str], device_memory: bool) -> tuple[str, ...]:
    """The directions to copy along, from the one-thread probe (`found`: direction, or "host
    buffers", -> what went wrong): in and out of DEFAULT memory are needed to put bytes there and
    see them; device to device where the EP does it. A direction refused, or wrong already on one
    thread, is the functional tier's to judge (copy.*): here it is skipped, or, where the chain
    needs it, the case is not run."""
    skipped = {direction: why for direction, why in found.items() if why}
    ctx.prove(proofs.SKIPPED_DIRECTIONS, skipped)
    needed = {key: why for key, why in skipped.items() if key != "default>default"}
    if not needed:
        return ("cpu>default",) + (() if skipped.get("default>default") else ("default>default",)) + ("default>cpu",)
    figures = "; ".join(f"{key}: {why}" for key, why in needed.items())
    if any(not why.startswith("refused") for why in needed.values()):
        raise NotRun(f"copies on one thread already go wrong ({figures}): the functional tier's finding (copy.c-api-roundtrip), "
                     "nothing to learn from threads")
    if not device_memory:
        raise NotApplicable("the EP device's DEFAULT memory is plain CPU memory and CopyTensors does not move bytes between it and "
                            f"the CPU here ({figures}): no copy to run at once")
    raise NotRun(f"CopyTensors refuses a direction needed to put bytes in DEFAULT memory and read them back ({figures}): "
                 "the functional tier judges the refusal (copy.required-directions)")


def _announce(ctx: CheckContext, what: str, snippet: str, done: str) -> None:
    ctx.attempt(f"{what}: {done}", snippet)


def _overruns(ends: Ends, since: int) -> list[str]:
    """What the copies wrote outside the host buffers made from the `since`-th on."""
    return [f"{role}: {overrun.describe()}" for role, guarded in ends.guarded[since:] for overrun in guarded.check()]


def _alone(ctx: CheckContext, ends: Ends, copier: ConcurrentCopies, since: int, what: str) -> None:
    """The same copies made first on one thread alone (not the one that registered the library),
    with no other call in flight: where they go wrong there too (bytes, errors, or writes past a
    host buffer from the `since`-th on), threads at once show nothing."""
    with ctx.calling(Call("CopyTensors", note=f"one thread alone, {copier.pairs} pair{'s' * (copier.pairs > 1)} a call")):
        alone = copier.run_alone(1)
    found = [wrong.describe() for wrong in alone.wrong] + [f"{failed.direction} failed: {failed.message}" for failed in alone.failed]
    found += _overruns(ends, since)
    if found:
        raise NotRun(f"{what}: one round on one thread alone, not the one that registered the library, already goes wrong ({found[0]}): "
                     "the functional tier's finding, or concurrency.any-thread's where it works on that thread; nothing to learn from threads at once")


def _figures(run: CopiesRun) -> dict:
    measured = overlap(run.spans)
    return {"threads": run.threads, "pairs_per_call": run.pairs, "bytes_per_tensor": run.nbytes, "rounds_per_thread": sorted(set(run.rounds)),
            "calls_per_direction": run.calls, **measured.to_dict(), "seconds": round(run.seconds, 3)}


def _violations(run: CopiesRun, what: str, snippet: str) -> Iterator[Violation]:
    for wrong in run.wrong[:SHOWN]:
        yield Violation(f"{what}: a thread's copy did not deliver its own bytes while other threads copied: {wrong.describe()}",
                        expected="every landing byte-identical to its source", actual=wrong.describe(), reproducer=snippet)
    if len(run.wrong) > SHOWN:
        yield Violation(f"{what}: {len(run.wrong) - SHOWN} more threads saw wrong bytes", reproducer=snippet)
    for failed in run.failed:
        yield Violation(f"{what}: CopyTensors {failed.direction} failed on thread {failed.thread} in round {failed.round} while other threads "
                        f"copied (it worked on one thread): {failed.message}", expected="the copy", actual=failed.message, reproducer=snippet)


@check("concurrency.copies")
def copies(ctx: CheckContext) -> Iterator[Violation]:
    api, env, device = rig.c_device(ctx)
    with ctx.calling(Call("EpDevice_MemoryInfo", "default")):
        advertised = C.ep_device_memory(api, device, "default")
    ctx.require_memory("default")  # the memories this case works with (plain CPU memory where none is advertised)
    device_memory = advertised is not None and advertised["device_type"] != "cpu"
    threads = ctx.load.threads()
    single = scripts.copies(ctx, threads=threads, pairs=1, nbytes=CHAIN_BYTES, rounds=ROUNDS, chain=("cpu>default", "default>cpu"))
    ctx.attempt("CopyTensors on one thread: which directions the EP does", single)
    ends = Ends(api, env, device, advertised is not None)
    try:
        # each direction announced as the functional tier's copy.c-api does: a call that crashed there is not made again here
        found = probe(ends, lambda direction: ctx.calling(Call("CopyTensors", direction)), CHAIN_BYTES)
        found.update({"host buffers": f"written past on one thread ({overruns[0]})"} if (overruns := _overruns(ends, 0)) else {})
        chain = _chain(ctx, found, device_memory)
        label = f"{advertised['name']} ({advertised['device_type']}, {advertised['memory_type']})" if advertised else "plain CPU memory"
        ctx.prove(proofs.MEMORY, {"default": label})
        ctx.prove(proofs.THREADS, threads)
        deadline = ctx.load.deadline()
        halfway = time.monotonic() + (deadline - time.monotonic()) / 2  # a soak gives each form half its time
        overlapping = 0
        for form, pairs, nbytes, rounds, until in (("one pair a call", 1, CHAIN_BYTES, ROUNDS, halfway),
                                                   (f"{BATCH_PAIRS} pairs a call", BATCH_PAIRS, BATCH_BYTES, BATCH_ROUNDS, deadline)):
            snippet = scripts.copies(ctx, threads=threads, pairs=pairs, nbytes=nbytes, rounds=rounds, chain=chain)
            what = f"CopyTensors from {threads} threads at once, {form} ({', '.join(chain)})"
            ctx.attempt(what, snippet)
            since = len(ends.guarded)
            with ctx.precondition(f"making the tensors of {threads} threads"):
                solo = ConcurrentCopies(ends, threads=1, pairs=pairs, nbytes=nbytes, chain=chain)
                copier = ConcurrentCopies(ends, threads=threads, pairs=pairs, nbytes=nbytes, chain=chain)
            _alone(ctx, ends, solo, since, what)
            with ctx.calling(Call("CopyTensors", note=f"{threads} threads at once, {form}")):
                run = copier.run(rounds, until, functools.partial(_announce, ctx, what, snippet))
            figures = _figures(run)
            ctx.prove_item(proofs.COPIES, form, figures)
            ctx.tally(proofs.BYTES_COMPARED, run.bytes_checked)
            overlapping += figures["overlapping"]
            yield from _violations(run, what, snippet)
            if not figures["overlapping"] and not run.wrong and not run.failed:
                raise NotRun(f"{what}: no two calls of different threads overlapped in time ({figures['calls']} calls, "
                             f"{figures['seconds']} s): nothing was shown of copies made at once")
        ctx.prove(proofs.OVERLAPPING_CALLS, overlapping)
    finally:
        for role, guarded in ends.guarded:
            ctx.watch(guarded, role, "ep" if device_memory else "")
        ends.close()


# --- any thread -------------------------------------------------------------------------------

ANY_THREAD_SHAPE = (16, 64)
MAIN_SEED, OTHER_SEED = 21, 22
Operation = Callable[[int, str], tuple[Any, Any]]  # (seed, note of its calls) -> (bytes expected, bytes got)


def _copy(ctx: CheckContext, source_kind: str, destination_kind: str) -> Operation:
    f32 = tensors.DTYPES["float32"]

    def made(seed: int, note: str) -> tuple[Any, Any]:
        values = tensors.sample(f32, ANY_THREAD_SHAPE, seed=seed)
        source = ctx.place(values, source_kind, f32)
        destination = ctx.place(tensors.sentinel(f32, ANY_THREAD_SHAPE, SENTINEL), destination_kind, f32)
        ctx.copy([source], [destination], f"{source_kind}>{destination_kind}", note=note)
        return tensors.payload(values, f32), ctx.read(destination, destination_kind, f32, ANY_THREAD_SHAPE)
    return made


def _update(ctx: CheckContext, source_kind: str | None) -> Operation:
    """update_inplace into DEFAULT memory, from numpy (`source_kind` None) or from an OrtValue."""
    f32 = tensors.DTYPES["float32"]

    def made(seed: int, note: str) -> tuple[Any, Any]:
        values = tensors.sample(f32, ANY_THREAD_SHAPE, seed=seed)
        destination = ctx.place(tensors.sentinel(f32, ANY_THREAD_SHAPE, SENTINEL), "default", f32)
        source = values if source_kind is None else ctx.place(values, source_kind, f32)
        with ctx.calling(Call("update_inplace" if source_kind is None else "update_inplace ortvalue", f"{source_kind or 'numpy'}>default", note)):
            destination.update_inplace(source)
        return tensors.payload(values, f32), ctx.read(destination, "default", f32, ANY_THREAD_SHAPE)
    return made


def _run(ctx: CheckContext, info: SessionInfo) -> Operation:
    f32 = tensors.DTYPES["float32"]

    def made(seed: int, note: str) -> tuple[Any, Any]:
        feeds = _feeds(ctx.models.recipes[info.recipe].inputs, SESSION_SHAPE, seed)
        with ctx.calling(Call("InferenceSession.run", note=note or "inputs in cpu")), ctx.running(info):
            (output,) = info.session.run(None, feeds)
        return tensors.payload(reference(info.recipe, feeds).astype(np.float32), f32), tensors.payload(np.asarray(output), f32)
    return made


def _feeds(names: tuple[str, ...], shape: tuple[int, ...], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.integers(-8, 9, size=shape).astype(np.float32) for name in names}


def _operations(ctx: CheckContext, skipped: dict[str, str]) -> tuple[dict[str, Operation], SessionInfo | None]:
    """The calls to make on both threads, by name, and the session run (None where the EP runs
    no model here: then `skipped` says why)."""
    operations = {f"copy_tensors {direction}": _copy(ctx, *direction.split(">")) for direction in ("cpu>default", "default>cpu", "default>default")}
    operations["update_inplace(numpy) into default memory"] = _update(ctx, None)
    if ctx.target.has_api("update_inplace_ortvalue"):
        operations.update({f"update_inplace(OrtValue) {kind}>default": _update(ctx, kind) for kind in ("cpu", "default")})
    try:
        info = ctx.session_on_ep("add", tensors.DTYPES["float32"], SESSION_SHAPE)  # made on this thread, the worker's main one
        ctx.require_nodes_on_ep(info)
    except (NotApplicable, NotRun) as exc:
        skipped["session run"] = str(exc)
        return operations, None
    operations["session run"] = _run(ctx, info)
    return operations, info


@check("concurrency.any-thread")
def any_thread(ctx: CheckContext) -> Iterator[Violation]:
    """Each call once on this thread (the worker's main thread, which registered the EP library
    and creates the sessions), then on a new thread: a call that fails or goes wrong here is the
    functional tier's finding and is skipped; one that works here must work there too."""
    skipped: dict[str, str] = {}
    operations, info = _operations(ctx, skipped)
    session = (info.model_path, info.recipe, ctx.models.recipes[info.recipe].inputs) if info else None
    done = []
    for name, operation in operations.items():
        ctx.attempt(f"{name} on the thread that registered the library", scripts.any_thread(ctx, [name], session))
        watched = len(ctx.memories.guarded)
        try:
            expected, got = operation(MAIN_SEED, "")
        except (NotApplicable, NotRun) as exc:
            skipped[name] = str(exc)
        except Exception as exc:
            skipped[name] = f"fails on the thread that registered the library too (the functional tier's finding): {message_line(exc)}"
        else:
            if ctx.compare(expected, got):
                skipped[name] = "delivers wrong bytes on the thread that registered the library too (the functional tier's finding)"
            elif any(guarded.check() for _, _, guarded in ctx.memories.guarded[watched:]):
                skipped[name] = "writes past a host buffer on the thread that registered the library too (the functional tier's finding)"
        if name in skipped:
            del ctx.memories.guarded[watched:]  # what went wrong here is the functional tier's to report
            continue
        done.append(name)
    ctx.prove(proofs.SKIPPED, skipped)
    if not done:
        raise NotApplicable(f"no call to make from another thread: each was skipped on the thread that registered the library: {skipped}")
    snippet = scripts.any_thread(ctx, done, session)
    found: dict[str, Violation] = {}

    def elsewhere() -> None:
        for name in done:
            ctx.attempt(f"{name} on a thread other than the one that registered the library", snippet)
            try:
                expected, got = operations[name](OTHER_SEED, scripts.THREAD_NOTE)
            except Exception as exc:
                found[name] = Violation(f"{name} failed on a thread other than the one that registered the EP library (it works on that "
                                        f"thread): {message_line(exc)}", expected="the call to work on any thread", actual=first_line(exc),
                                        reproducer=snippet)
                continue
            if diff := ctx.compare(expected, got):
                found[name] = Violation(f"{name} on a thread other than the one that registered the EP library delivered wrong bytes "
                                        f"(right on that thread): {diff.describe()}", expected="the same bytes as on that thread",
                                        actual=diff.describe(), reproducer=snippet)

    _, error, other = on_another_thread(elsewhere)
    if error is not None:
        raise error  # the kit's own failure, or a call quarantined: as on this thread
    ctx.prove(proofs.THREADS, {"registered_and_created_on": threading.get_native_id(), "called_from": other})
    ctx.prove(proofs.CALLS_FROM_ANOTHER_THREAD, {name: "failed" if name in found else "worked" for name in done})
    yield from found.values()
