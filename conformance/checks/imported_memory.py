"""Imported memory: the interop API (importer, ImportMemory, CreateTensorFromMemory) with a
Vulkan producer, through onnxruntime's C API (conformance.target.interop).

Each check gets an `ImportRig` first, which says not_run (no C path, no producer here) or
not_applicable (the EP device has no importer) before anything is tried. The producer fills its
memory and reads it back through Vulkan, so "the bytes reached the producer" is observed on the
producer's side, not on onnxruntime's.
"""

from __future__ import annotations

import ctypes
from typing import Iterator

import numpy as np

from conformance.calls import Call
from conformance.checks.registry import check
from conformance.findings import NotApplicable, NotRun, Violation
from conformance.target.interop.capi import OrtError
from conformance.target.interop.rig import ImportRig, close_fd, pattern

COUNT = 24             # float32 elements per tensor
TENSOR = COUNT * 4     # bytes
ALLOCATION = 4 * 4096  # what the producer allocates for one import


def _snippet(step: str) -> str:
    return ("# C API, onnxruntime >= 1.24 (see conformance/interop/): a Vulkan allocation exported with vkGetMemoryFdKHR,\n"
            "importer = CreateExternalResourceImporterForDevice(ep_device)\n"
            "handle = ImportMemory(importer, {VK_MEMORY_OPAQUE_FD, fd, size_bytes, offset_bytes})\n"
            f"tensor = CreateTensorFromMemory(importer, handle, {{float32, [{COUNT}], offset_bytes}})\n# {step}")


def _import(ctx, rig: ImportRig, values: np.ndarray | None = None, *, size: int = ALLOCATION, offset: int = 0):
    """A producer allocation holding `values` at 0, imported; (producer, allocation, fd, handle)."""
    producer = rig.require_opaque_fd()
    allocation = producer.allocate(size)
    if values is not None:
        producer.write(allocation, values.tobytes())
    fd = producer.export_fd(allocation)
    ctx.attempt("ImportMemory of a Vulkan opaque fd", _snippet("import"))
    with ctx.calling(Call("ImportMemory")):
        handle = rig.import_memory(rig.descriptor(fd, size, offset))
    return producer, allocation, fd, handle


def _memory_type(rig: ImportRig, tensor) -> str:
    return rig.memory(tensor)["memory_type"]


@check("import.capability")
def capability(ctx, request: str) -> Iterator[Violation]:
    """CanImportMemory agrees with ImportMemory: a type it claims is imported, one it denies is
    refused. `request` names the handle type ('vk-memory-opaque-fd', ...)."""
    handle_type = request.replace("-", "_")
    rig = ImportRig.for_context(ctx)
    with ctx.calling(Call("CanImportMemory")):
        claimed = rig.can_import(handle_type)
    if handle_type != "vk_memory_opaque_fd":
        if claimed:
            raise NotRun(f"the importer claims {handle_type}; the kit has no producer of it on this platform")
        # a claim of "no" must hold: ImportMemory with that type is refused
        producer = rig.producer()
        allocation = producer.allocate(4096)
        fd = producer.export_fd(allocation)
        try:
            with ctx.calling(Call("ImportMemory")):
                handle = rig.import_memory(rig.descriptor(fd, 4096, handle_type=handle_type))
        except OrtError as exc:
            ctx.prove("refused", exc.message[:200])
            return
        finally:
            close_fd(fd)
            producer.free(allocation)
        rig.release_handle(handle)
        yield Violation(f"CanImportMemory says {handle_type} is not importable, but ImportMemory accepted it",
                        expected="ImportMemory refuses what CanImportMemory denies", actual="a handle", reproducer=_snippet("unsupported type"))
        return
    producer = rig.producer()
    if not claimed:
        # the kit can produce it; an importer that denies it must refuse it too
        allocation = producer.allocate(4096)
        fd = producer.export_fd(allocation)
        try:
            handle = rig.import_memory(rig.descriptor(fd, 4096))
        except OrtError:
            raise NotApplicable("the importer does not import VK_MEMORY_OPAQUE_FD (CanImportMemory is false, ImportMemory refuses it)") from None
        finally:
            close_fd(fd)
        rig.release_handle(handle)
        yield Violation("CanImportMemory says VK_MEMORY_OPAQUE_FD is not importable, but ImportMemory accepted it", actual="a handle")
        return
    _, allocation, fd, handle = _import(ctx, rig)
    ctx.prove("imported", handle_type)
    rig.release_handle(handle)
    close_fd(fd)
    producer.free(allocation)


