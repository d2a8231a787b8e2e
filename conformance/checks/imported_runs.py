"""Imported memory, what onnxruntime and the EP do with an import beyond viewing it: the handle's
own Release, a copy whose source and destination are the same imported memory, and the copies
onnxruntime asks of the EP around a Run on imported tensors.

Which copies onnxruntime asks of an EP's data transfer is not shown by any public API: the kit
counts them only where the EP itself writes them down (refdev's ORT_REFDEV_COPY_LOG); on any
other EP those two contracts are not_applicable, saying so. What the copies would do to the
bytes is public, and the self-copy contract holds every EP to it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from conformance.calls import Call
from conformance.checks import import_scripts as scripts
from conformance.checks.import_steps import COUNT, TENSOR, imported, imported_session, interop_outputs, run_into
from conformance.checks.registry import check
from conformance.findings import NotApplicable, NotRun, Violation
from conformance.testbed.interop import capi as C
from conformance.testbed.interop.rig import ImportRig, pattern
from conformance.checks.context import CheckContext
from conformance import proofs

# The one EP that writes down the copies it is asked for, and how it is told where to
COPY_LOGGING_EP = "RefDevExecutionProvider"
COPY_LOG_VARIABLE = "ORT_REFDEV_COPY_LOG"
NO_OBSERVATION = ("no public API shows which copies onnxruntime asks of an EP's data transfer, and {provider} offers no record of its own "
                  "(the kit reads one only from refdev, ORT_REFDEV_COPY_LOG)")


@check("import.handle-release")
@interop_outputs
def handle_release(ctx: CheckContext, handle: str = "opaque-fd") -> Iterator[Violation]:
    """The handle ImportMemory returns carries what the header's OrtExternalMemoryHandle asks
    of it: its version, the EP device that made it and a Release function, which is all that
    ReleaseExternalMemoryHandle calls."""
    rig = ImportRig.for_context(ctx)
    ctx.attempt("reading the imported handle's OrtExternalMemoryHandle", scripts.script(ctx, handle, "the imported handle has a Release function",
                                                                                      scripts.HANDLE_RELEASE))
    with imported(ctx, rig, handle) as item:
        # relied on: the application's handle is the EP's own struct (onnxruntime_ep_c_api.h says the
        # EP derives its handle from it; onnxruntime 1.32 hands it over unwrapped)
        head = C.ExternalMemoryHandle.from_address(item.handle.value)
        ctx.prove(proofs.RELEASE, "set" if head.Release else "NULL")
        if not head.Release:
            yield Violation("the handle ImportMemory returned has no Release function: ReleaseExternalMemoryHandle cannot free it "
                            "(onnxruntime returns without a word, and the EP's ReleaseMemory is not called either), so every import leaks",
                            expected="OrtExternalMemoryHandle::Release set", actual="NULL")
        if head.ep_device != rig.device:
            yield Violation("the imported handle does not name the EP device whose importer made it",
                            expected=f"ep_device {rig.device:#x}", actual=f"ep_device {head.ep_device or 0:#x}")


@check("import.self-copy")
@interop_outputs
def self_copy(ctx: CheckContext, handle: str = "opaque-fd") -> Iterator[Violation]:
    """CopyTensors from an imported tensor onto another tensor of the same handle at the same
    offset (source and destination the same memory, as onnxruntime 1.32 asks around a Run with an
    imported HOST_ACCESSIBLE input) leaves the bytes as they were."""
    rig = ImportRig.for_context(ctx)
    values = pattern(COUNT, 13)
    ctx.attempt("CopyTensors of an imported tensor onto itself", scripts.script(ctx, handle, "a copy onto the same memory keeps its bytes",
                                                                                 scripts.SELF_COPY))
    with imported(ctx, rig, handle, values) as item:
        made = [rig.tensor(item.handle, (COUNT,)), rig.tensor(item.handle, (COUNT,))]
        try:
            source, destination = made
            at = [C.data_address(rig.api, value) for value in made]
            if at[0] != at[1]:
                raise NotRun(f"two tensors of one handle at one offset have different addresses ({at[0]:#x}, {at[1]:#x}): no copy onto itself to make")
            try:
                with ctx.calling(Call("CopyTensors", note="imported onto itself")):
                    C.copy_tensors(rig.api, rig.env, [source], [destination])
            except C.OrtError as exc:
                raise NotApplicable(f"CopyTensors of an imported tensor onto itself is refused, which the EP may do: {exc.message[:200]}") from None
            seen = item.producer.read(item.allocation, TENSOR)
            ctx.tally(proofs.BYTES_COMPARED, TENSOR)
            ctx.prove(proofs.SELF_COPY, "bytes kept" if seen == values.tobytes() else "bytes changed")
            if seen != values.tobytes():
                yield Violation("CopyTensors of an imported tensor onto itself (source and destination the same memory) changed its bytes",
                                expected=f"{values[:4]}...", actual=f"{np.frombuffer(seen, np.float32)[:4]}...")
        finally:
            for value in made:
                rig.release_tensor(value)


@dataclass(frozen=True)
class AskedCopy:
    """One copy the EP's data transfer was asked for, as its record says."""
    source: int
    destination: int
    size: int

    @classmethod
    def parse(cls, line: str) -> "AskedCopy":
        # refdev's line: <source kind> <destination kind> <bytes> <source imported> <destination imported> <source> <destination>
        fields = line.split()
        return cls(_address(fields[5]), _address(fields[6]), int(fields[2]))

    def describe(self) -> str:
        onto = "onto itself, " if self.source == self.destination else ""
        return f"{self.size} bytes {onto}{self.source:#x} > {self.destination:#x}"


