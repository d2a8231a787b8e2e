"""copy_tensors between the CPU and the EP's memories."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from conformance.testbed import tensors
from conformance.checks.registry import check
from conformance.checks.context import CheckContext, bad_copies
from conformance.checks.context.snippets import Snippets
from conformance.checks.context import steps
from conformance.testbed.eps import memory_label
from conformance.findings import NotApplicable, Violation, message_line
from conformance import proofs


def _copy(ctx: CheckContext, direction: str, dtype: str, shape: str, *, may_refuse: bool = False) -> Iterator[Violation]:
    source_kind, destination_kind = direction.split(">")
    for kind in (source_kind, destination_kind):
        ctx.require_memory(kind)
    dt = tensors.DTYPES[dtype]
    shp = tensors.parse_shape(shape, dt)
    values = tensors.sample(dt, shp, seed=4)
    memory = {"source": ctx.memory_facts(source_kind), "destination": ctx.memory_facts(destination_kind)}
    snippet = _copy_script(ctx.snippets, source_kind, destination_kind, dt, shp, may_refuse=may_refuse)
    ctx.attempt(f"placing the values for copy_tensors {direction}", snippet)  # a crash while placing has the script too
    source = ctx.place(values, source_kind, dt)
    destination = ctx.place(tensors.sentinel(dt, shp, bad_copies.DESTINATION_SENTINEL), destination_kind, dt)
    ctx.attempt(f"copy_tensors {direction}", snippet)
    try:
        ctx.copy([source], [destination], direction)
    except Exception as exc:
        if may_refuse:
            # An allowed refusal: no bytes moved, so nothing about delivering them was shown.
            raise NotApplicable(f"copy_tensors {direction} is refused, which this contract allows: {type(exc).__name__}: {exc}") from None
        yield Violation(f"copy_tensors {direction} failed: {exc}", expected="the copy", actual=f"{type(exc).__name__}: {exc}", memory=memory,
                        reproducer=snippet)
        return
    ctx.prove(proofs.MEMORY, {end: memory_label(facts) for end, facts in memory.items()})
    diff = ctx.compare(tensors.payload(values, dt), ctx.read(destination, destination_kind, dt, shp))
    if diff:
        yield Violation(f"copy_tensors {direction} did not deliver the source bytes: {diff.describe()}",
                        expected="byte-identical destination", actual=diff.describe(), memory=memory, reproducer=snippet)


@check("copy.direction", apis=("copy_tensors",))
def direction(ctx: CheckContext, direction: str, dtype: str = "float32", shape: str = "3x5") -> Iterator[Violation]:
    yield from _copy(ctx, direction, dtype, shape)


@check("copy.optional-direction", apis=("copy_tensors",))
def optional_direction(ctx: CheckContext, direction: str, dtype: str = "float32", shape: str = "3x5") -> Iterator[Violation]:
    """A copy the EP need not offer: a refusal passes (the copy matrix records it as
    not_required); a copy that is done must deliver the bytes."""
    yield from _copy(ctx, direction, dtype, shape, may_refuse=True)


@check("copy.source-unchanged", apis=("copy_tensors",))
def source_unchanged(ctx: CheckContext, direction: str, dtype: str, shape: str) -> Iterator[Violation]:
    """The source read back after the copy as it was read before it, through the same path both
    times: a read that is itself wrong (the EP's copy out of its memory) cannot pass for the copy
    writing its source, nor hide it."""
    source_kind, destination_kind = direction.split(">")
    for kind in (source_kind, destination_kind):
        ctx.require_memory(kind)
    dt = tensors.DTYPES[dtype]
    shp = tensors.parse_shape(shape, dt)
    snippet = _source_unchanged_script(ctx.snippets, source_kind, destination_kind, dt, shp)
    ctx.attempt(f"placing the source in {source_kind} memory and reading it", snippet)
    with ctx.precondition(f"placing the source in {source_kind} memory and reading it back"):
        source = ctx.place(tensors.sample(dt, shp, seed=5), source_kind, dt)
        before = ctx.read(source, source_kind, dt, shp)
        before = before.copy() if isinstance(before, np.ndarray) else before  # a CPU value's read is a view of it
        destination = ctx.place(tensors.sentinel(dt, shp, bad_copies.DESTINATION_SENTINEL), destination_kind, dt)
    ctx.attempt(f"copy_tensors {direction}", snippet)
    try:
        ctx.copy([source], [destination], direction)
    except Exception as exc:
        # Nothing was copied, so nothing is shown of the source; whether the EP must offer this
        # direction is the copy.*-directions contracts' to say.
        raise NotApplicable(f"copy_tensors {direction} is refused here ({message_line(exc)}): no copy to judge") from None
    with ctx.precondition(f"reading the source back from {source_kind} memory"):
        after = ctx.read(source, source_kind, dt, shp)
    memory = {"source": ctx.memory_facts(source_kind), "destination": ctx.memory_facts(destination_kind)}
    ctx.prove(proofs.MEMORY, {end: memory_label(facts) for end, facts in memory.items()})
    diff = ctx.compare(before, after)
    if diff:
        yield Violation(f"copy_tensors {direction} changed its source ({source_kind} memory): {diff.describe()}",
                        expected="the source's bytes unchanged (CopyTensors takes its sources as const)", actual=diff.describe(),
                        memory=memory, reproducer=snippet)


def _source_unchanged_script(sn: Snippets, source_kind: str, destination_kind: str, dt: tensors.DType, shape: tuple[int, ...]) -> str:
    """copy.source-unchanged's reproducer: the source read before and after copy_tensors, compared."""
    what = f"copy_tensors {source_kind}>{destination_kind} of {dt.name} {list(shape)}"
    body = [sn.values("values", dt, shape, 5), sn.place("source", "values", source_kind, dt),
            f"before = np.array({sn.read('source', 'values', source_kind, dt)}, copy=True)",
            sn.sentinel("landing", dt, shape, bad_copies.DESTINATION_SENTINEL), sn.place("destination", "landing", destination_kind, dt),
            f"works({what!r}, ort.copy_tensors, [source], [destination], None)",
            f"same_bytes('the source after {what}', before, {sn.read('source', 'values', source_kind, dt)}{sn.nbytes(dt, shape)})"]
    return sn.script(f"{what} leaves its source unchanged on {sn.under_test.target.provider}", "\n".join(body))


@check("copy.roundtrip", apis=("copy_tensors",))
def roundtrip(ctx: CheckContext, dtype: str, shape: str) -> Iterator[Violation]:
    """CPU → DEFAULT → CPU: `place` copies in, `read` copies out into a sentinel-filled buffer."""
    dt = tensors.DTYPES[dtype]
    if dt.name == "string":
        raise NotApplicable("onnxruntime's Python API creates no OrtValue from a string array")
    shp = tensors.parse_shape(shape, dt)
    values = tensors.sample(dt, shp, seed=5)
    snippet = _copy_script(ctx.snippets, "cpu", "default", dt, shp)  # read back through copy_tensors: the round trip
    ctx.attempt("copy_tensors CPU → DEFAULT → CPU", snippet)
    device_value = ctx.place(values, "default", dt)
    ctx.prove(proofs.MEMORY, {"default": memory_label(ctx.memory_facts("default"))})
    diff = ctx.compare(tensors.payload(values, dt), ctx.read(device_value, "default", dt, shp))
    if diff:
        yield Violation(f"CPU → DEFAULT → CPU changed the bytes: {diff.describe()}", expected="byte-identical round trip",
                        actual=diff.describe(), memory={"default": ctx.memory_facts("default")},
                        reproducer=snippet)


@check("copy.host-accessible-alias")
def host_accessible_alias(ctx: CheckContext, dtype: str = "float32") -> Iterator[Violation]:
    """Writes through one numpy() view of a HOST_ACCESSIBLE value and reads through a second
    one taken afterwards: if numpy() copied instead of aliasing, the write would not show."""
    ctx.require_memory("host_accessible")
    dt = tensors.DTYPES[dtype]
    shp = (4, 7)
    value = ctx.allocate("host_accessible", dt, shp)
    first_view = value.numpy()
    snippet = ctx.snippets.script("numpy() of a HOST_ACCESSIBLE value aliases its memory",
                                  f"v = ort.OrtValue.ortvalue_from_shape_and_type([4, 7], np.{dt.storage.name}, memory_info=HOST_ACCESSIBLE)\n"
                                  "a = v.numpy()\n"
                                  "assert a.ctypes.data == v.data_ptr(), f'numpy(): expected a view at 0x{v.data_ptr():x}, got 0x{a.ctypes.data:x}'\n"
                                  "a[...] = 1\nsame_bytes('a write through numpy()', a, v.numpy())")
    memory = {"host_accessible": ctx.memory_facts("host_accessible")}
    if first_view.ctypes.data != value.data_ptr():
        yield Violation("numpy() of a HOST_ACCESSIBLE value does not alias its memory", expected=f"0x{value.data_ptr():x}",
                        actual=f"0x{first_view.ctypes.data:x}", memory=memory, reproducer=snippet)
    else:
        ctx.prove(proofs.NUMPY_ALIASES, True)
    ctx.prove(proofs.MEMORY, {"host_accessible": memory_label(memory["host_accessible"])})
    written = tensors.sample(dt, shp, seed=6)
    first_view[...] = written
    diff = ctx.compare(tensors.payload(written, dt), tensors.payload(value.numpy(), dt))
    if diff:
        yield Violation(f"a write through numpy() did not reach the HOST_ACCESSIBLE value: {diff.describe()}", memory=memory, reproducer=snippet)


@check("copy.bad-requests", apis=("copy_tensors",))
def bad_requests(ctx: CheckContext, request: str, direction: str) -> Iterator[Violation]:
    """Tries one bad request for real, after showing the same direction works when asked
    right; the destinations are sentinel-filled, so a partial copy shows."""
    source_kind, destination_kind = direction.split(">")
    if request == "mixed-memory" and ctx.memory_facts(source_kind) == ctx.memory_facts(destination_kind):
        raise NotApplicable(f"{source_kind} and {destination_kind} are the same memory on this EP device; nothing to mix")
    sources = bad_copies.ends(bad_copies.BAD_REQUESTS[request]["sources"], source_kind, destination_kind)
    destinations = bad_copies.ends(bad_copies.BAD_REQUESTS[request]["destinations"], source_kind, destination_kind)
    for pair in sorted({(s[0], d[0]) for s, d in zip(sources, destinations, strict=False)} or {(source_kind, destination_kind)}):
        bad_copies.valid_copy(ctx, *pair)
    with ctx.precondition(f"placing valid values for {direction}"):
        src_values = [ctx.place(tensors.sample(dt, shp, seed=8), kind, dt) for kind, dt, shp in sources]
        dst_values = [ctx.place(tensors.sentinel(dt, shp, bad_copies.DESTINATION_SENTINEL), kind, dt) for kind, dt, shp in destinations]
    # Only the EP's own copies are its to refuse: a CPU-to-CPU copy is onnxruntime's.
    shared = "both" if request in bad_copies.PASSED_THROUGH and not (ctx.is_cpu_memory(source_kind) and ctx.is_cpu_memory(destination_kind)) else ""
    snippet = _bad_copy_script(ctx.snippets, request, sources, destinations)
    ctx.attempt(f"copy_tensors with a bad request ({request})", snippet)
    try:
        ctx.copy(src_values, dst_values, direction, note=f"bad request {request}")
    except Exception as exc:
        refused = True
        ctx.prove(proofs.REFUSED, message_line(exc)[:200])
        if not str(exc).strip():
            yield Violation(f"copy_tensors refused a bad request ({request}) without saying why", expected="an error message",
                            actual=repr(exc), reproducer=snippet)
    else:
        refused = False
        yield Violation(f"copy_tensors accepted a bad request ({request})", expected="a clear error", actual="accepted", reproducer=snippet,
                        subject=shared)
    for index, ((kind, dt, shp), value) in enumerate(zip(destinations, dst_values, strict=False)):
        with ctx.precondition("reading the destination back"):
            got = ctx.read(value, kind, dt, shp)
        if ctx.compare(tensors.payload(tensors.sentinel(dt, shp, bad_copies.DESTINATION_SENTINEL), dt), got):
            yield Violation(f"the bad request ({request}) wrote into destination {index} ({kind} memory)",
                            expected="destination unchanged", actual="bytes changed", reproducer=snippet, subject=shared)
    if refused:
        yield from _after_refusal(ctx, request, sources, src_values, destinations, dst_values, source_kind, snippet)


def _after_refusal(ctx: CheckContext, request: str, sources, src_values, destinations, dst_values, source_kind: str, snippet: str) -> Iterator[Violation]:
    """The state after a refusal: each source still holds its values, and each destination
    refused takes a valid copy of its own type and shape (from the memory its pair's source
    was in) with the right bytes, so the refusal left nothing half-done behind it."""
    for index, ((kind, dt, shp), value) in enumerate(zip(sources, src_values, strict=False)):
        with ctx.precondition(f"reading source {index} back after the refusal"):
            got = ctx.read(value, kind, dt, shp)
        if diff := ctx.compare(tensors.payload(tensors.sample(dt, shp, seed=8), dt), got):
            yield Violation(f"after the refused bad request ({request}), source {index} ({kind} memory) no longer holds its values: "
                            f"{diff.describe()}", expected="the source unchanged", actual=diff.describe(), reproducer=snippet)
    for index, ((kind, dt, shp), value) in enumerate(zip(destinations, dst_values, strict=False)):
        from_kind = sources[index][0] if index < len(sources) else source_kind
        values = tensors.sample(dt, shp, seed=9 + index)
        with ctx.precondition(f"placing valid values in {from_kind} memory after the refusal"):
            source = ctx.place(values, from_kind, dt)
        ctx.attempt(f"copy_tensors {from_kind}>{kind} into destination {index} after the refused bad request ({request})", snippet)
        try:
            ctx.copy([source], [value], f"{from_kind}>{kind}", note=f"after bad request {request}")
        except Exception as exc:
            yield Violation(f"after the refused bad request ({request}), a valid copy into destination {index} ({kind} memory) failed: "
                            f"{message_line(exc)}", expected="the copy", actual=message_line(exc), reproducer=snippet)
            continue
        if diff := ctx.compare(tensors.payload(values, dt), ctx.read(value, kind, dt, shp)):
            yield Violation(f"after the refused bad request ({request}), a valid copy into destination {index} ({kind} memory) "
                            f"did not deliver the source bytes: {diff.describe()}", expected="byte-identical destination",
                            actual=diff.describe(), reproducer=snippet)
    ctx.prove(proofs.USABLE_AFTER_REFUSAL, {"sources": len(sources), "destinations": len(destinations)})


# --- the reproducers: standalone scripts of each check's step ------------------------------


def _copy_script(sn: Snippets, source_kind: str, destination_kind: str, dt: tensors.DType, shape: tuple[int, ...], *, may_refuse: bool = False) -> str:
    """copy_tensors from `source_kind` to `destination_kind` memory delivers the source bytes."""
    what = f"copy_tensors {source_kind}>{destination_kind} of {dt.name} {list(shape)}"
    call = "ort.copy_tensors([source], [destination], None)"
    if may_refuse:
        attempt = f"try:\n    {call}\nexcept Exception as error:\n    print('refused, which this contract allows:', error)\n    raise SystemExit(0)"
    else:
        attempt = f"works({what!r}, ort.copy_tensors, [source], [destination], None)"
    body = [sn.values("values", dt, shape, 4), sn.place("source", "values", source_kind, dt),
            sn.sentinel("landing", dt, shape, steps.SENTINEL), sn.place("destination", "landing", destination_kind, dt), attempt,
            f"same_bytes({what!r}, values, {sn.read('destination', 'landing', destination_kind, dt)}{sn.nbytes(dt, shape)})"]
    return sn.script(f"{what} on {sn.under_test.target.provider}", "\n".join(body))


def _bad_copy_script(sn: Snippets, request: str, sources, destinations) -> str:
    """A bad copy_tensors request is refused with a message, and writes into no destination.
    `sources`, `destinations`: (memory kind, element type, shape) of each."""
    body = []
    for index, (kind, dt, shape) in enumerate(sources):
        body += [sn.values(f"values{index}", dt, shape, 8 + index), sn.place(f"source{index}", f"values{index}", kind, dt)]
    for index, (kind, dt, shape) in enumerate(destinations):
        body += [sn.sentinel(f"landing{index}", dt, shape, steps.SENTINEL), sn.place(f"destination{index}", f"landing{index}", kind, dt),
                 sn.sentinel(f"unchanged{index}", dt, shape, steps.SENTINEL)]
    sources_list = "[" + ", ".join(f"source{i}" for i in range(len(sources))) + "]"
    destinations_list = "[" + ", ".join(f"destination{i}" for i in range(len(destinations))) + "]"
    body.append(f"refused('copy_tensors with a bad request ({request})', ort.copy_tensors, {sources_list}, {destinations_list}, None)")
    for index, (kind, dt, _shape) in enumerate(destinations):
        body.append(f"same_bytes('destination {index} after the refused request', unchanged{index}, "
                    f"{sn.read(f'destination{index}', f'landing{index}', kind, dt)})")
    # the state after the refusal: the sources hold their values, the destinations take a valid copy
    for index, (kind, dt, _shape) in enumerate(sources):
        body.append(f"same_bytes('source {index} after the refused request', values{index}, "
                    f"{sn.read(f'source{index}', f'values{index}', kind, dt)})")
    for index, (kind, dt, shape) in enumerate(destinations):
        from_kind = sources[index][0] if index < len(sources) else (sources[0][0] if sources else "cpu")
        body += [sn.values(f"again{index}", dt, shape, 9 + index), sn.place(f"again_source{index}", f"again{index}", from_kind, dt),
                 f"works('a valid copy into destination {index} after the refusal', ort.copy_tensors, [again_source{index}], [destination{index}], None)",
                 f"same_bytes('destination {index} after a valid copy that followed the refusal', again{index}, "
                 f"{sn.read(f'destination{index}', f'landing{index}', kind, dt)})"]
    return sn.script(f"copy_tensors refuses a bad request ({request}) on {sn.under_test.target.provider}", "\n".join(body))
