"""Each IOBinding call on a valid request: the input bound by address, as a numpy array (also a
read-only one) or as an OrtValue in the EP's DEFAULT memory; the output bound to a device for
onnxruntime to allocate, to a host buffer by address, or to an OrtValue in DEFAULT memory; and
bindings cleared and made again. After the run, what the binding hands back (get_outputs(),
copy_outputs_to_cpu(), the bound buffer) must hold the model's result, with the shape, element
type and size the model gives it."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from conformance.testbed import tensors
from conformance.calls import Call
from conformance.checks.context.bad_bindings import OUTPUT_SENTINEL
from conformance.checks.registry import check
from conformance.checks.context.reference import reference, small_integers
from conformance.checks.context.sessions import cpu_input_run, plain_run_words
from conformance.testbed.eps import memory_device_type
from conformance.findings import NotRun, Violation
from conformance.testbed.guard import GuardedArray
from conformance.checks.context import CheckContext
from conformance import proofs

INPUT_REQUESTS = ("bind-input-pointer", "bind-cpu-input", "bind-cpu-input-readonly", "bind-ortvalue-input")
OUTPUT_REQUESTS = ("bind-output-device", "bind-output-pointer", "bind-ortvalue-output")


def host_buffer(storage: np.ndarray, *, writeable: bool = True) -> GuardedArray:
    """A host buffer onnxruntime is handed by address (or wraps), holding `storage`'s bytes,
    between canaries: a read or write past it shows (guard.GuardedArray.check)."""
    return GuardedArray.holding(np.asarray(storage), writeable=writeable)


def _device_of_default(ctx: CheckContext) -> tuple[str, int]:
    """The device type and id Python's bind_output names the EP's DEFAULT memory by."""
    info = ctx.memory_info("default")
    return ("cpu", 0) if info is None else (memory_device_type(ctx.ort, info), int(info.device_id))


def _bind_input(ctx: CheckContext, io, name: str, request: str, values: np.ndarray, dt: tensors.DType) -> tuple[str, GuardedArray | None]:
    """Binds the input as `request` asks; returns the call in words and the guarded host buffer
    read (None: none)."""
    if request == "bind-input-pointer":
        buffer = host_buffer(values)
        io.bind_input(name, "cpu", 0, dt.storage, list(values.shape), buffer.address)
        return f"bind_input({name!r}, 'cpu', 0, np.{dt.storage.name}, {list(values.shape)}, buffer.ctypes.data)", buffer
    if request == "bind-ortvalue-input":
        with ctx.precondition("placing the input in DEFAULT memory"):
            value = ctx.place(values, "default", dt)
        io.bind_ortvalue_input(name, value)
        return f"bind_ortvalue_input({name!r}, <a value in DEFAULT memory>)", None
    guarded = host_buffer(values, writeable=request != "bind-cpu-input-readonly")
    io.bind_cpu_input(name, guarded.array)
    return f"bind_cpu_input({name!r}, {'a read-only' if not guarded.array.flags.writeable else 'an'} array)", guarded


def _bind_output(ctx: CheckContext, io, name: str, request: str, dt: tensors.DType, shape: tuple[int, ...]):
    """Binds the output as `request` asks; returns the call in words, the host buffer written by
    address and the OrtValue bound (None where there is none)."""
    landing = tensors.sentinel(dt, shape, OUTPUT_SENTINEL)
    if request == "bind-output-pointer":
        buffer = host_buffer(landing)
        io.bind_output(name, "cpu", 0, dt.storage, list(shape), buffer.address)
        return f"bind_output({name!r}, 'cpu', 0, np.{dt.storage.name}, {list(shape)}, buffer.ctypes.data)", buffer, None
    if request == "bind-ortvalue-output":
        with ctx.precondition("placing the output in DEFAULT memory"):
            value = ctx.place(landing, "default", dt)
        io.bind_ortvalue_output(name, value)
        return f"bind_ortvalue_output({name!r}, <a value in DEFAULT memory>)", None, value
    device_type, device_id = _device_of_default(ctx) if request == "bind-output-device" else ("cpu", 0)
    io.bind_output(name, device_type, device_id)
    return f"bind_output({name!r}, {device_type!r}, {device_id})", None, None


@check("iobinding.bind-calls")
def bind_calls(ctx: CheckContext, request: str, dtype: str, shape: str, recipe: str = "relu") -> Iterator[Violation]:
    """One IOBinding call on a valid request (the other end bound as plainly as it can be: a
    numpy input, an output onnxruntime allocates on the CPU), then a run and every way of
    reading the result back. The model is a Relu or an Identity (their results are what the reproducer computes)."""
    require_request(request)
    dt = tensors.DTYPES[dtype]
    shp = tensors.parse_shape(shape, dt)
    info = ctx.session(recipe, dt, shp)
    ctx.require_nodes_on_ep(info)
    (values,) = [np.array(v, order="C") for v in small_integers(("x",), dt, shp).values()]  # a 0-d array for a scalar
    expected = tensors.payload(np.array(reference(recipe, {"x": values}), dt.storage, order="C"), dt)
    x_name, y_name = info.session.get_inputs()[0].name, info.session.get_outputs()[0].name
    _require_plain_run(ctx, info, x_name, values, expected, dt)
    io = info.session.io_binding()
    snippet = _snippet(ctx, info, request, dt, shp)
    ctx.attempt(f"binding ({request}) and running model '{recipe}' ({dt.name} {list(shp)})", snippet)
    if request == "clear-and-rebind":
        with ctx.calling(Call("IOBinding clear_binding_inputs/outputs")):
            io.bind_cpu_input(x_name, tensors.sentinel(dt, shp, OUTPUT_SENTINEL))
            io.bind_output(y_name, "cpu")
            io.clear_binding_inputs()
            io.clear_binding_outputs()
    with ctx.calling(Call(f"IOBinding {request}")):
        said_in, read_buffer = _bind_input(ctx, io, x_name, request if request in INPUT_REQUESTS else "bind-cpu-input", values, dt)
        said_out, written_buffer, bound = _bind_output(ctx, io, y_name, request if request in OUTPUT_REQUESTS else "", dt, shp)
    with ctx.calling(Call("run_with_iobinding", request)), ctx.running(info):
        info.session.run_with_iobinding(io)
    ctx.prove(proofs.BOUND, f"{said_in}; {said_out}")
    yield from _outputs_right(ctx, io, dt, shp, expected, snippet)
    if written_buffer is not None:
        yield from _right(ctx, "the output buffer bound by address", expected, tensors.payload(written_buffer.array, dt), snippet)
        yield from _same_address(ctx, "the output bound by address", written_buffer.address, io.get_outputs()[0], shp, snippet)
    if bound is not None:
        yield from _right(ctx, "the output value bound in DEFAULT memory", expected, ctx.read(bound, "default", dt, shp), snippet)
        yield from _same_address(ctx, "the output value bound in DEFAULT memory", bound.data_ptr(), io.get_outputs()[0], shp, snippet)
    if read_buffer is not None:
        yield from _right(ctx, "the input buffer after the run", tensors.payload(values, dt), tensors.payload(read_buffer.array, dt), snippet)
    for what, guarded in (("input", read_buffer), ("output", written_buffer)):
        if guarded is not None:
            ctx.prove_item(proofs.CANARIES_CHECKED, what, guarded.buffer.size - guarded.array.nbytes)
            for overrun in guarded.check():
                yield Violation(f"the run {overrun.describe()} of the {what} buffer handed to onnxruntime", expected="the canaries around it intact",
                                actual=overrun.describe(), reproducer=snippet)


def _require_plain_run(ctx: CheckContext, info, x_name: str, values: np.ndarray, expected, dt: tensors.DType) -> None:
    """IOBinding is onnxruntime's: where a plain run of the same model already fails or gives
    wrong values on the EP (the EP's failure, session.nodes-on-ep), a binding proves nothing."""
    # The input placed first, as the other IOBinding checks do (copy_tensors cpu>default), then
    # the run as session.nodes-on-ep announces it: where either was lost earlier, this stops.
    with ctx.precondition("placing the input in DEFAULT memory"):
        ctx.place(values, "default", dt)
    # A run of another shape is another call: an EP that aborts on an empty or scalar input
    # must not stop every later session run (session.nodes-on-ep's, of 3x5 inputs) on its device.
    with ctx.precondition(plain_run_words(values.shape)), ctx.calling(cpu_input_run(values.shape)), ctx.running(info):
        (got,) = info.session.run(None, {x_name: values})
    if ctx.compare(expected, tensors.payload(np.array(got, dt.storage, order="C"), dt)):
        raise NotRun("a plain run of the same model gives wrong values on the EP (session.nodes-on-ep's failure)")


def _outputs_right(ctx: CheckContext, io, dt: tensors.DType, shp: tuple[int, ...], expected, snippet: str) -> Iterator[Violation]:
    """get_outputs()' value reports the model's shape, element type and size; copy_outputs_to_cpu() holds the result."""
    with ctx.calling(Call("IOBinding get_outputs")):
        produced = io.get_outputs()
    if len(produced) != 1:
        yield Violation(f"get_outputs() gave {len(produced)} values for one bound output", expected="1", actual=str(len(produced)), reproducer=snippet)
        return
    value = produced[0]
    reported = (list(value.shape()), value.element_type(), value.tensor_size_in_bytes())
    wanted = (list(shp), dt.onnx_type, dt.nbytes(tensors.element_count(shp)))
    ctx.prove(proofs.OUTPUT_REPORTS, {"shape": reported[0], "element_type": reported[1], "bytes": reported[2]})
    if reported != wanted:
        yield Violation("the bound output reports another shape, element type or size than the model gives it",
                        expected=f"shape {wanted[0]}, element type {wanted[1]}, {wanted[2]} bytes",
                        actual=f"shape {reported[0]}, element type {reported[1]}, {reported[2]} bytes", reproducer=snippet)
    with ctx.calling(Call("IOBinding copy_outputs_to_cpu")):
        copied = io.copy_outputs_to_cpu()
    yield from _right(ctx, "copy_outputs_to_cpu()", expected, tensors.payload(np.ascontiguousarray(copied[0]).astype(dt.storage, copy=False), dt), snippet)


def _right(ctx: CheckContext, what: str, expected, got, snippet: str) -> Iterator[Violation]:
    diff = ctx.compare(expected, got)
    if diff:
        yield Violation(f"{what} does not hold the model's result: {diff.describe()}", expected="the model's result", actual=diff.describe(),
                        reproducer=snippet)


def _same_address(ctx: CheckContext, what: str, address: int, produced, shp: tuple[int, ...], snippet: str) -> Iterator[Violation]:
    if not tensors.element_count(shp):
        return  # an empty value has no address to keep
    ctx.prove(proofs.ADDRESS_KEPT, produced.data_ptr() == address)
    if produced.data_ptr() != address:
        yield Violation(f"{what} was not used in place: get_outputs() gives a value elsewhere", expected=f"0x{address:x}",
                        actual=f"0x{produced.data_ptr():x}", reproducer=snippet)


def _snippet(ctx: CheckContext, info, request: str, dt: tensors.DType, shp: tuple[int, ...]) -> str:
    """The same bindings in a script, ending in the same assertions."""
    sn, shape, storage = ctx.snippets, list(shp), f"np.{dt.storage.name}"
    device_type, device_id = _device_of_default(ctx)
    lines = [ctx.session_snippet(info.model_path), "b = s.io_binding()", "x_name, y_name = s.get_inputs()[0].name, s.get_outputs()[0].name",
             f"xs = np.array(np.random.default_rng(11).integers(-8, 9, size={shape}), {storage})",
             f"landing = sentinel({shape}, {storage}, {OUTPUT_SENTINEL:#x})", "kept = xs.copy()",
             f"expected = {'np.maximum(kept, 0)' if info.recipe == 'relu' else 'kept'}  # the model's result",
             "same_bytes('a plain run of the model', expected, works('a plain run', s.run, None, {x_name: xs})[0])"]
    if request == "clear-and-rebind":
        lines += ["b.bind_cpu_input(x_name, landing.copy()); b.bind_output(y_name, 'cpu')", "b.clear_binding_inputs(); b.clear_binding_outputs()"]
    lines.append({"bind-input-pointer": f"b.bind_input(x_name, 'cpu', 0, {storage}, {shape}, xs.ctypes.data)",
                  "bind-ortvalue-input": f"{sn.place('xv', 'xs', 'default', dt)}\nb.bind_ortvalue_input(x_name, xv)",
                  "bind-cpu-input-readonly": "xs.flags.writeable = False\nb.bind_cpu_input(x_name, xs)"}.get(request, "b.bind_cpu_input(x_name, xs)"))
    lines.append({"bind-output-pointer": f"b.bind_output(y_name, 'cpu', 0, {storage}, {shape}, landing.ctypes.data)",
                  "bind-ortvalue-output": f"{sn.place('yv', 'landing', 'default', dt)}\nb.bind_ortvalue_output(y_name, yv)",
                  "bind-output-device": f"b.bind_output(y_name, {device_type!r}, {device_id})"}.get(request, "b.bind_output(y_name, 'cpu')"))
    lines += ["works('run_with_iobinding', s.run_with_iobinding, b)", "out = b.get_outputs()[0]",
              f"assert (out.shape(), out.element_type(), out.tensor_size_in_bytes()) == ({shape}, {dt.onnx_type}, {dt.nbytes(tensors.element_count(shp))}), "
              "f'the output reports shape, element type, bytes {(out.shape(), out.element_type(), out.tensor_size_in_bytes())}'",
              f"same_bytes('copy_outputs_to_cpu()', expected, np.ascontiguousarray(b.copy_outputs_to_cpu()[0]).astype({storage}))",
              "same_bytes('the input after the run', kept, xs)"]
    if request == "bind-output-pointer":
        lines += ["same_bytes('the output buffer bound by address', expected, landing)"]
    if request == "bind-ortvalue-output":
        lines += [f"same_bytes('the output value bound in DEFAULT memory', expected, {sn.read('yv', 'landing', 'default', dt)})"]
    if request in ("bind-output-pointer", "bind-ortvalue-output") and tensors.element_count(shp):
        bound = "landing.ctypes.data" if request == "bind-output-pointer" else "yv.data_ptr()"
        lines += [f"assert out.data_ptr() == {bound}, 'the bound output: expected it used in place, got a value elsewhere'"]
    return sn.script(f"IOBinding {request} with model '{info.recipe}' ({dt.name} {shape}) gives the model's result", "\n".join(lines))


def require_request(request: str) -> None:
    if request not in INPUT_REQUESTS + OUTPUT_REQUESTS + ("clear-and-rebind",):
        raise NotRun(f"no IOBinding request named '{request}'")