def _address(text: str) -> int:
    return int(text, 16) if text.startswith("0x") else 0


@contextlib.contextmanager
def asked_copies(ctx: CheckContext) -> Iterator[list[AskedCopy]]:
    """The copies the EP is asked for within the block, read from the EP's own record; NotApplicable
    where the EP keeps none."""
    provider = ctx.target.provider
    if provider != COPY_LOGGING_EP:
        raise NotApplicable(NO_OBSERVATION.format(provider=provider))
    asked: list[AskedCopy] = []
    before = os.environ.get(COPY_LOG_VARIABLE)
    with tempfile.TemporaryDirectory(prefix="copies-") as folder:
        path = os.path.join(folder, "copies.log")
        os.environ[COPY_LOG_VARIABLE] = path  # refdev reads it on every copy
        try:
            yield asked
        finally:
            if before is None:
                os.environ.pop(COPY_LOG_VARIABLE, None)
            else:
                os.environ[COPY_LOG_VARIABLE] = before
            if os.path.exists(path):
                with open(path) as log:
                    asked.extend(AskedCopy.parse(line) for line in log if line.strip())


def _run_copies(ctx: CheckContext, handle: str, memory_type: str) -> Iterator[Violation]:
    """A Relu Run on an imported input into an imported preallocated output of one handle, with
    imported tensors in `memory_type` memory: the EP is asked for no copy of either."""
    from conformance.testbed import tensors
    rig = ImportRig.for_context(ctx)
    values = pattern(COUNT, 14)
    model, _ = ctx.models.get("relu", tensors.DTYPES["float32"], (COUNT,))
    ctx.attempt("the copies asked around a Run on imported tensors",
                scripts.script(ctx, handle, f"a Run on imported {memory_type.upper()} tensors asks for no copy", scripts.run_copies(model)))
    with imported(ctx, rig, handle, values) as item:
        made = [rig.tensor(item.handle, (COUNT,)), rig.tensor(item.handle, (COUNT,), 8192)]
        try:
            memory = rig.memory(made[0])
            if memory["memory_type"] != memory_type:
                raise NotApplicable(f"imported tensors report {memory['memory_type']} memory ({memory['name']}), not {memory_type.upper()}")
            with imported_session(ctx, rig, model) as session, asked_copies(ctx) as asked:
                run_into(ctx, rig, session, *made)
            ctx.prove(proofs.COPIES_ASKED, len(asked))
            if asked:
                yield Violation(f"a Run on imported {memory_type.upper()} tensors asked the EP for {len(asked)} {'copy' if len(asked) == 1 else 'copies'}: "
                                + "; ".join(copy.describe() for copy in asked[:4]),
                                expected="no copy: the input and the output are already the EP device's memory", actual=f"{len(asked)} copies",
                                subject="runtime")
        finally:
            for value in made:
                rig.release_tensor(value)


@check("import.run-no-copies")
@interop_outputs
def run_no_copies(ctx: CheckContext, handle: str = "opaque-fd") -> Iterator[Violation]:
    """A Run on imported DEFAULT tensors (input and preallocated output of one handle) asks the EP for no copy."""
    yield from _run_copies(ctx, handle, "default")


@check("import.host-accessible-no-copies")
@interop_outputs
def host_accessible_no_copies(ctx: CheckContext, handle: str = "opaque-fd") -> Iterator[Violation]:
    """A Run on imported HOST_ACCESSIBLE tensors asks the EP for no copy (onnxruntime 1.32 asks
    one of the input onto itself per Run)."""
    yield from _run_copies(ctx, handle, "host_accessible")
