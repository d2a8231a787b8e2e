"""OrtValue.update_inplace: both overloads copy into the destination's existing buffer."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from conformance.testbed import tensors
from conformance.calls import Call
from conformance.checks.registry import check
from conformance.checks.context import CheckContext, bad_updates
from conformance.checks.context import steps
from conformance.checks.context.snippets import Snippets
from conformance.testbed.eps import memory_label
from conformance.findings import NotApplicable, NotRun, Violation, message_line
from conformance.testbed.guard import GuardedArray
from conformance import proofs

DESTINATION_SENTINEL = 0x5A


def _numpy_dtype(dtype: str) -> tensors.DType:
    dt = tensors.DTYPES[dtype]
    if not dt.numpy_native or dt.name == "string":
        raise NotApplicable(f"update_inplace(numpy) cannot express {dt.name}: numpy has no such element type" if dt.name != "string"
                            else "onnxruntime's Python API creates no OrtValue from a string array")
    return dt


def _source_layout(ctx: CheckContext, values: np.ndarray, layout: str) -> np.ndarray:
    """The same values, laid out as asked, in a guarded host buffer (conformance.testbed.guard) but
    for a contiguous one (`values` itself): read-only, every other element of a larger array (canaries in the gaps, so a
    copy that ignores the strides reads canaries), or the transpose of a C-ordered array
    (Fortran order)."""
    if layout == "contiguous":
        # Only read, and sized as the destination: an over-read past its end lands nowhere the
        # destination's own guard would not show, so a 64 MiB source costs no guarded copy.
        return values
    if layout == "read-only":
        guarded = GuardedArray.holding(values, writeable=False)
        source = guarded.array
    elif layout == "strided":
        if values.ndim == 0:
            raise NotApplicable("a scalar cannot be laid out with strides")
        guarded = GuardedArray.holding(values, step=2)
        source = guarded.array
    else:
        if values.ndim < 2:
            raise NotApplicable("a transposed layout needs at least two dimensions")
        guarded = GuardedArray.holding(np.ascontiguousarray(values.T))
        source = guarded.array.T
    if values.size:
        ctx.watch(guarded, f"{layout} numpy source of update_inplace")
    return source


def _diff_violation(ctx: CheckContext, what: str, expected: tensors.Bytes | list[str], got: tensors.Bytes | list[str], memory: str,
                    snippet: str) -> Iterator[Violation]:
    diff = ctx.compare(expected, got)
    if diff:
        yield Violation(f"{what}: values differ after update_inplace: {diff.describe()}",
                        expected=f"{len(expected)} bytes of the source", actual=diff.describe(),
                        memory={"destination": ctx.memory_facts(memory)}, reproducer=snippet)


def _address_violation(ctx: CheckContext, before: int, after: int, memory: str, snippet: str) -> Iterator[Violation]:
    ctx.prove(proofs.ADDRESS_KEPT, before == after)
    ctx.prove_item(proofs.MEMORY, "destination", memory_label(ctx.memory_facts(memory)))
    if before != after:
        yield Violation("update_inplace moved the destination buffer", expected=f"data_ptr() 0x{before:x}", actual=f"data_ptr() 0x{after:x}",
                        memory={"destination": ctx.memory_facts(memory)}, reproducer=snippet)


def _from_numpy(ctx: CheckContext, dtype: str, shape: str, memory: str, layout: str) -> Iterator[Violation]:
    ctx.require_memory(memory)
    dt = _numpy_dtype(dtype)
    shp = tensors.parse_shape(shape, dt)
    values = tensors.sample(dt, shp, seed=1)
    source = _source_layout(ctx, values, layout)
    snippet = _from_numpy_script(ctx.snippets, dt, shp, memory, layout)
    ctx.attempt(f"placing the destination of update_inplace in {memory} memory", snippet)
    destination = ctx.place(tensors.sentinel(dt, shp, DESTINATION_SENTINEL), memory, dt)
    before = destination.data_ptr()
    ctx.attempt(f"update_inplace of a {layout} numpy array into {memory} memory", snippet)
    with ctx.calling(Call("update_inplace", f"numpy>{memory}")):
        destination.update_inplace(source)
    yield from _address_violation(ctx, before, destination.data_ptr(), memory, snippet)
    yield from _diff_violation(ctx, f"{layout} numpy source", tensors.payload(values, dt), ctx.read(destination, memory, dt, shp), memory, snippet)


@check("update-inplace.from-numpy")
def from_numpy(ctx: CheckContext, dtype: str, shape: str, memory: str = "default") -> Iterator[Violation]:
    yield from _from_numpy(ctx, dtype, shape, memory, "contiguous")


@check("update-inplace.from-numpy-layout")
def from_numpy_layout(ctx: CheckContext, dtype: str, shape: str, memory: str, layout: str) -> Iterator[Violation]:
    """update_inplace(numpy) into one memory, of an array laid out as asked (read-only
    included), where the contiguous case is not the question."""
    yield from _from_numpy(ctx, dtype, shape, memory, layout)


@check("update-inplace.non-contiguous")
def non_contiguous(ctx: CheckContext, dtype: str, shape: str, layout: str, memory: str = "default") -> Iterator[Violation]:
    # Strides are onnxruntime's business; the copy itself is the EP's. Only where a contiguous
    # array arrives intact can a wrong non-contiguous result be blamed on the strides.
    with ctx.precondition("update_inplace of the same values, contiguous"):
        contiguous = list(_from_numpy(ctx, dtype, shape, memory, "contiguous"))
    if contiguous:
        raise NotRun(f"update_inplace of the same values, contiguous, already fails: {contiguous[0].message}")
    yield from _from_numpy(ctx, dtype, shape, memory, layout)


CPU_DEFAULT_DIRECTION = "default>default"  # the one direction checked where DEFAULT memory is CPU memory


@check("update-inplace.from-ortvalue", apis=("update_inplace_ortvalue",))
def from_ortvalue(ctx: CheckContext, direction: str, dtype: str, shape: str) -> Iterator[Violation]:
    source_kind, destination_kind = direction.split(">")
    for kind in (source_kind, destination_kind):
        ctx.require_memory(kind)
    if ctx.is_cpu_memory("default") and direction != CPU_DEFAULT_DIRECTION:
        # Every direction between CPU and DEFAULT memory is then the same CPU-to-CPU copy:
        # counted once, as default>default, not once per direction.
        raise NotApplicable(f"DEFAULT memory is CPU memory on this EP device ({ctx.describe_memory('default')}): {direction} "
                            f"is the same CPU-to-CPU copy as {CPU_DEFAULT_DIRECTION}, which that case checks")
    ctx.require_api("update_inplace_ortvalue", "has no update_inplace(OrtValue), added by PR #28256")
    dt = tensors.DTYPES[dtype]
    shp = tensors.parse_shape(shape, dt)
    values = tensors.sample(dt, shp, seed=2)
    snippet = _from_ortvalue_script(ctx.snippets, source_kind, destination_kind, dt, shp)
    ctx.attempt(f"placing the source and destination of update_inplace(OrtValue) {direction}", snippet)
    source = ctx.place(values, source_kind, dt)
    destination = ctx.place(tensors.sentinel(dt, shp, DESTINATION_SENTINEL), destination_kind, dt)
    before = destination.data_ptr()
    ctx.attempt(f"update_inplace(OrtValue) {direction}", snippet)
    with ctx.calling(Call("update_inplace ortvalue", direction)):
        destination.update_inplace(source)
    yield from _address_violation(ctx, before, destination.data_ptr(), destination_kind, snippet)
    yield from _diff_violation(ctx, direction, tensors.payload(values, dt), ctx.read(destination, destination_kind, dt, shp), destination_kind, snippet)


@check("update-inplace.rejects-mismatch")
def rejects_mismatch(ctx: CheckContext, source: str, request: str, memory: str = "default") -> Iterator[Violation]:
    bad_updates.require_source(ctx, source, memory)
    float32 = tensors.DTYPES["float32"]
    src_dtype_name, src_shape = bad_updates.MISMATCHES[request]
    src_dtype = tensors.DTYPES[src_dtype_name]
    values = tensors.sample(src_dtype, src_shape, seed=3)
    snippet = _mismatch_script(ctx.snippets, source, memory, src_dtype, src_shape, request)
    ctx.attempt(f"placing valid values in {memory} memory", snippet)
    with ctx.precondition(f"placing valid values in {memory} memory"):
        payload = ctx.place(values, memory, src_dtype) if source == "ortvalue" else values
        destination = ctx.place(tensors.sentinel(float32, (2, 3), DESTINATION_SENTINEL), memory, float32)
    before = destination.data_ptr()
    ctx.attempt(f"update_inplace({source}) with a mismatched source ({request})", snippet)
    try:
        with ctx.calling(Call("update_inplace", f"{source}>{memory}", f"bad request {request}")):
            destination.update_inplace(payload)
    except Exception as exc:
        refused = True
        ctx.prove(proofs.REFUSED, message_line(exc)[:200])
    else:
        refused = False
        yield Violation(f"update_inplace({source}) accepted a {src_dtype.name} source of shape {list(src_shape)} for a float32 [2, 3] destination",
                        expected="a clear error, destination untouched", actual="accepted",
                        memory={"destination": ctx.memory_facts(memory)}, reproducer=snippet)
    with ctx.precondition("reading the destination back"):
        got = ctx.read(destination, memory, float32, (2, 3))
    if refused and ctx.compare(tensors.payload(tensors.sentinel(float32, (2, 3), DESTINATION_SENTINEL), float32), got):
        yield Violation("the refused update_inplace still wrote into the destination", expected="destination unchanged",
                        actual="destination bytes changed", reproducer=snippet)
    yield from _address_violation(ctx, before, destination.data_ptr(), memory, snippet)
    if refused:
        yield from _usable_after_refusal(ctx, destination, source, memory, request, snippet)


def _usable_after_refusal(ctx: CheckContext, destination, source: str, memory: str, request: str, snippet: str) -> Iterator[Violation]:
    """The state after a refusal: the destination refused takes the next valid update_inplace
    (a float32 [2, 3] source of the same kind), whole and at the same address."""
    float32 = tensors.DTYPES["float32"]
    values = tensors.sample(float32, (2, 3), seed=10)
    with ctx.precondition(f"placing a valid float32 [2, 3] source in {memory} memory"):
        payload = ctx.place(values, memory, float32) if source == "ortvalue" else values
    before = destination.data_ptr()
    ctx.attempt(f"a valid update_inplace({source}) after the refused one ({request})", snippet)
    try:
        with ctx.calling(Call("update_inplace", f"{source}>{memory}", f"after bad request {request}")):
            destination.update_inplace(payload)
    except Exception as exc:
        yield Violation(f"after the refused update_inplace({source}) ({request}), a valid one into the same destination failed: "
                        f"{message_line(exc)}", expected="the update", actual=message_line(exc),
                        memory={"destination": ctx.memory_facts(memory)}, reproducer=snippet)
        return
    ctx.prove(proofs.USABLE_AFTER_REFUSAL, True)
    yield from _address_violation(ctx, before, destination.data_ptr(), memory, snippet)
    yield from _diff_violation(ctx, f"a valid update_inplace({source}) after the refused one ({request})", tensors.payload(values, float32),
                               ctx.read(destination, memory, float32, (2, 3)), memory, snippet)


# A device-to-device update_inplace may be this much slower than the round trip through CPU
# memory before it counts as slower: timing noise between two best-of-N figures stays well
# inside it, while a copy that stages through the host costs about the round trip or more.
STAGING_MARGIN = 1.25
STAGING_SLACK_SECONDS = 50e-6  # timer and call overhead, which dominate tiny copies
STAGING_TRIALS = 7


@check("update-inplace.no-host-staging", apis=("update_inplace_ortvalue", "copy_tensors",))
def no_host_staging(ctx: CheckContext, dtype: str, shape: str) -> Iterator[Violation]:
    from conformance.testbed.bandwidth import best_seconds, gbps

    ctx.require_api("update_inplace_ortvalue", "has no update_inplace(OrtValue), added by PR #28256")
    dt = tensors.DTYPES[dtype]
    shp = tensors.parse_shape(shape, dt)
    values = tensors.sample(dt, shp, seed=4)
    snippet = _staging_script(ctx.snippets, dt, shp, STAGING_MARGIN, STAGING_SLACK_SECONDS, STAGING_TRIALS)
    ctx.attempt("placing values in DEFAULT memory for the timing", snippet)
    with ctx.precondition("placing values in DEFAULT memory, copying them to the CPU and device to device once"):
        source = ctx.place(values, "default", dt)
        destination = ctx.allocate("default", dt, shp)
        staging = ctx.allocate("cpu", dt, shp)
        ctx.copy([source], [staging])
        with ctx.calling(Call("update_inplace ortvalue", "default>default")):
            destination.update_inplace(source)
        marker, marker_on_cpu = ctx.allocate("default", dt, (1,)), ctx.allocate("cpu", dt, (1,))
    # The copy delivered the values: a fast copy that moves nothing proves nothing.
    yield from _diff_violation(ctx, "default>default", tensors.payload(values, dt), ctx.read(destination, "default", dt, shp), "default", snippet)

    def device_to_device():
        destination.update_inplace(source)

    def round_trip():
        # The staging baseline is made with copy_tensors, the EP's own transfers: what a copy
        # through the host costs, whoever makes it. update_inplace between CPU and device
        # memory is no better a baseline, and onnxruntime's Python layer refuses it for some
        # EPs (WebGPU: "WebGPU OrtValue copies require WebGPU source and destination values").
        ctx.copy([source], [staging])
        ctx.copy([staging], [destination])

    def wait_for_the_device():
        # An EP may only queue a device copy (WebGPU does); reading one element back waits for
        # the copies queued before it, so both timings measure copies done, not queued.
        ctx.copy([marker], [marker_on_cpu])

    ctx.attempt("timing update_inplace device to device against a copy_tensors round trip through the CPU", snippet)
    # One name for the calls of each timing, around the timed loops (the copies within are
    # part of it, and pass nothing on to the parent: see CheckContext.calling).
    with ctx.calling(Call("update_inplace ortvalue", "default>default", "timed")):
        direct = best_seconds(device_to_device, trials=STAGING_TRIALS, budget=2.0, finish=wait_for_the_device)
    with ctx.calling(Call("update_inplace ortvalue", "default>cpu>default", "timed")):
        staged = best_seconds(round_trip, trials=STAGING_TRIALS, budget=2.0, finish=wait_for_the_device)
    nbytes = dt.nbytes(tensors.element_count(shp))
    ctx.prove(proofs.TIMED, {"bytes": nbytes, "device_to_device_s": round(direct, 7), "round_trip_s": round(staged, 7)})
    if direct > staged * STAGING_MARGIN + STAGING_SLACK_SECONDS:
        yield Violation(
            f"update_inplace(OrtValue) device to device took {direct * 1e3:.3g} ms for {nbytes} bytes ({gbps(nbytes, direct):.3g} GB/s), "
            f"slower than a device→CPU→device round trip of the same size ({staged * 1e3:.3g} ms, {gbps(nbytes, staged):.3g} GB/s)",
            expected=f"at most {STAGING_MARGIN:g} × the round trip (best of {STAGING_TRIALS} each)",
            actual=f"{direct / staged:.3g} × the round trip",
            memory={"default": ctx.memory_facts("default")}, reproducer=snippet)


# --- the reproducers: standalone scripts of each check's step ------------------------------


def _from_numpy_script(sn: Snippets, dt: tensors.DType, shape: tuple[int, ...], kind: str, layout: str) -> str:
    """update_inplace of a numpy array, laid out as `layout`, keeps the destination's address and
    copies the array's logical values."""
    lay = {"contiguous": "source = values",
           "strided": "wide = np.zeros(values.shape[:-1] + (values.shape[-1] * 2,), values.dtype)\nwide[..., ::2] = values\nsource = wide[..., ::2]",
           "transposed": "source = np.ascontiguousarray(values.T).T",
           "read-only": "source = values.copy()\nsource.flags.writeable = False"}[layout]
    if layout in ("strided", "transposed"):
        lay += "\nassert not source.flags.c_contiguous, 'the source is not laid out non-contiguous'"
    what = f"update_inplace of a {layout} numpy {dt.name} {list(shape)} array into {kind} memory"
    body = [sn.values("values", dt, shape, 1), lay, sn.sentinel("landing", dt, shape, steps.SENTINEL), sn.place("destination", "landing", kind, dt),
            "before = destination.data_ptr()", f"works({what!r}, destination.update_inplace, source)", _same_address(),
            f"same_bytes({what!r}, values, {sn.read('destination', 'landing', kind, dt)})"]
    return sn.script(f"{what} on {sn.under_test.target.provider}", "\n".join(body))


