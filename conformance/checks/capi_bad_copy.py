"""Bad requests on the C path: CopyTensors through the C API, given one pair whose source
differs from its destination in one dimension at a time (more or fewer elements, another
element type of the same size, the same element count at another element size), must refuse
it, write nothing, and then copy a valid source into the same destination. The requests are
copy.bad-requests' own (`conformance.checks.copy.BAD_REQUESTS`), made with the C API's tensors
(`capi_copy._Copier`) instead of Python's."""

from __future__ import annotations

from typing import Iterator

from conformance.checks import capi_copy
from conformance.checks.context import bad_copies
from conformance.checks.registry import check
from conformance.findings import NotApplicable, Violation
from conformance.testbed import tensors
from conformance.testbed.interop import capi as C
from conformance.testbed.interop import rig
from conformance.checks.context import CheckContext
from conformance import proofs

REQUESTS = ("size-mismatch", "fewer-elements", "type-mismatch", "other-element-size")


def _end(request: str, which: str) -> tuple[tensors.DType, tuple[int, ...]]:
    """(element type, shape) of the request's source or destination."""
    (_, dtype, shape), = bad_copies.BAD_REQUESTS[request][which]
    return tensors.DTYPES[dtype], shape


@check("copy.c-api-bad-requests")
def c_api_bad_requests(ctx: CheckContext, request: str, direction: str) -> Iterator[Violation]:
    if request not in REQUESTS:
        raise NotApplicable(f"'{request}' is a request of lists, which the C path's one-pair calls here do not make")
    source_kind, destination_kind = direction.split(">")
    (src_dt, src_shape), (dst_dt, dst_shape) = _end(request, "sources"), _end(request, "destinations")
    api, env, device = rig.c_device(ctx)
    advertised = C.ep_device_memory(api, device, "default")
    if advertised is None or advertised["device_type"] == "cpu":
        raise NotApplicable("the EP device's DEFAULT memory is plain CPU memory: CopyTensors has no device end to refuse for")
    snippet = _snippet(ctx, request, direction, (src_dt, src_shape), (dst_dt, dst_shape))
    ctx.attempt(f"CopyTensors {direction} through the C API with a bad request ({request})", snippet)
    passed_through = request in bad_copies.PASSED_THROUGH
    copier = capi_copy._Copier(ctx, api, env, device, dst_dt, dst_shape)
    try:
        with ctx.precondition(f"making the tensors of the request and a valid CopyTensors {direction}"):
            source = _placed(copier, "source", source_kind, src_dt, tensors.sample(src_dt, src_shape, seed=8))
            destination = _placed(copier, "destination", destination_kind, dst_dt, tensors.sentinel(dst_dt, dst_shape, capi_copy.SENTINEL))
            copier.copy(_placed(copier, "valid", source_kind, dst_dt, tensors.sample(dst_dt, dst_shape, seed=7)),
                        _placed(copier, "valid landing", destination_kind, dst_dt, tensors.sentinel(dst_dt, dst_shape, 0)), direction)
        try:
            copier.copy(source, destination, direction, note=f"bad request {request}")
        except C.OrtError as exc:
            ctx.prove(proofs.REFUSED, exc.message[:200])
        else:
            yield Violation(f"CopyTensors {direction} through the C API accepted a bad request ({request})", expected="a clear error",
                            actual="accepted", reproducer=snippet, subject="both" if passed_through else "")
        held = _read(copier, destination, destination_kind, dst_dt, dst_shape, "after the refusal")
        if ctx.compare(tensors.payload(tensors.sentinel(dst_dt, dst_shape, capi_copy.SENTINEL), dst_dt), tensors.payload(held, dst_dt)):
            yield Violation(f"the bad request ({request}) wrote into the destination ({destination_kind} memory)", expected="destination unchanged",
                            actual="bytes changed", reproducer=snippet, subject="both" if passed_through else "")
        # the valid call on the same destination
        values = tensors.sample(dst_dt, dst_shape, seed=9)
        try:
            copier.copy(_placed(copier, "again", source_kind, dst_dt, values), destination, direction, note=f"after bad request {request}")
        except C.OrtError as exc:
            yield Violation(f"after the bad request ({request}), a valid CopyTensors {direction} into the same destination failed: {exc.message}",
                            expected="the copy", actual=exc.message, reproducer=snippet)
            return
        delivered = _read(copier, destination, destination_kind, dst_dt, dst_shape, "after the valid copy")
        diff = ctx.compare(tensors.payload(values, dst_dt), tensors.payload(delivered, dst_dt))
        if diff:
            yield Violation(f"after the bad request ({request}), a valid CopyTensors {direction} did not deliver the source bytes: {diff.describe()}",
                            expected="byte-identical destination", actual=diff.describe(), reproducer=snippet)
        yield from copier.overrun_violations(f"CopyTensors {direction} with a bad request ({request})", snippet, "both" if passed_through else "")
    finally:
        copier.close()


