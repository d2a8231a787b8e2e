"""IOBinding: bound device values are used in place; bad bindings are refused, and rebinding after one works."""

from __future__ import annotations

from typing import Iterator

from conformance.testbed import tensors
from conformance.calls import Call
from conformance.checks.registry import check
from conformance.checks.context import CheckContext, bad_bindings
from conformance.checks.context import steps
from conformance.findings import NotApplicable, NotRun, Violation, message_line
from conformance.checks.context.reference import reference, small_integers
from conformance.testbed.eps import memory_label
from conformance import proofs



@check("iobinding.in-place")
def in_place(ctx: CheckContext, recipe: str, dtype: str, shape: str, memory: str = "default") -> Iterator[Violation]:
    """Binds an input and a preallocated output in `memory` and checks the output buffer was
    written where it is, with the model's result."""
    ctx.require_memory(memory)
    dt = tensors.DTYPES[dtype]
    shp = tensors.parse_shape(shape, dt)
    info = ctx.session(recipe, dt, shp)
    ctx.require_nodes_on_ep(info)
    snippet = steps.iobinding_in_place(ctx.snippets, info.model_path, recipe, dt, shp, memory)
    (values,) = small_integers(("x",), dt, shp).values()
    expected = reference(recipe, {"x": values})
    ctx.attempt(f"placing the input and the output of model '{recipe}' in {memory} memory", snippet)
    source = ctx.place(values, memory, dt)
    output = ctx.place(tensors.sentinel(dt, shp, bad_bindings.OUTPUT_SENTINEL), memory, dt)
    ctx.attempt(f"running with an input and a preallocated output bound in {memory} memory", snippet)
    binding = info.session.io_binding()
    (input_name,), (output_name,) = [i.name for i in info.session.get_inputs()], [o.name for o in info.session.get_outputs()]
    binding.bind_ortvalue_input(input_name, source)
    binding.bind_ortvalue_output(output_name, output)
    with ctx.calling(Call("run_with_iobinding", memory)), ctx.running(info):
        info.session.run_with_iobinding(binding)
    produced = binding.get_outputs()[0]
    ctx.prove(proofs.ADDRESS_KEPT, produced.data_ptr() == output.data_ptr())
    ctx.prove(proofs.MEMORY, {memory: memory_label(ctx.memory_facts(memory))})
    if produced.data_ptr() != output.data_ptr():
        yield Violation("the bound output was not used in place", expected=f"0x{output.data_ptr():x}", actual=f"0x{produced.data_ptr():x}",
                        memory={memory: ctx.memory_facts(memory)}, reproducer=snippet)
    diff = ctx.compare(tensors.payload(expected.astype(dt.storage), dt), ctx.read(output, memory, dt, shp))
    if diff:
        yield Violation(f"the preallocated output does not hold the result: {diff.describe()}", expected=f"numpy's {recipe} of the input",
                        actual=diff.describe(), memory={memory: ctx.memory_facts(memory)}, reproducer=snippet)