def _from_ortvalue_script(sn: Snippets, source_kind: str, destination_kind: str, dt: tensors.DType, shape: tuple[int, ...]) -> str:
    what = f"update_inplace(OrtValue) {source_kind}>{destination_kind} of {dt.name} {list(shape)}"
    body = [sn.values("values", dt, shape, 2), sn.place("source", "values", source_kind, dt),
            sn.sentinel("landing", dt, shape, steps.SENTINEL), sn.place("destination", "landing", destination_kind, dt),
            "before = destination.data_ptr()", f"works({what!r}, destination.update_inplace, source)", _same_address(),
            f"same_bytes({what!r}, values, {sn.read('destination', 'landing', destination_kind, dt)}{sn.nbytes(dt, shape)})"]
    return sn.script(f"{what} on {sn.under_test.target.provider}", "\n".join(body))


def _mismatch_script(sn: Snippets, source: str, kind: str, src_dt: tensors.DType, src_shape: tuple[int, ...], request: str) -> str:
    """update_inplace refuses a source of another element type or size, and leaves the
    float32 [2, 3] destination as it was (its sentinel) at the same address."""
    float32 = tensors.DTYPES["float32"]
    body = [sn.values("values", src_dt, src_shape, 3)]
    body.append(sn.place("payload", "values", kind, src_dt) if source == "ortvalue" else "payload = values")
    body += [sn.sentinel("landing", float32, (2, 3), steps.SENTINEL), sn.place("destination", "landing", kind, float32),
             sn.sentinel("unchanged", float32, (2, 3), steps.SENTINEL), "before = destination.data_ptr()",
             f"refused('update_inplace({source}) of a {src_dt.name} {list(src_shape)} source into a float32 [2, 3] destination ({request})', "
             "destination.update_inplace, payload)",
             _same_address(), f"same_bytes('the destination after the refused update_inplace', unchanged, {sn.read('destination', 'landing', kind, float32)})",
             # the state after the refusal: the destination takes a valid update whole
             sn.values("again", float32, (2, 3), 10), sn.place("again_source", "again", kind, float32) if source == "ortvalue" else "again_source = again",
             "works('a valid update_inplace after the refused one', destination.update_inplace, again_source)", _same_address(),
             f"same_bytes('the destination after a valid update_inplace that followed the refusal', again, {sn.read('destination', 'landing', kind, float32)})"]
    return sn.script(f"update_inplace({source}) refuses a mismatched source ({request}) in {kind} memory", "\n".join(body))


