"""Imported memory: the interop API (importer, ImportMemory, CreateTensorFromMemory) with a
Vulkan producer, through onnxruntime's C API (conformance.testbed.interop).

Each check gets an `ImportRig` first, which says not_run (no C path, no producer here) or
not_applicable (the EP device has no importer) before anything is tried. The producer fills its
memory and reads it back through Vulkan, so "the bytes reached the producer" is observed on the
producer's side, not on onnxruntime's.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from conformance.checks import import_scripts as scripts
from conformance.checks.import_steps import COUNT, TENSOR, imported, imported_session, imported_tensor, interop_outputs, run_into
from conformance.checks.registry import check
from conformance.findings import NotApplicable, NotRun, Violation
from conformance.testbed.interop.capi import OrtError
from conformance.testbed.interop.handed import Handed
from conformance.testbed.interop.rig import HANDLE_KINDS, ImportRig, pattern
from conformance.checks.context import CheckContext
from conformance import proofs

@check("import.capability")
@interop_outputs
def capability(ctx: CheckContext, request: str) -> Iterator[Violation]:
    """CanImportMemory agrees with ImportMemory: a type it claims is imported, one it denies is
    refused. `request` names the handle type ('vk-memory-opaque-fd', 'host-allocation', ...).
    A type the kit cannot make is tried on a handle it can make, labelled with that type; that
    refusal counts only beside its valid twin (the same handle, labelled right, accepted)."""
    handle_type = request.replace("-", "_")
    rig = ImportRig.for_context(ctx)
    kind = {name: kind for kind, name in HANDLE_KINDS.items()}.get(handle_type)
    producer = rig.producers.of(kind) if kind is not None else None
    claimed = rig.can_import(handle_type)
    ctx.attempt(f"ImportMemory of a handle labelled {handle_type.upper()} (CanImportMemory: {claimed})")
    if kind is None or producer is None:
        if claimed:
            raise NotRun(f"the importer claims {handle_type.upper()}; the kit has no producer of it on this platform")
        # a claim of "no" must hold: a handle the kit can make, labelled with that type, is refused
        kind, producer = _any_producer(rig)
        twin = _import_once(rig, producer, HANDLE_KINDS[kind])
        if twin is not None:
            bad = _import_once(rig, producer, handle_type)
            raise NotRun(f"the valid twin (the same {HANDLE_KINDS[kind].upper()} handle labelled right) was refused too, so a refusal proves "
                         f"nothing: valid twin: {twin}; labelled {handle_type.upper()}: {bad or 'accepted'}")
    ctx.attempt(ctx.step, scripts.script(ctx, kind, f"CanImportMemory and ImportMemory agree on {handle_type.upper()}", scripts.capability(handle_type)))
    refusal = _import_once(rig, producer, handle_type)
    if refusal is not None and claimed:
        yield Violation(f"CanImportMemory says {handle_type.upper()} is importable, but ImportMemory refused it",
                        expected="ImportMemory imports what CanImportMemory claims", actual=refusal[:200])
    elif refusal is not None and handle_type == HANDLE_KINDS[kind]:
        raise NotApplicable(f"the importer does not import {handle_type.upper()} (CanImportMemory is false, ImportMemory refuses it)")
    elif refusal is not None:
        ctx.prove(proofs.REFUSED, refusal[:200])
    elif not claimed:
        yield Violation(f"CanImportMemory says {handle_type.upper()} is not importable, but ImportMemory accepted it",
                        expected="ImportMemory refuses what CanImportMemory denies", actual="a handle")
    else:
        ctx.prove(proofs.IMPORTED, handle_type)


def _import_once(rig: ImportRig, producer, handle_type: str) -> str | None:
    """ImportMemory of a fresh handle of a new allocation, labelled `handle_type`: None when
    accepted (the handle is released), else the refusal's message."""
    allocation = producer.allocate(4096)
    handed = Handed(producer, allocation)
    try:
        rig.release_handle(rig.import_handed(handed, 4096, handle_type=handle_type))
        return None
    except OrtError as exc:
        return exc.message
    finally:
        handed.close()
        producer.free(allocation)


def _any_producer(rig: ImportRig):
    """(kind, producer) of a handle the kit can make here: host memory where onnxruntime names
    HOST_ALLOCATION, else a Vulkan opaque fd (NotRun where neither)."""
    try:
        return "host-allocation", rig.producers.of("host-allocation")
    except NotApplicable:
        return "opaque-fd", rig.producers.of("opaque-fd")


@check("import.host-accessible")
@interop_outputs
def host_accessible(ctx: CheckContext, handle: str = "opaque-fd") -> Iterator[Violation]:
    """An imported tensor reporting HOST_ACCESSIBLE memory: the CPU reads the producer's bytes
    and its writes reach the producer, with no CopyTensors. `handle`: the handle kind imported."""
    rig = ImportRig.for_context(ctx)
    values = pattern(COUNT, 1)
    ctx.attempt("an imported tensor for the CPU", scripts.script(ctx, handle, "the CPU reads and writes an imported HOST_ACCESSIBLE tensor in place",
                                                                  scripts.HOST_ACCESSIBLE))
    with imported_tensor(ctx, rig, handle, values) as (item, tensor, memory):
        if memory["memory_type"] != "host_accessible":
            raise NotApplicable(f"imported tensors report {memory['memory_type']} memory ({memory['name']}), not HOST_ACCESSIBLE")
        ctx.attempt("reading the imported HOST_ACCESSIBLE tensor directly")
        got = rig.read(tensor, TENSOR)
        ctx.prove(proofs.MEMORY, memory["memory_type"])
        ctx.tally(proofs.BYTES_COMPARED, 2 * TENSOR)  # the read here, the producer's read of the write below
        if got != values.tobytes():
            yield Violation("a CPU read of the imported HOST_ACCESSIBLE tensor did not give the producer's bytes",
                            expected="the producer's bytes", actual=f"{np.frombuffer(got, np.float32)[:4]}...")
        written = pattern(COUNT, 7)
        rig.write(tensor, written.tobytes(), direct=True)
        seen = item.producer.read(item.allocation, TENSOR)
        if seen != written.tobytes():
            yield Violation("a CPU write into the imported HOST_ACCESSIBLE tensor did not reach the producer's memory",
                            expected="the written bytes, read back by the producer", actual=f"{np.frombuffer(seen, np.float32)[:4]}...")


