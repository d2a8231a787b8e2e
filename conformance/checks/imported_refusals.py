"""Imported memory, what must be refused and what must outlive what: bad imports (each beside
its valid twin), the lifetime of a tensor against its handle and importer, the library unloaded
under live imports, and how an EP device says it imports nothing.

A refusal proves the contract only when it is the refusal asked for: the same request made
right (a fresh handle, the same importer) is tried first, and where that valid twin is refused
too, the case is not_run with both messages.
"""

from __future__ import annotations

import os
from typing import Iterator

import numpy as np

from conformance.calls import Call
from conformance.checks import import_scripts as scripts
from conformance.checks.import_steps import ALLOCATION, COUNT, TENSOR, imported, interop_outputs
from conformance.checks.registry import check
from conformance.findings import NotApplicable, NotRun, Violation
from conformance.testbed.interop.capi import HANDLE_TYPES, OrtError
from conformance.testbed.interop.handed import Handed
from conformance.testbed.interop.rig import HANDLE_KINDS, ImportRig, NoImporter, c_device, create_importer, pattern
from conformance.checks.context import CheckContext
from conformance import proofs

BAD_IMPORTS = {
    "size-past-allocation": "ImportMemory with size_bytes 1 MiB past the allocation",
    "offset-past-end": "ImportMemory with offset_bytes at the end of the allocation",
    "unsupported-handle-type": "ImportMemory of the handle labelled with a type CanImportMemory denies",
    "bad-version": "ImportMemory with descriptor version 1",
    "bad-tensor-version": "CreateTensorFromMemory with tensor descriptor version 1",
    "tensor-past-end": "CreateTensorFromMemory of a tensor that runs past the imported bytes",
    "other-device": "CreateTensorFromMemory on one EP device of a handle another device imported",
}
TENSOR_REQUESTS = ("bad-tensor-version", "tensor-past-end", "other-device")


def _denied_type(rig: ImportRig, own: str) -> str:
    for name in HANDLE_TYPES:
        if name != own and not rig.can_import(name):
            return name
    raise NotApplicable("the importer claims every handle type onnxruntime names: none to label a handle with wrongly")