@check("import.host-accessible")
def host_accessible(ctx) -> Iterator[Violation]:
    """An imported tensor reporting HOST_ACCESSIBLE memory: the CPU reads the producer's bytes
    and its writes reach the producer, with no CopyTensors."""
    rig = ImportRig.for_context(ctx)
    values = pattern(COUNT, 1)
    producer, allocation, fd, handle = _import(ctx, rig, values)
    try:
        tensor = rig.tensor(handle, (COUNT,))
        memory = rig.memory(tensor)
        if memory["memory_type"] != "host_accessible":
            raise NotApplicable(f"imported tensors report {memory['memory_type']} memory ({memory['name']}), not HOST_ACCESSIBLE")
        ctx.attempt("reading the imported HOST_ACCESSIBLE tensor directly", _snippet("CPU reads GetTensorMutableData"))
        got = rig.read(tensor, TENSOR)
        ctx.prove("memory", memory["memory_type"])
        ctx.tally("bytes_compared", 2 * TENSOR)  # the read here, the producer's read of the write below
        if got != values.tobytes():
            yield Violation("a CPU read of the imported HOST_ACCESSIBLE tensor did not give the producer's bytes",
                            expected="the producer's bytes", actual=f"{np.frombuffer(got, np.float32)[:4]}...",
                            reproducer=_snippet("CPU read"))
        written = pattern(COUNT, 7)
        rig.write(tensor, written.tobytes(), direct=True)
        seen = producer.read(allocation, TENSOR)
        if seen != written.tobytes():
            yield Violation("a CPU write into the imported HOST_ACCESSIBLE tensor did not reach the producer's memory",
                            expected="the written bytes, read back through Vulkan", actual=f"{np.frombuffer(seen, np.float32)[:4]}...",
                            reproducer=_snippet("CPU write, then vkMapMemory read"))
        rig.release_tensor(tensor)
    finally:
        rig.release_handle(handle)
        close_fd(fd)
        producer.free(allocation)


@check("import.default-copy")
def default_copy(ctx) -> Iterator[Violation]:
    """An imported tensor reporting DEFAULT device memory: CopyTensors to CPU gives the
    producer's bytes, and CopyTensors from CPU reaches the producer."""
    rig = ImportRig.for_context(ctx)
    values = pattern(COUNT, 2)
    producer, allocation, fd, handle = _import(ctx, rig, values)
    try:
        tensor = rig.tensor(handle, (COUNT,))
        memory = rig.memory(tensor)
        if memory["memory_type"] != "default" or memory["device_type"] == "cpu":
            raise NotApplicable(f"imported tensors report {memory['memory_type']} {memory['device_type']} memory ({memory['name']}), not device DEFAULT")
        ctx.attempt("CopyTensors imported DEFAULT > CPU", _snippet("CopyTensors(tensor -> CPU)"))
        with ctx.calling(Call("CopyTensors")):
            got = rig.read(tensor, TENSOR)
        ctx.prove("memory", memory["memory_type"])
        ctx.tally("bytes_compared", 2 * TENSOR)  # the copy to CPU here, the producer's read of the copy in below
        if got != values.tobytes():
            yield Violation("CopyTensors of the imported DEFAULT tensor to CPU did not give the producer's bytes",
                            expected=f"{values[:4]}...", actual=f"{np.frombuffer(got, np.float32)[:4]}...",
                            reproducer=_snippet("CopyTensors(tensor -> CPU)"))
        written = pattern(COUNT, 9)
        ctx.attempt("CopyTensors CPU > imported DEFAULT", _snippet("CopyTensors(CPU -> tensor), then vkMapMemory read"))
        with ctx.calling(Call("CopyTensors")):
            rig.write(tensor, written.tobytes(), direct=False)
        seen = producer.read(allocation, TENSOR)
        if seen != written.tobytes():
            yield Violation("CopyTensors CPU → imported DEFAULT tensor did not reach the producer's memory",
                            expected=f"{written[:4]}...", actual=f"{np.frombuffer(seen, np.float32)[:4]}...",
                            reproducer=_snippet("CopyTensors(CPU -> tensor), then vkMapMemory read"))
        rig.release_tensor(tensor)
    finally:
        rig.release_handle(handle)
        close_fd(fd)
        producer.free(allocation)