@check("import.default-copy")
@interop_outputs
def default_copy(ctx: CheckContext, handle: str = "opaque-fd") -> Iterator[Violation]:
    """An imported tensor reporting DEFAULT device memory: CopyTensors to CPU gives the
    producer's bytes, and CopyTensors from CPU reaches the producer."""
    rig = ImportRig.for_context(ctx)
    values = pattern(COUNT, 2)
    ctx.attempt("an imported tensor for CopyTensors", scripts.script(ctx, handle, "CopyTensors moves the producer's bytes out of and into an imported tensor",
                                                                      scripts.DEFAULT_COPY))
    with imported_tensor(ctx, rig, handle, values) as (item, tensor, memory):
        if memory["memory_type"] != "default" or memory["device_type"] == "cpu":
            raise NotApplicable(f"imported tensors report {memory['memory_type']} {memory['device_type']} memory ({memory['name']}), not device DEFAULT")
        ctx.attempt("CopyTensors imported DEFAULT > CPU")
        got = rig.read(tensor, TENSOR)
        ctx.prove(proofs.MEMORY, memory["memory_type"])
        ctx.tally(proofs.BYTES_COMPARED, 2 * TENSOR)  # the copy to CPU here, the producer's read of the copy in below
        if got != values.tobytes():
            yield Violation("CopyTensors of the imported DEFAULT tensor to CPU did not give the producer's bytes",
                            expected=f"{values[:4]}...", actual=f"{np.frombuffer(got, np.float32)[:4]}...")
        written = pattern(COUNT, 9)
        ctx.attempt("CopyTensors CPU > imported DEFAULT")
        rig.write(tensor, written.tobytes(), direct=False)
        seen = item.producer.read(item.allocation, TENSOR)
        if seen != written.tobytes():
            yield Violation("CopyTensors CPU → imported DEFAULT tensor did not reach the producer's memory",
                            expected=f"{written[:4]}...", actual=f"{np.frombuffer(seen, np.float32)[:4]}...")


@check("import.offsets")
@interop_outputs
def offsets(ctx: CheckContext, handle: str = "opaque-fd") -> Iterator[Violation]:
    """Several tensors from one handle, at a descriptor offset plus tensor offsets: each reads
    its own slice of the producer's memory."""
    rig = ImportRig.for_context(ctx)
    base = 256
    values = [pattern(COUNT, seed) for seed in (3, 4, 5)]
    blocks = tuple((block.tobytes(), base + index * 1024) for index, block in enumerate(values))
    ctx.attempt("three tensors of one imported handle at offsets", scripts.script(ctx, handle, "tensors of one imported handle read their own slices",
                                                                                   scripts.OFFSETS))
    with imported(ctx, rig, handle, offset=base, writes=blocks) as item:
        for index, block in enumerate(values):
            tensor = rig.tensor(item.handle, (COUNT,), index * 1024)
            try:
                got = rig.read(tensor, TENSOR)
            finally:
                rig.release_tensor(tensor)
            ctx.tally(proofs.BYTES_COMPARED, TENSOR)
            if got != block.tobytes():
                yield Violation(f"tensor {index} (offset {base} + {index * 1024}) did not read its slice of the producer's memory",
                                expected=f"{block[:4]}...", actual=f"{np.frombuffer(got, np.float32)[:4]}...")


@check("import.session-io")
@interop_outputs
def session_io(ctx: CheckContext, handle: str = "opaque-fd") -> Iterator[Violation]:
    """An imported tensor as a session input and another (same handle) as its preallocated
    output: the values are right and the output lands in the producer's memory."""
    from conformance.testbed import tensors
    rig = ImportRig.for_context(ctx)
    values = pattern(COUNT, 0)
    made: list = []
    model, _ = ctx.models.get("relu", tensors.DTYPES["float32"], (COUNT,))
    ctx.attempt("a Relu session run with an imported input and an imported preallocated output",
                scripts.script(ctx, handle, "a session runs on an imported input into an imported preallocated output", scripts.session_io(model)))
    with imported(ctx, rig, handle, values) as item:
        try:
            made.append(rig.tensor(item.handle, (COUNT,)))
            made.append(rig.tensor(item.handle, (COUNT,), 8192))
            source, output = made
            with imported_session(ctx, rig, model) as session:
                left = run_into(ctx, rig, session, source, output)
            ctx.prove(proofs.ADDRESS_KEPT, left == output.value)
            ctx.tally(proofs.BYTES_COMPARED, TENSOR)
            if left != output.value:
                yield Violation("Run replaced the preallocated imported output with a value of its own", expected=hex(output.value),
                                actual=hex(left))
            expected = np.maximum(values, 0).astype(np.float32).tobytes()
            seen = item.producer.read(item.allocation, TENSOR, 8192)
            if seen != expected:
                yield Violation("the session's output did not land in the producer's memory with Relu's values",
                                expected=f"{np.frombuffer(expected, np.float32)[:4]}...", actual=f"{np.frombuffer(seen, np.float32)[:4]}...")
        finally:
            for value in made:
                rig.release_tensor(value)