def _placed(copier, name: str, kind: str, dtype: tensors.DType, array):
    """A tensor holding `array`: over it on the CPU, or in DEFAULT memory filled by CopyTensors cpu>default."""
    host = copier.cpu(name, array, dtype)
    if kind == "cpu":
        return host
    value = copier.device_tensor(dtype, tuple(array.shape))
    copier.copy(host, value, "cpu>default")
    return value


def _read(copier, value, kind: str, dtype: tensors.DType, shape: tuple[int, ...], when: str):
    """What the destination `value` holds: its own guarded host array, or a read-back by CopyTensors default>cpu."""
    if kind == "cpu":
        return copier.guards["destination"].array
    landing = f"the destination read back ({when})"
    copier.copy(value, copier.cpu(landing, tensors.sentinel(dtype, shape, 0xA5), dtype), "default>cpu")
    return copier.guards[landing].array


def _snippet(ctx: CheckContext, request: str, direction: str, source, destination) -> str:
    """The script: the C path's set-up, the bad pair refused, the destination unchanged, then a valid copy into it."""
    source_kind, destination_kind = direction.split(">")
    (src_dt, src_shape), (dst_dt, dst_shape) = source, destination
    src_bytes, dst_bytes = src_dt.nbytes(tensors.element_count(src_shape)), dst_dt.nbytes(tensors.element_count(dst_shape))

    def tensor(name: str, kind: str, fill: str, shape, dtype) -> str:
        made = f"{name}_host = guarded({fill})\n{name} = cpu_tensor({name}_host, {list(shape)}, {C.ELEMENT_TYPES[dtype.name]})\n"
        if kind != "cpu":
            made += (f"{name}_host_side = {name}\n{name} = device_tensor({list(shape)}, {C.ELEMENT_TYPES[dtype.name]})\n"
                     f"copy({name}_host_side, {name})  # fill it: CPU > DEFAULT\n")
        return made

    def read(name: str) -> str:
        if destination_kind == "cpu":
            return "bytes(destination_host)[64:-64]"
        return f"(copy(destination, cpu_tensor({name})), bytes({name})[64:-64])[1]"

    body = (capi_copy.c_script_header(ctx, dst_dt, dst_shape)
            + tensor("source", source_kind, f"bytes((i * 37 + 11) % 256 for i in range({src_bytes}))", src_shape, src_dt)
            + tensor("destination", destination_kind, f"[{capi_copy.SENTINEL}] * {dst_bytes}", dst_shape, dst_dt)
            + f"""refusal = None
try:
    copy(source, destination)  # {direction}: {src_dt.name} {list(src_shape)} into {dst_dt.name} {list(dst_shape)} ({request})
except AssertionError as error:
    refusal = error
    print('refused:', error)
assert refusal is not None, 'CopyTensors {direction} with a bad request ({request}): expected an error, got: accepted'
check = guarded([0] * {dst_bytes})
held = {read('check')}
assert held == bytes([{capi_copy.SENTINEL}] * {dst_bytes}), 'the refused request wrote into the destination'
again = bytes((i * 53 + 5) % 256 for i in range({dst_bytes}))
""" + tensor("valid", source_kind, "again", dst_shape, dst_dt) + f"""copy(valid, destination)  # the valid call on the same destination
after = guarded([0] * {dst_bytes})
got = {read('after')}
assert got == again, 'after the refusal, a valid CopyTensors {direction} into the same destination did not deliver the bytes'
print('refused, then the valid copy delivered the bytes')
""")
    return ctx.snippets.script(f"CopyTensors {direction} through the C API refuses a bad request ({request}), then copies a valid one", body)