@check("import.offsets")
def offsets(ctx) -> Iterator[Violation]:
    """Several tensors from one handle, at a descriptor offset plus tensor offsets: each reads
    its own slice of the producer's memory."""
    rig = ImportRig.for_context(ctx)
    base = 256
    values = [pattern(COUNT, seed) for seed in (3, 4, 5)]
    producer = rig.require_opaque_fd()
    allocation = producer.allocate(ALLOCATION)
    for index, block in enumerate(values):
        producer.write(allocation, block.tobytes(), base + index * 1024)
    fd = producer.export_fd(allocation)
    ctx.attempt("three tensors of one imported handle at offsets", _snippet(f"descriptor offset {base}, tensor offsets 0/1024/2048"))
    handle = rig.import_memory(rig.descriptor(fd, ALLOCATION, base))
    try:
        for index, block in enumerate(values):
            tensor = rig.tensor(handle, (COUNT,), index * 1024)
            got = rig.read(tensor, TENSOR)
            rig.release_tensor(tensor)
            ctx.tally("bytes_compared", TENSOR)
            if got != block.tobytes():
                yield Violation(f"tensor {index} (offset {base} + {index * 1024}) did not read its slice of the producer's memory",
                                expected=f"{block[:4]}...", actual=f"{np.frombuffer(got, np.float32)[:4]}...",
                                reproducer=_snippet(f"tensor offset {index * 1024}"))
    finally:
        rig.release_handle(handle)
        close_fd(fd)
        producer.free(allocation)


@check("import.session-io")
def session_io(ctx) -> Iterator[Violation]:
    """An imported tensor as a session input and another (same handle) as its preallocated
    output: the values are right and the output lands in the producer's memory."""
    from conformance.target import tensors
    rig = ImportRig.for_context(ctx)
    values = pattern(COUNT, 0)
    producer, allocation, fd, handle = _import(ctx, rig, values)
    api = rig.api
    session = options = None
    try:
        source = rig.tensor(handle, (COUNT,))
        output = rig.tensor(handle, (COUNT,), 8192)
        model, _ = ctx.models.get("relu", tensors.DTYPES["float32"], (COUNT,))
        options = ctypes.c_void_p()
        api.call("CreateSessionOptions", ctypes.byref(options))
        api.call("SetSessionGraphOptimizationLevel", options, 0)
        devices = (ctypes.c_void_p * 1)(rig.device)
        api.call("SessionOptionsAppendExecutionProvider_V2", options, rig.env.env, devices, 1, None, None, 0)
        session = ctypes.c_void_p()
        ctx.attempt("a Relu session run with an imported input and an imported preallocated output", _snippet("Run(x=tensor, y=tensor2)"))
        with ctx.calling(Call("CreateSessionFromArray")):
            api.call("CreateSessionFromArray", rig.env.env, model, len(model), options, ctypes.byref(session))
        inputs = (ctypes.c_void_p * 1)(source.value)
        outputs = (ctypes.c_void_p * 1)(output.value)
        with ctx.calling(Call("Run")):
            api.call("Run", session, None, (ctypes.c_char_p * 1)(b"x"), inputs, 1, (ctypes.c_char_p * 1)(b"y"), 1, outputs)
        ctx.prove("address_kept", outputs[0] == output.value)
        ctx.tally("bytes_compared", TENSOR)
        if outputs[0] != output.value:
            yield Violation("Run replaced the preallocated imported output with a value of its own", expected=hex(output.value),
                            actual=hex(outputs[0] or 0), reproducer=_snippet("Run"))
        expected = np.maximum(values, 0).astype(np.float32).tobytes()
        seen = producer.read(allocation, TENSOR, 8192)
        if seen != expected:
            yield Violation("the session's output did not land in the producer's memory with Relu's values",
                            expected=f"{np.frombuffer(expected, np.float32)[:4]}...", actual=f"{np.frombuffer(seen, np.float32)[:4]}...",
                            reproducer=_snippet("Run, then vkMapMemory read of the output"))
        rig.release_tensor(source)
        rig.release_tensor(output)
    finally:
        if session is not None and session.value:
            api.call("ReleaseSession", session)
        if options is not None and options.value:
            api.call("ReleaseSessionOptions", options)
        rig.release_handle(handle)
        close_fd(fd)
        producer.free(allocation)


