"""The answer to "which copies work on an imported tensor": per EP device, whether it has an
importer, the handle types it imports, the memory imported tensors report, and which copies
work on them, found by trying on memory a Vulkan producer exported.

The copy probe (conformance.engine.capabilities) adds this as the matrix's `imports`:

    {"status": "importer" | "none" | "not_run", "reason": str,
     "refused_with": the error status's message, where "none" was said with one (else absent),
     "handle_types": [names CanImportMemory accepts],
     "tensor_memory": {"name", "device_type", "memory_type"} | None,
     "copies": [{"source", "destination", "status", "detail"}]}

A copy's ends are `imported` (a tensor from CreateTensorFromMemory) and `cpu`; its status is
`supported` (the bytes arrived, seen on the producer's side where the destination is imported),
`broken` (it returned but the bytes differ), or `refused` (CopyTensors failed); `cpu direct` is
a read through the tensor's data pointer, for memory the CPU may read.
"""

from __future__ import annotations

from typing import Any

from conformance.calls import Call
from conformance.findings import NotApplicable, NotRun, message_line
from conformance.testbed.interop.capi import HANDLE_TYPES, OrtError
from conformance.testbed.interop.handed import Handed
from conformance.testbed.interop.rig import HANDLE_KINDS, ImportRig, NoImporter, NullOutput, pattern

COUNT = 64
SIZE = 4 * 4096


def import_capabilities(ctx) -> dict[str, Any]:
    answer: dict[str, Any] = {"status": "not_run", "reason": "", "handle_types": [], "tensor_memory": None, "copies": []}
    try:
        rig = ImportRig.for_context(ctx)
    except NotApplicable as exc:
        # An EP that said so with an error status, not OK and no importer as onnxruntime's guide
        # asks, is told apart (`refused_with`: the status's message): it breaks import.unsupported-is-success.
        error = exc.error if isinstance(exc, NoImporter) else ""
        refused = {"refused_with": error} if error else {}
        return {**answer, "status": "none", "reason": str(exc), **refused}
    except NotRun as exc:
        return {**answer, "reason": str(exc)}
    answer["status"] = "importer"
    with ctx.calling(Call("CanImportMemory")):
        answer["handle_types"] = [name for name in HANDLE_TYPES if rig.can_import(name)]
    producer, skipped = None, []
    for kind in HANDLE_KINDS:  # the first kind the kit can produce here and the importer takes
        try:
            producer = rig.source(kind)
            break
        except (NotRun, NotApplicable) as exc:
            skipped.append(str(exc))
    if producer is None:
        answer["reason"] = f"copies not tried: {'; '.join(skipped)}"
        return answer
    allocation = producer.allocate(SIZE)
    values = pattern(COUNT, 13).tobytes()
    producer.write(allocation, values)
    handed = Handed(producer, allocation)
    handle = None
    try:
        handle = rig.import_handed(handed, SIZE)
        first, second = rig.tensor(handle, (COUNT,)), rig.tensor(handle, (COUNT,), 8192)
        answer["tensor_memory"] = rig.memory(first)
        answer["handle_type"] = producer.handle_type
        copies = answer["copies"]
        if rig.cpu_readable(first):
            import ctypes

            from conformance.testbed.interop.capi import data_address
            seen = ctypes.string_at(data_address(rig.api, first), len(values))
            copies.append(_entry("imported", "cpu direct", seen == values, "read through the data pointer"))
        with ctx.calling(Call("CopyTensors")):
            copies.append(_copy_out(rig, first, values))
            copies.append(_copy_in(rig, producer, allocation, first))
            copies.append(_copy_between(rig, producer, allocation, first, second))
        rig.release_tensor(first)
        rig.release_tensor(second)
    except (OrtError, NullOutput) as exc:
        answer["reason"] = f"the import failed: {exc}"
    finally:
        if handle is not None and handle.value:
            rig.release_handle(handle)
        handed.close()
        producer.free(allocation)
    return answer


def _entry(source: str, destination: str, ok: bool, detail: str) -> dict[str, str]:
    return {"source": source, "destination": destination, "status": "supported" if ok else "broken", "detail": detail}


def _refused(source: str, destination: str, exc: Exception) -> dict[str, str]:
    return {"source": source, "destination": destination, "status": "refused", "detail": message_line(exc)}


def _copy_out(rig: ImportRig, tensor, values: bytes) -> dict[str, str]:
    try:
        landing = _landing(rig, tensor, len(values))
    except OrtError as exc:
        return _refused("imported", "cpu", exc)
    return _entry("imported", "cpu", landing == values, "CopyTensors; the producer's bytes" if landing == values else "CopyTensors gave other bytes")


def _landing(rig: ImportRig, tensor, size: int) -> bytes:
    import ctypes

    from conformance.testbed.interop import capi
    buffer = (ctypes.c_uint8 * size)(*([0xA5] * size))
    destination = capi.cpu_tensor(rig.api, buffer, (size // 4,), capi.ELEMENT_TYPES["float32"])
    try:
        capi.copy_tensors(rig.api, rig.env, [tensor], [destination])
    finally:
        rig.api.call("ReleaseValue", destination)
    return bytes(buffer)


def _copy_in(rig: ImportRig, producer, allocation, tensor) -> dict[str, str]:
    written = pattern(COUNT, 14).tobytes()
    try:
        rig.write(tensor, written, direct=False)
    except OrtError as exc:
        return _refused("cpu", "imported", exc)
    ok = producer.read(allocation, len(written)) == written
    return _entry("cpu", "imported", ok, "CopyTensors; read back through Vulkan" if ok else "the producer did not see the bytes")


def _copy_between(rig: ImportRig, producer, allocation, first, second) -> dict[str, str]:
    from conformance.testbed.interop import capi
    try:
        capi.copy_tensors(rig.api, rig.env, [first], [second])
    except OrtError as exc:
        return _refused("imported", "imported", exc)
    ok = producer.read(allocation, COUNT * 4, 8192) == producer.read(allocation, COUNT * 4)
    return _entry("imported", "imported", ok, "CopyTensors between two tensors of one handle; read back through Vulkan")
