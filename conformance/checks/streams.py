"""Sync streams of an EP device."""

from __future__ import annotations

from typing import Iterator

from conformance.testbed import tensors
from conformance.calls import Call
from conformance.checks.registry import check
from conformance.checks.context.snippets import Snippets
from conformance.findings import NotApplicable, NotRun, Violation, message_line
from conformance.checks.context import CheckContext
from conformance import proofs


@check("streams.sync-stream", apis=("sync_stream", "copy_tensors",))
def sync_stream(ctx: CheckContext) -> Iterator[Violation]:
    if ctx.device is None:
        raise NotRun("the EP is not listed by get_ep_devices(); streams belong to EP devices")
    snippet = ctx.snippets.script("create_sync_stream() of the EP device", "stream = dev.create_sync_stream()")
    ctx.attempt("creating the EP device's sync stream", snippet)
    try:
        with ctx.calling(Call("create_sync_stream")):
            stream = ctx.device.create_sync_stream()
    except Exception as exc:
        if not ctx.is_cpu_memory("default"):
            # A device EP that is not stream-aware may refuse: then there is no stream whose
            # copies could be shown to deliver the bytes.
            raise NotApplicable(f"{ctx.target.provider} is not stream-aware: create_sync_stream() refused ({message_line(exc)[:200]})") from None
        if not str(exc).strip():
            yield Violation("create_sync_stream() failed without saying why", expected="an error message", actual=repr(exc), reproducer=snippet)
        ctx.prove(proofs.REFUSED, message_line(exc)[:200])
        ctx.prove(proofs.STREAM_CREATED, False)
        return
    ctx.prove(proofs.STREAM_CREATED, True)
    if ctx.is_cpu_memory("default"):
        refusal = ctx.snippets.script("create_sync_stream() is refused for an EP device whose DEFAULT memory is CPU memory",
                                      "memory = dev.memory_info(ort.OrtDeviceMemoryType.DEFAULT)\n"
                                      "if memory is None or ort.OrtValue.ortvalue_from_shape_and_type([1], np.uint8, memory_info=memory)"
                                      ".device_name().lower() == 'cpu':\n"
                                      "    refused('create_sync_stream() of an EP device whose DEFAULT memory is CPU memory', dev.create_sync_stream)\n"
                                      "else:\n    print('the DEFAULT memory is device memory: a sync stream is allowed')")
        yield Violation("create_sync_stream() succeeded for an EP device whose DEFAULT memory is CPU memory",
                        expected="a clear error", actual=f"a stream: {stream!r}", reproducer=refusal)
        return
    dt, shape = tensors.DTYPES["float32"], (64, 33)
    snippet = _stream_copies_script(ctx.snippets, dt, shape)
    ctx.attempt("copies on the EP device's sync stream", snippet)
    values = tensors.sample(dt, shape, seed=12)
    destination = ctx.allocate("default", dt, shape)
    ctx.copy([ctx.wrap_cpu(values, dt)], [destination], "cpu>default", stream)
    landing = tensors.sentinel(dt, shape, 0xA5)
    ctx.copy([destination], [ctx.wrap_cpu(landing, dt)], "default>cpu", stream)
    # A copy given a stream may still be queued when copy_tensors returns: the landing is read
    # only after a wait. onnxruntime's Python has no call that waits for a stream (OrtSyncStream
    # has get_handle() alone); releasing it is the wait there is, and the EP's release drains it.
    # What the landing held before the wait says whether the copies were really queued.
    before_wait = tensors.payload(landing, dt).copy()
    ctx.attempt("releasing the sync stream: the wait for its copies", snippet)
    with ctx.calling(Call("release sync stream")):
        del stream
    ctx.prove(proofs.COPIES_ON_STREAM, 2)
    ctx.prove(proofs.QUEUED_AT_RETURN, tensors.compare(tensors.payload(values, dt), before_wait) is not None)
    diff = ctx.compare(tensors.payload(values, dt), tensors.payload(landing, dt))
    if diff:
        yield Violation(f"copies on the EP's sync stream did not deliver the bytes once the stream was released: {diff.describe()}",
                        expected="the source bytes in the host buffer after the stream's release", actual=diff.describe(), reproducer=snippet)


# --- the reproducer ---------------------------------------------------------------------------


def _stream_copies_script(sn: Snippets, dt: tensors.DType, shape: tuple[int, ...]) -> str:
    """Copies CPU > DEFAULT > CPU given the EP device's sync stream deliver the bytes, read once the stream is released."""
    body = ["stream = works('create_sync_stream', dev.create_sync_stream)", sn.values("values", dt, shape, 12),
            "source = cpu_value(values)",
            f"destination = works('allocating', ort.OrtValue.ortvalue_from_shape_and_type, {list(shape)}, {dt.onnx_type}, memory_info=DEFAULT)",
            "works('copy_tensors cpu>default on the stream', ort.copy_tensors, [source], [destination], stream)",
            sn.sentinel("landing", dt, shape, 0xA5),
            "works('copy_tensors default>cpu on the stream', ort.copy_tensors, [destination], [cpu_value(landing)], stream)",
            "del stream  # releasing the stream is the one wait onnxruntime's Python has for it: the copies may be queued until then",
            "same_bytes('copies on the sync stream, read once the stream was released', values, landing)"]
    return sn.script("copies on the EP device's sync stream deliver the bytes", "\n".join(body))