BAD_IMPORTS = {
    "size-past-allocation": "ImportMemory with size_bytes 1 MiB past the allocation",
    "offset-past-end": "ImportMemory with offset_bytes at the end of the allocation",
    "unsupported-handle-type": "ImportMemory of the fd labelled D3D12_RESOURCE",
    "bad-version": "ImportMemory with descriptor version 1",
    "bad-tensor-version": "CreateTensorFromMemory with tensor descriptor version 1",
    "tensor-past-end": "CreateTensorFromMemory of a tensor that runs past the imported bytes",
    "other-device": "CreateTensorFromMemory on one EP device of a handle another device imported",
}


@check("import.rejects-bad")
def rejects_bad(ctx, request: str) -> Iterator[Violation]:
    """A bad import is refused with an error, after the same import asked right has worked."""
    rig = ImportRig.for_context(ctx)
    producer = rig.require_opaque_fd()
    other = rig.other_device_importer() if request == "other-device" else None
    allocation = producer.allocate(ALLOCATION)
    fd = producer.export_fd(allocation)
    handle = None
    try:
        with ctx.precondition("a valid ImportMemory of the same allocation"):
            rig.release_handle(rig.import_memory(rig.descriptor(fd, ALLOCATION)))
        descriptor = {
            "size-past-allocation": lambda: rig.descriptor(fd, ALLOCATION + (1 << 20)),
            "offset-past-end": lambda: rig.descriptor(fd, ALLOCATION, ALLOCATION),
            "unsupported-handle-type": lambda: rig.descriptor(fd, ALLOCATION, handle_type="d3d12_resource"),
            "bad-version": lambda: rig.descriptor(fd, ALLOCATION, version=1),
            "tensor-past-end": lambda: rig.descriptor(fd, ALLOCATION),
            "bad-tensor-version": lambda: rig.descriptor(fd, ALLOCATION),
            "other-device": lambda: rig.descriptor(fd, ALLOCATION),
        }[request]()
        ctx.attempt(BAD_IMPORTS[request], _snippet(f"{BAD_IMPORTS[request]}: expected an error"))
        try:
            with ctx.calling(Call("ImportMemory")):
                handle = rig.import_memory(descriptor)
                if request == "tensor-past-end":
                    rig.release_tensor(rig.tensor(handle, (ALLOCATION // 4,), 64))
                if request == "bad-tensor-version":
                    rig.release_tensor(rig.tensor(handle, (COUNT,), version=1))
                if request == "other-device":
                    assert other is not None
                    rig.release_tensor(other.tensor(handle, (COUNT,)))
        except OrtError as exc:
            ctx.prove("refused", exc.message[:200])
            if not exc.message.strip():
                yield Violation(f"{BAD_IMPORTS[request]} was refused without a message", actual=repr(exc))
            return
        yield Violation(f"{BAD_IMPORTS[request]} was accepted", expected="an error", actual="accepted",
                        reproducer=_snippet(BAD_IMPORTS[request]))
    finally:
        if handle is not None and handle.value:
            rig.release_handle(handle)
        close_fd(fd)
        producer.free(allocation)


@check("import.lifetime")
def lifetime(ctx, request: str) -> Iterator[Violation]:
    """A tensor stays usable after its handle (and the importer that made it) are released:
    reads give the producer's bytes and writes still reach it. `request`: 'tensor-outlives-handle'
    or 'tensor-outlives-importer'."""
    outlives = request.rsplit("-", 1)[-1]
    rig = ImportRig.for_context(ctx)
    values = pattern(COUNT, 6)
    producer, allocation, fd, handle = _import(ctx, rig, values)
    importer = None
    try:
        if outlives == "importer":
            importer = ctypes.c_void_p()
            rig.api.interop("CreateExternalResourceImporterForDevice", ctypes.c_void_p(rig.device), ctypes.byref(importer))
            own = ImportRig(rig.api, rig.env, rig.device, importer)
            handle2 = own.import_memory(own.descriptor(fd, ALLOCATION))
            tensor = own.tensor(handle2, (COUNT,))
            own.release_handle(handle2)
            rig.api.interop("ReleaseExternalResourceImporter", importer)
        else:
            tensor = rig.tensor(handle, (COUNT,))
        rig.release_handle(handle)
        handle = None
        ctx.attempt(f"using a tensor after its handle{' and importer' if outlives == 'importer' else ''} were released",
                    _snippet("ReleaseExternalMemoryHandle(handle), then read and write the tensor"))
        with ctx.calling(Call("CopyTensors")):
            got = rig.read(tensor, TENSOR)
            ctx.tally("bytes_compared", 2 * TENSOR)  # this read, the producer's read of the write below
            if got != values.tobytes():
                yield Violation(f"a tensor that outlived its {outlives} no longer reads the producer's bytes",
                                expected=f"{values[:4]}...", actual=f"{np.frombuffer(got, np.float32)[:4]}...")
            written = pattern(COUNT, 11)
            rig.write(tensor, written.tobytes(), direct=rig.cpu_readable(tensor))
        if producer.read(allocation, TENSOR) != written.tobytes():
            yield Violation(f"a write into a tensor that outlived its {outlives} did not reach the producer")
        rig.release_tensor(tensor)
    finally:
        if handle is not None:
            rig.release_handle(handle)
        close_fd(fd)
        producer.free(allocation)


@check("import.unregister-while-imported")
def unregister_while_imported(ctx) -> Iterator[Violation]:
    """The EP library is unregistered from the C environment while a handle and a tensor made
    from it are alive; releasing them afterwards must not crash or hang, and the producer's
    memory is still the producer's. (Runs in a process of its own: the library is gone after.)"""
    rig = ImportRig.for_context(ctx)
    if not rig.env.registration:
        raise NotApplicable("the EP is not a plugin library: nothing to unregister")
    values = pattern(COUNT, 12)
    producer, allocation, fd, handle = _import(ctx, rig, values)
    tensor = rig.tensor(handle, (COUNT,))
    ctx.attempt("UnregisterExecutionProviderLibrary while an imported handle and tensor are alive, then releasing them",
                _snippet("UnregisterExecutionProviderLibrary(env, name); ReleaseValue(tensor); ReleaseExternalMemoryHandle(handle)"))
    with ctx.calling(Call("UnregisterExecutionProviderLibrary")):
        rig.env.unregister()
        rig.release_tensor(tensor)
        rig.release_handle(handle)
    close_fd(fd)
    seen = producer.read(allocation, TENSOR)
    producer.free(allocation)
    ctx.tally("bytes_compared", TENSOR)
    if seen != values.tobytes():
        yield Violation("the producer's memory changed when the EP library was unregistered and its imports released",
                        expected=f"{values[:4]}...", actual=f"{np.frombuffer(seen, np.float32)[:4]}...")
