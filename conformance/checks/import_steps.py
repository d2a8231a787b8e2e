"""What the import checks (imported_memory, imported_refusals) share: an import as an application
makes it, and the failure of an interop call that returned OK with a NULL output.

`imported(...)` exports a fresh handle for the import, imports it, and afterwards releases the
handle, closes the caller's fd where it is still the caller's, and frees the producer's memory,
in that order (the caller's handle outlives what was made of it). `interop_outputs` turns a
`NullOutput` into the check's failure, naming the call; its subject is "both": the EP returned
it, and onnxruntime passed it on to the application.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from conformance.calls import Call
from conformance.findings import Violation
from conformance.testbed.interop.handed import Handed
from conformance.testbed.interop.rig import HANDLE_KINDS, ImportRig, NullOutput
from conformance.checks.context import CheckContext

COUNT = 24             # float32 elements per tensor
TENSOR = COUNT * 4     # bytes
ALLOCATION = 4 * 4096  # what the producer allocates for one import


@dataclass
class Imported:
    """One import: the producer, its allocation, the handle handed over and the imported handle
    (None once released)."""
    producer: Any
    allocation: Any
    handed: Handed
    handle: Any


@contextlib.contextmanager
def imported(ctx: CheckContext, rig: ImportRig, kind: str, values: np.ndarray | None = None, *, size: int = ALLOCATION, offset: int = 0,
             writes: tuple[tuple[bytes, int], ...] = ()) -> Iterator[Imported]:
    """A producer allocation of handle kind `kind` holding `values` at 0 (and each `writes`
    block at its offset), imported through a handle exported for this import alone."""
    producer = rig.source(kind)
    allocation = producer.allocate(size)
    handed = None
    item = None
    try:
        if values is not None:
            producer.write(allocation, values.tobytes())
        for data, at in writes:
            producer.write(allocation, data, at)
        handed = Handed(producer, allocation)
        ctx.attempt(f"ImportMemory of a {HANDLE_KINDS[kind].upper()} handle")
        item = Imported(producer, allocation, handed, None)
        item.handle = rig.import_handed(handed, size, offset)
        yield item
    finally:
        if item is not None and item.handle is not None:
            rig.release_handle(item.handle)
        if handed is not None:
            handed.close()
        producer.free(allocation)


@contextlib.contextmanager
def imported_tensor(ctx: CheckContext, rig: ImportRig, kind: str, values: np.ndarray) -> Iterator[tuple[Imported, Any, dict[str, Any]]]:
    """One tensor of a fresh import holding `values`: (the import, the tensor, what its memory info says)."""
    with imported(ctx, rig, kind, values) as item:
        tensor = rig.tensor(item.handle, (COUNT,))
        try:
            yield item, tensor, rig.memory(tensor)
        finally:
            rig.release_tensor(tensor)


@contextlib.contextmanager
def imported_session(ctx: CheckContext, rig: ImportRig, model: bytes) -> Iterator[Any]:
    """A session of `model` on the EP device in the rig's C environment (graph optimizations off,
    so the graph runs as written), released afterwards."""
    api = rig.api
    options, session = ctypes.c_void_p(), ctypes.c_void_p()
    try:
        api.call("CreateSessionOptions", ctypes.byref(options))
        api.call("SetSessionGraphOptimizationLevel", options, 0)
        devices = (ctypes.c_void_p * 1)(rig.device)
        api.call("SessionOptionsAppendExecutionProvider_V2", options, rig.env.env, devices, 1, None, None, 0)
        with ctx.calling(Call("CreateSessionFromArray")):
            api.call("CreateSessionFromArray", rig.env.env, model, len(model), options, ctypes.byref(session))
        yield session
    finally:
        if session.value:
            api.call("ReleaseSession", session)
        if options.value:
            api.call("ReleaseSessionOptions", options)


def run_into(ctx: CheckContext, rig: ImportRig, session: Any, source: Any, output: Any) -> int:
    """Run(x = source, y = output preallocated): the address of the value Run left as y."""
    outputs = (ctypes.c_void_p * 1)(output.value)
    with ctx.calling(Call("Run", note="imported input and output")):
        rig.api.call("Run", session, None, (ctypes.c_char_p * 1)(b"x"), (ctypes.c_void_p * 1)(source.value), 1, (ctypes.c_char_p * 1)(b"y"), 1,
                     outputs)
    return outputs[0] or 0


def interop_outputs(function: Callable[..., Iterator[Violation]]) -> Callable[..., Iterator[Violation]]:
    """A check whose interop call returned OK with a NULL output fails with that, naming the call."""
    @functools.wraps(function)
    def checked(ctx: CheckContext, *args, **kwargs) -> Iterator[Violation]:
        try:
            yield from function(ctx, *args, **kwargs)
        except NullOutput as exc:
            yield Violation(str(exc), expected=f"an error status, or a {exc.what}", actual=f"OK, and a NULL {exc.what}",
                            reproducer=ctx.reproducer, subject="both")
    return checked