def _staging_script(sn: Snippets, dt: tensors.DType, shape: tuple[int, ...], margin: float, slack: float, trials: int) -> str:
    """update_inplace(OrtValue) device to device is no slower than a copy_tensors round trip
    through the CPU (best of `trials` each, within `margin` and `slack` seconds)."""
    body = [sn.values("values", dt, shape, 4), sn.place("source", "values", "default", dt),
            sn.sentinel("landing", dt, shape, steps.SENTINEL), sn.place("destination", "landing", "default", dt),
            sn.sentinel("staged_landing", dt, shape, steps.SENTINEL), sn.place("staging", "staged_landing", "cpu", dt),
            sn.sentinel("mark", dt, (1,), steps.SENTINEL), sn.place("marker", "mark", "default", dt), sn.place("marker_on_cpu", "mark.copy()", "cpu", dt),
            "works('update_inplace(OrtValue) default>default', destination.update_inplace, source)",
            f"same_bytes('update_inplace(OrtValue) default>default', values, {sn.read('destination', 'landing', 'default', dt)})",
            "import time", "",
            "def best(step):",
            f"    times = []\n    for _ in range({trials}):\n        start = time.perf_counter()\n        step()",
            "        ort.copy_tensors([marker], [marker_on_cpu], None)  # waits for copies the EP only queued",
            "        times.append(time.perf_counter() - start)\n    return min(times)", "", "",
            "direct = best(lambda: destination.update_inplace(source))",
            "staged = best(lambda: (ort.copy_tensors([source], [staging], None), ort.copy_tensors([staging], [destination], None)))",
            f"assert direct <= staged * {margin} + {slack}, f'update_inplace device to device: expected at most {margin} x the round trip through the CPU "
            "({staged * 1e3:.3f} ms), got {direct * 1e3:.3f} ms'",
            "print(f'device to device {direct * 1e3:.3f} ms, through the CPU {staged * 1e3:.3f} ms')"]
    return sn.script(f"update_inplace(OrtValue) device to device does not stage through the host ({dt.name} {list(shape)})", "\n".join(body))


def _same_address() -> str:
    """The assertion that `destination` kept its address (`before`)."""
    return "assert destination.data_ptr() == before, f'the destination: expected data_ptr() 0x{before:x}, got 0x{destination.data_ptr():x}'"