@check("iobinding.host-accessible-in-place")
def host_accessible_in_place(ctx: CheckContext, binding: str, recipe: str = "relu", dtype: str = "float32", shape: str = "7x13") -> Iterator[Violation]:
    """Binds a HOST_ACCESSIBLE value as the session's input or its output (the other end on
    the CPU). The CPU writes that input and reads that output through numpy() in place, never
    through copy_tensors, so the values are right only if the EP read and wrote the memory as
    the host memory it is."""
    ctx.require_memory("host_accessible")
    dt = tensors.DTYPES[dtype]
    shp = tensors.parse_shape(shape, dt)
    info = ctx.session(recipe, dt, shp)
    ctx.require_nodes_on_ep(info)
    (values,) = small_integers(("x",), dt, shp).values()
    expected = tensors.payload(reference(recipe, {"x": values}).astype(dt.storage), dt)
    snippet = ctx.snippets.script(f"model '{recipe}' ({dt.name} {list(shp)}) with its {binding} bound in HOST_ACCESSIBLE memory, which the CPU "
                                  f"{'writes' if binding == 'input' else 'reads'} in place",
               f"{ctx.session_snippet(info.model_path)}\nb = s.io_binding()\nx_name, y_name = s.get_inputs()[0].name, s.get_outputs()[0].name\n"
               f"x = np.random.default_rng(11).integers(-8, 9, size={list(shp)}).astype(np.{dt.storage.name})\n"
               f"v = works('allocating', ort.OrtValue.ortvalue_from_shape_and_type, {list(shp)}, {dt.onnx_type}, memory_info=HOST_ACCESSIBLE)\n"
               "assert v.numpy().ctypes.data == v.data_ptr(), 'numpy() of a HOST_ACCESSIBLE value: expected a view, got a copy'\n"
               + ("v.numpy()[...] = x\nb.bind_ortvalue_input(x_name, v); b.bind_output(y_name, 'cpu')\n" if binding == "input" else
                  "b.bind_cpu_input(x_name, x); b.bind_ortvalue_output(y_name, v)\n")
               + "works('run_with_iobinding', s.run_with_iobinding, b)\n"
               + ("" if binding == "input" else "assert b.get_outputs()[0].data_ptr() == v.data_ptr(), 'the bound output: expected it used in place'\n")
               + f"same_bytes('the result', np.maximum(x, 0), {'b.copy_outputs_to_cpu()[0]' if binding == 'input' else 'v.numpy()'})")
    landing = tensors.sentinel(dt, shp, bad_bindings.OUTPUT_SENTINEL)
    ctx.attempt("writing a HOST_ACCESSIBLE value through numpy()", snippet)
    with ctx.precondition("writing a HOST_ACCESSIBLE value through numpy()"):
        source = _written_in_place(ctx, values, dt) if binding == "input" else ctx.wrap_cpu(values, dt)
        output = _written_in_place(ctx, landing, dt) if binding == "output" else ctx.wrap_cpu(landing, dt)
    ctx.attempt(f"running with the {binding} bound in HOST_ACCESSIBLE memory", snippet)
    bindings = info.session.io_binding()
    bindings.bind_ortvalue_input(info.session.get_inputs()[0].name, source)
    bindings.bind_ortvalue_output(info.session.get_outputs()[0].name, output)
    with ctx.calling(Call("run_with_iobinding", "host_accessible", binding)), ctx.running(info):
        info.session.run_with_iobinding(bindings)
    memory = {"host_accessible": ctx.memory_facts("host_accessible")}
    produced = bindings.get_outputs()[0]
    ctx.prove(proofs.ADDRESS_KEPT, produced.data_ptr() == output.data_ptr())
    ctx.prove(proofs.MEMORY, {binding: memory_label(memory["host_accessible"])})
    if produced.data_ptr() != output.data_ptr():
        yield Violation("the bound output was not used in place", expected=f"0x{output.data_ptr():x}",
                        actual=f"0x{produced.data_ptr():x}", memory=memory, reproducer=snippet)
    diff = ctx.compare(expected, tensors.payload(output.numpy() if binding == "output" else landing, dt))
    if diff:
        where = "read in place from the HOST_ACCESSIBLE output" if binding == "output" else "computed from the HOST_ACCESSIBLE input"
        yield Violation(f"the result {where} is wrong: {diff.describe()}", expected=f"numpy's {recipe} of the input",
                        actual=diff.describe(), memory=memory, reproducer=snippet)


def _written_in_place(ctx: CheckContext, storage, dt: tensors.DType):
    """A HOST_ACCESSIBLE value holding `storage`'s values, written by the CPU through numpy()."""
    value = ctx.allocate("host_accessible", dt, storage.shape)
    view = value.numpy()
    if view.ctypes.data != value.data_ptr():
        raise NotRun("numpy() of a HOST_ACCESSIBLE value does not alias it (see copy.host-accessible-alias), "
                     "so the CPU cannot write it in place")
    view[...] = storage
    return value


@check("iobinding.rejects-bad-output")
def rejects_bad_output(ctx: CheckContext, request: str, memory: str = "default") -> Iterator[Violation]:
    """Shows a valid binding works, then binds a wrong output and expects run_with_iobinding to
    refuse it, leaving the bound memory untouched."""
    setup = bad_bindings.binding_setup(ctx, memory)
    bad_bindings.require_valid_run(ctx, setup)
    binding = setup.info.session.io_binding()
    binding.bind_ortvalue_input(setup.input_name, setup.source)
    snippet = bad_bindings.binding_snippet(ctx, setup, "output", request)
    bad = bad_bindings.BadBinding()
    try:  # onnxruntime may refuse when binding or when running
        ctx.attempt(f"binding the output to {request} and running", snippet)
        bad = bad_bindings.bind_bad(ctx, setup, binding, "output", request)
        with ctx.calling(Call("run_with_iobinding", memory, f"bad output {request}")):
            setup.info.session.run_with_iobinding(binding)
    except (NotApplicable, NotRun):
        raise
    except Exception as exc:
        ctx.prove(proofs.REFUSED, message_line(exc)[:200])
        if not str(exc).strip():
            yield Violation(f"run_with_iobinding refused {bad.bound or request} without saying why", expected="an error message", actual=repr(exc),
                            reproducer=snippet)
    else:
        produced = binding.get_outputs()[0]
        yield Violation(f"run_with_iobinding accepted an output bound to {bad.bound}", expected="a clear error",
                        actual=f"accepted; the output is a {produced.device_name()} value of shape {produced.shape()}", reproducer=snippet)
    if bad.buffer is not None and ctx.compare(tensors.payload(tensors.sentinel(setup.dt, bad_bindings.BINDING_SHAPE, bad_bindings.OUTPUT_SENTINEL), setup.dt),
                                              tensors.payload(bad.buffer, setup.dt)):
        yield Violation("onnxruntime wrote the output into a buffer it was told lives on an unreachable device, as if it were host memory",
                        expected="the buffer untouched", actual="the buffer holds the result", reproducer=snippet)
    guard, sentinel = bad.guard, bad_bindings.OUTPUT_SENTINEL
    if guard is not None and bad.buffer is None and ctx.compare(tensors.payload(tensors.sentinel(setup.dt, guard.shape, sentinel), setup.dt),
                                                                tensors.payload(guard.array, setup.dt)):
        yield Violation(f"the refused run wrote into {bad.bound}", expected="the buffer untouched", actual="bytes changed", reproducer=snippet)
    for overrun in bad.guard.check() if bad.guard is not None else []:
        yield Violation(f"the refused run {overrun.describe()} of the buffer bound to {bad.bound}", expected="the canaries around it intact",
                        actual=overrun.describe(), reproducer=snippet)
    if bad.value is not None:
        assert bad.value_type is not None, "a bad value is made with its type"
        dt, shape = bad.value_type
        with ctx.precondition("reading the bound output back"):
            got = ctx.read(bad.value, memory, dt, shape)
        if ctx.compare(tensors.payload(tensors.sentinel(dt, shape, bad_bindings.OUTPUT_SENTINEL), dt), got):
            yield Violation(f"the refused run wrote into the output bound to {bad.bound}", expected="the output untouched", actual="bytes changed",
                            reproducer=snippet)