def _try(rig: ImportRig, kind: str, request: str, bad: bool, other: ImportRig | None, denied: str) -> tuple[str, str] | None:
    """One request, bad or its valid twin, on a fresh handle: None when accepted, else (the call
    that refused, its message)."""
    producer = rig.source(kind)
    allocation = producer.allocate(ALLOCATION)
    handed = Handed(producer, allocation)
    importer = other if request == "other-device" and not bad else rig
    assert importer is not None
    handle = tensor = None
    size = ALLOCATION + (1 << 20) if bad and request == "size-past-allocation" else ALLOCATION
    offset = (ALLOCATION if bad else 256) if request == "offset-past-end" else 0
    try:
        call = "ImportMemory"
        try:
            handle = importer.import_handed(handed, size, offset, handle_type=denied if bad and request == "unsupported-handle-type" else None,
                                            version=1 if bad and request == "bad-version" else 24)
            if request in TENSOR_REQUESTS:
                call = "CreateTensorFromMemory"
                maker = other if request == "other-device" else rig
                assert maker is not None
                shape = (ALLOCATION // 4,) if request == "tensor-past-end" else (COUNT,)
                tensor = maker.tensor(handle, shape, 64 if bad and request == "tensor-past-end" else 0,
                                      version=1 if bad and request == "bad-tensor-version" else 24)
        except OrtError as exc:
            return call, exc.message
        return None
    finally:
        if tensor is not None:
            rig.release_tensor(tensor)
        if handle is not None:
            importer.release_handle(handle)
        handed.close()
        producer.free(allocation)


@check("import.rejects-bad")
@interop_outputs
def rejects_bad(ctx: CheckContext, request: str, handle: str = "opaque-fd") -> Iterator[Violation]:
    """A bad import is refused with an error, right after its valid twin (the same request made
    right, on a fresh handle, by the same importer) was accepted."""
    rig = ImportRig.for_context(ctx)
    rig.source(handle)
    other = rig.other_device_importer() if request == "other-device" else None
    denied = _denied_type(rig, HANDLE_KINDS[handle]) if request == "unsupported-handle-type" else ""
    ctx.attempt(f"the valid twin of: {BAD_IMPORTS[request]}",
                scripts.script(ctx, handle, f"{BAD_IMPORTS[request]} is refused, its valid twin accepted",
                               scripts.rejects_bad(request, HANDLE_TYPES.get(denied, -1), BAD_IMPORTS[request])))
    twin = _try(rig, handle, request, False, other, denied)
    ctx.attempt(BAD_IMPORTS[request])
    refused = _try(rig, handle, request, True, other, denied)
    if twin is not None:
        bad_said = f"{refused[0]}: {refused[1]}" if refused else "accepted"
        raise NotRun(f"the valid twin of this request (a fresh handle, the same importer) was refused too, so a refusal proves nothing: "
                     f"valid twin: {twin[0]}: {twin[1]}; bad request: {bad_said}")
    if refused is None:
        yield Violation(f"{BAD_IMPORTS[request]} was accepted", expected="an error", actual="accepted")
        return
    call, message = refused
    if request in TENSOR_REQUESTS and call != "CreateTensorFromMemory":
        raise NotRun(f"the import before the bad tensor descriptor was refused ({call}: {message}), so the bad descriptor was never tried")
    ctx.prove(proofs.REFUSED, f"{call}: {message[:200]}")
    ctx.prove(proofs.VALID_TWIN, "accepted")
    if not message.strip():
        yield Violation(f"{BAD_IMPORTS[request]} was refused without a message", actual=repr(message))


@check("import.lifetime")
@interop_outputs
def lifetime(ctx: CheckContext, request: str, handle: str = "opaque-fd") -> Iterator[Violation]:
    """A tensor stays usable after its handle (and the importer that made it) are released:
    reads give the producer's bytes and writes still reach it; and a handle may be released after
    the importer that made it. `request`: 'tensor-outlives-handle', 'tensor-outlives-importer'
    or 'handle-outlives-importer'."""
    rig = ImportRig.for_context(ctx)
    values = pattern(COUNT, 6)
    ctx.attempt(f"{request.replace('-', ' ')}", scripts.script(ctx, handle, f"a {request.replace('-', ' ')}", scripts.lifetime(request)))
    own = ImportRig(rig.api, rig.env, rig.device, create_importer(rig.api, rig.device, ctx.calling), ctx=ctx)
    released = False
    try:
        with imported(ctx, own, handle, values) as item:
            if request == "handle-outlives-importer":
                ctx.attempt("ReleaseExternalMemoryHandle after its importer was released")
                own.release_importer()
                released = True
                own.release_handle(item.handle)
                item.handle = None
                ctx.prove(proofs.RELEASED, "importer, then handle")
                return
            tensor = own.tensor(item.handle, (COUNT,))
            own.release_handle(item.handle)
            item.handle = None
            if request == "tensor-outlives-importer":
                own.release_importer()
                released = True
            outlived = request.split("-")[-1]
            ctx.attempt(f"using a tensor after its {outlived} was released")
            try:
                got = rig.read(tensor, TENSOR)
                ctx.tally(proofs.BYTES_COMPARED, 2 * TENSOR)  # this read, the producer's read of the write below
                if got != values.tobytes():
                    yield Violation(f"a tensor that outlived its {outlived} no longer reads the producer's bytes",
                                    expected=f"{values[:4]}...", actual=f"{np.frombuffer(got, np.float32)[:4]}...")
                written = pattern(COUNT, 11)
                rig.write(tensor, written.tobytes(), direct=rig.cpu_readable(tensor))
                if item.producer.read(item.allocation, TENSOR) != written.tobytes():
                    yield Violation(f"a write into a tensor that outlived its {outlived} did not reach the producer")
            finally:
                rig.release_tensor(tensor)
    finally:
        if not released:
            own.release_importer()


def _mapped(name: str) -> bool:
    with open("/proc/self/maps") as maps:
        return any(name in line for line in maps)


@check("import.unregister-while-imported")
@interop_outputs
def unregister_while_imported(ctx: CheckContext, handle: str = "opaque-fd") -> Iterator[Violation]:
    """The EP library is unregistered while a handle and a tensor made from it are alive: either
    onnxruntime refuses, or the library stays loaded until they are released, and releasing them
    is then safe. A copy of the library (in a memfd) is registered in the C environment alone, so
    that unregistering it can unload it: the Python copy of onnxruntime holds the library file
    itself, which would keep it loaded and hide what onnxruntime does. (Runs in a process of its
    own: the process is not reused after.)"""
    target = ctx.target
    if not target.library or not target.registration:
        raise NotApplicable("the EP is not a plugin library: nothing to unregister")
    if not os.path.exists("/proc/self/maps") or not hasattr(os, "memfd_create"):
        raise NotRun("seeing whether the library was unloaded needs Linux's /proc/self/maps and memfd_create")
    api, env, registered = c_device(ctx)
    # An EP device that imports nothing has nothing to keep alive: said before a copy of the
    # library is registered, which some libraries cannot be (ggml finds its backends beside its
    # own file, so a copy in a memfd lists no device).
    try:
        probe = create_importer(api, registered, ctx.calling)
    except NoImporter as exc:
        raise NotApplicable(str(exc)) from None
    with ctx.calling(Call("ReleaseExternalResourceImporter")):
        api.interop("ReleaseExternalResourceImporter", probe)
    before = set(env.devices(target.provider))
    name = f"{target.registration}-unregistered"
    fd = os.memfd_create(name)  # held until the process ends: the mapping reads it
    with open(target.library, "rb") as library, os.fdopen(os.dup(fd), "wb") as copy:
        copy.write(library.read())
    with ctx.precondition("registering a copy of the EP library"):
        env.register(name, f"/proc/self/fd/{fd}")
    devices = [device for device in env.devices(target.provider) if device not in before]
    if len(devices) <= ctx.device_index:
        raise NotRun(f"the library's copy lists {len(devices)} {target.provider} devices; the kit tests device {ctx.device_index}")
    try:
        importer = create_importer(api, devices[ctx.device_index], ctx.calling)
    except NoImporter as exc:
        raise NotApplicable(str(exc)) from None
    rig = ImportRig(api, env, devices[ctx.device_index], importer, ctx=ctx)
    values = pattern(COUNT, 12)
    producer = rig.source(handle)
    allocation = producer.allocate(ALLOCATION)
    producer.write(allocation, values.tobytes())
    handed = Handed(producer, allocation)
    handle_value = rig.import_handed(handed, ALLOCATION)
    tensor = rig.tensor(handle_value, (COUNT,))
    rig.release_importer()
    ctx.attempt("UnregisterExecutionProviderLibrary while an imported handle and a tensor of it are alive",
                scripts.script(ctx, handle, "UnregisterExecutionProviderLibrary keeps the library while its imports are alive, or refuses",
                               scripts.unregister(os.path.abspath(target.library)), register=False))
    try:
        with ctx.calling(Call("UnregisterExecutionProviderLibrary")):
            api.call("UnregisterExecutionProviderLibrary", env.env, name.encode())
    except OrtError as exc:
        ctx.prove(proofs.UNREGISTER, f"refused: {exc.message[:200]}")
        rig.release_tensor(tensor)
        rig.release_handle(handle_value)
        handed.close()
        producer.free(allocation)
        return
    if not _mapped(f"/memfd:{name}"):
        # the tensor's deleter and the handle's Release are the library's code, now unmapped:
        # they are left alone (the process ends after this check)
        yield Violation("UnregisterExecutionProviderLibrary unloaded the EP library while an imported handle and a tensor made from it "
                        "were alive: releasing them now calls the library's code, which is no longer mapped",
                        expected="an error status, or the library kept until its imported objects are released",
                        actual="the library's mapping is gone and the tensor and handle are still alive")
        return
    ctx.prove(proofs.UNREGISTER, "the library stayed loaded while its imports were alive")
    rig.release_tensor(tensor)
    rig.release_handle(handle_value)
    handed.close()
    seen = producer.read(allocation, TENSOR)
    producer.free(allocation)
    ctx.tally(proofs.BYTES_COMPARED, TENSOR)
    if seen != values.tobytes():
        yield Violation("the producer's memory changed when the EP library was unregistered and its imports released",
                        expected=f"{values[:4]}...", actual=f"{np.frombuffer(seen, np.float32)[:4]}...")


@check("import.unsupported-is-success")
def unsupported_is_success(ctx: CheckContext) -> Iterator[Violation]:
    """An EP device that imports nothing says so as onnxruntime's guide asks: success and no
    importer (CreateExternalResourceImporterForDevice), not an error status."""
    api, _, device = c_device(ctx)
    ctx.attempt("CreateExternalResourceImporterForDevice of the EP device",
                "# C API: status = CreateExternalResourceImporterForDevice(ep_device, &importer); expected OK, with or without an importer")
    try:
        importer = create_importer(api, device, ctx.calling)
    except NoImporter as exc:
        if exc.error:
            yield Violation(f"CreateExternalResourceImporterForDevice answered with an error status: {exc.error}",
                            expected="OK with a NULL importer (onnxruntime's interop guide: how an EP reports 'unsupported')",
                            actual=f"an error status: {exc.error[:200]}")
            return
        ctx.prove(proofs.IMPORTER, "none, with an OK status")
        return
    api.interop("ReleaseExternalResourceImporter", importer)
    raise NotApplicable("the EP device has an importer: it does not say 'unsupported'")