@check("iobinding.rebind-after-failure")
def rebind_after_failure(ctx: CheckContext, binding: str, request: str, memory: str = "default") -> Iterator[Violation]:
    """Binds something wrong to the input or output, runs (onnxruntime should refuse), binds
    the same name again with a valid value, runs again: the second run must give the right
    values in the rebound output."""
    setup = bad_bindings.binding_setup(ctx, memory)
    bad_bindings.require_valid_run(ctx, setup)
    io = setup.info.session.io_binding()
    if binding == "output":
        io.bind_ortvalue_input(setup.input_name, setup.source)
    else:
        io.bind_ortvalue_output(setup.output_name, bad_bindings.valid_output(ctx, setup))
    bound = request
    name = setup.input_name if binding == "input" else setup.output_name
    snippet = bad_bindings.binding_snippet(ctx, setup, binding, request, must_refuse=False) + (
        f"# then bind {name!r} again with a valid value and run: expected the right values\n"
        + (f"works('binding the input again with a valid value', b.bind_ortvalue_input, {name!r}, x)\n" if binding == "input" else
           ("b.clear_binding_outputs()  # drops the unknown name: IOBinding has no call that unbinds one\n" if request == "unknown-name" else "")
           + f"works('binding the output again with a valid value', b.bind_ortvalue_output, {name!r}, y)\n")
        + "works('the run after binding again', s.run_with_iobinding, b)\n"
        + f"same_bytes('the output after binding again', np.maximum(xs, 0), {ctx.snippets.read('y', 'ys', memory, tensors.DTYPES['float32'])})\n")
    try:  # onnxruntime may refuse when binding or when running
        ctx.attempt(f"binding the {binding} to {request} and running", snippet)
        bound = bad_bindings.bind_bad(ctx, setup, io, binding, request).bound
        with ctx.calling(Call("run_with_iobinding", memory, f"bad {binding} {request}")):
            setup.info.session.run_with_iobinding(io)
    except (NotApplicable, NotRun):
        raise
    except Exception as exc:
        refusal = f"refused: {message_line(exc)[:120]}"
    else:
        refusal = "accepted"  # not this contract's concern (iobinding.rejects-bad-output): the rebind must work all the same
    ctx.prove(proofs.BAD_BINDING, refusal)
    output = bad_bindings.valid_output(ctx, setup)
    ctx.attempt(f"binding the {binding} again with a valid value and running, after the bad binding was {refusal.split(':')[0]}")
    try:
        with ctx.calling(Call(f"IOBinding rebind {binding}", note=f"after a bad {request}")):
            if binding == "input":
                io.bind_ortvalue_input(setup.input_name, setup.source)
            elif request == "unknown-name":
                io.clear_binding_outputs()  # an output bound under a name stays bound; this is how an application drops it
            wrong = bad_bindings.run_valid(ctx, setup, io, output, after=f"rebound after a bad {binding} {request}")
    except Exception as exc:
        yield Violation(f"after a bad {binding} binding ({bound}; {refusal}), binding it again with a valid value did not work: {type(exc).__name__}: {exc}",
                        expected="the run with the valid binding succeeds", actual=str(exc), reproducer=snippet)
        return
    if wrong:
        yield Violation(f"after a bad {binding} binding ({bound}; {refusal}), the run with the valid binding gave wrong values: {wrong}",
                        expected=f"numpy's {bad_bindings.BINDING_RECIPE} of the input", actual=wrong, reproducer=snippet)
    produced = io.get_outputs()[0]
    ctx.prove(proofs.ADDRESS_KEPT, produced.data_ptr() == output.data_ptr())
    if produced.data_ptr() != output.data_ptr():
        yield Violation(f"after a bad {binding} binding, the rebound output was not used in place", expected=f"0x{output.data_ptr():x}",
                        actual=f"0x{produced.data_ptr():x}", reproducer=snippet)
