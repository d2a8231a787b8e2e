"""IOBinding: bound device values are used in place; bad bindings are refused, and rebinding after one works."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from conformance.target import tensors
from conformance.calls import Call
from conformance.checks.registry import check
from conformance.checks.context import steps
from conformance.findings import NotApplicable, NotRun, Violation, message_line
from conformance.target.guard import GuardedArray
from conformance.checks.session import reference, small_integers
from conformance.target.eps import memory_device_type, memory_label

OUTPUT_SENTINEL = 0x5A


@check("iobinding.in-place")
def in_place(ctx, recipe: str, dtype: str, shape: str, memory: str = "default") -> Iterator[Violation]:
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
    output = ctx.place(tensors.sentinel(dt, shp, OUTPUT_SENTINEL), memory, dt)
    ctx.attempt(f"running with an input and a preallocated output bound in {memory} memory", snippet)
    binding = info.session.io_binding()
    (input_name,), (output_name,) = [i.name for i in info.session.get_inputs()], [o.name for o in info.session.get_outputs()]
    binding.bind_ortvalue_input(input_name, source)
    binding.bind_ortvalue_output(output_name, output)
    with ctx.calling(Call("run_with_iobinding", memory)), ctx.running(info):
        info.session.run_with_iobinding(binding)
    produced = binding.get_outputs()[0]
    ctx.prove("address_kept", produced.data_ptr() == output.data_ptr())
    ctx.prove("memory", {memory: memory_label(ctx.memory_facts(memory))})
    if produced.data_ptr() != output.data_ptr():
        yield Violation("the bound output was not used in place", expected=f"0x{output.data_ptr():x}", actual=f"0x{produced.data_ptr():x}",
                        memory={memory: ctx.memory_facts(memory)}, reproducer=snippet)
    diff = ctx.compare(tensors.payload(expected.astype(dt.storage), dt), ctx.read(output, memory, dt, shp))
    if diff:
        yield Violation(f"the preallocated output does not hold the result: {diff.describe()}", expected=f"numpy's {recipe} of the input",
                        actual=diff.describe(), memory={memory: ctx.memory_facts(memory)}, reproducer=snippet)


@check("iobinding.host-accessible-in-place")
def host_accessible_in_place(ctx, binding: str, recipe: str = "relu", dtype: str = "float32", shape: str = "7x13") -> Iterator[Violation]:
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
    landing = tensors.sentinel(dt, shp, OUTPUT_SENTINEL)
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
    ctx.prove("address_kept", produced.data_ptr() == output.data_ptr())
    ctx.prove("memory", {binding: memory_label(memory["host_accessible"])})
    if produced.data_ptr() != output.data_ptr():
        yield Violation("the bound output was not used in place", expected=f"0x{output.data_ptr():x}",
                        actual=f"0x{produced.data_ptr():x}", memory=memory, reproducer=snippet)
    diff = ctx.compare(expected, tensors.payload(output.numpy() if binding == "output" else landing, dt))
    if diff:
        where = "read in place from the HOST_ACCESSIBLE output" if binding == "output" else "computed from the HOST_ACCESSIBLE input"
        yield Violation(f"the result {where} is wrong: {diff.describe()}", expected=f"numpy's {recipe} of the input",
                        actual=diff.describe(), memory=memory, reproducer=snippet)


def _written_in_place(ctx, storage, dt: tensors.DType):
    """A HOST_ACCESSIBLE value holding `storage`'s values, written by the CPU through numpy()."""
    value = ctx.allocate("host_accessible", dt, storage.shape)
    view = value.numpy()
    if view.ctypes.data != value.data_ptr():
        raise NotRun("numpy() of a HOST_ACCESSIBLE value does not alias it (see copy.host-accessible-alias), "
                     "so the CPU cannot write it in place")
    view[...] = storage
    return value


# --- bad bindings (refused clearly) and rebinds after them --------------------------------

BINDING_RECIPE, BINDING_SHAPE = "relu", (2, 3)
WRONG_BUFFER_SHAPE = (3, 3)  # wrong-shape-buffer: a host buffer of this shape bound by address
# A device no EP device present advertises memory on: device types that Python's
# IOBinding.bind_output can name, tried in order (vendor id 0, device 0).
UNREACHABLE_CANDIDATES = ("npu", "gpu")


@dataclass
class BindingSetup:
    """A session of the relu model on the EP, valid input and output values in `memory`, and
    what the output must hold."""

    info: Any
    input_name: str
    output_name: str
    source: Any
    expected: tensors.Bytes | list[str]
    dt: tensors.DType
    memory: str


def _binding_setup(ctx, memory: str) -> BindingSetup:
    ctx.require_memory(memory)
    dt = tensors.DTYPES["float32"]
    info = ctx.session(BINDING_RECIPE, dt, BINDING_SHAPE)
    ctx.require_nodes_on_ep(info)
    (values,) = small_integers(("x",), dt, BINDING_SHAPE).values()
    expected = tensors.payload(reference(BINDING_RECIPE, {"x": values}).astype(dt.storage), dt)
    # What comes before the bad binding: the input placed, a valid run (see _require_valid_run).
    ctx.attempt(f"placing the input in {memory} memory", steps.iobinding_in_place(ctx.snippets, info.model_path, BINDING_RECIPE, dt, BINDING_SHAPE, memory))
    with ctx.precondition(f"placing the input in {memory} memory"):
        source = ctx.place(values, memory, dt)
    (input_name,), (output_name,) = [i.name for i in info.session.get_inputs()], [o.name for o in info.session.get_outputs()]
    return BindingSetup(info, input_name, output_name, source, expected, dt, memory)


def _valid_output(ctx, setup: BindingSetup):
    return ctx.place(tensors.sentinel(setup.dt, BINDING_SHAPE, OUTPUT_SENTINEL), setup.memory, setup.dt)


def _run_valid(ctx, setup: BindingSetup, binding, output, after: str = "") -> str:
    """Runs `binding` with `output` bound and returns what is wrong with the result ('' when
    right); `after` names what happened to the binding before (the call's note)."""
    binding.bind_ortvalue_output(setup.output_name, output)
    with ctx.calling(Call("run_with_iobinding", setup.memory, after)), ctx.running(setup.info):
        setup.info.session.run_with_iobinding(binding)
    diff = ctx.compare(setup.expected, ctx.read(output, setup.memory, setup.dt, BINDING_SHAPE))
    return diff.describe() if diff else ""


def _require_valid_run(ctx, setup: BindingSetup) -> None:
    """These are onnxruntime's promises: where a valid IOBinding run already fails or gives
    wrong values on the EP, a bad binding would prove nothing about them (not_run)."""
    binding = setup.info.session.io_binding()
    binding.bind_ortvalue_input(setup.input_name, setup.source)
    with ctx.precondition("a valid IOBinding run of the same model"):
        wrong = _run_valid(ctx, setup, binding, _valid_output(ctx, setup))
    if wrong:
        raise NotRun(f"a valid IOBinding run of the same model gives wrong values ({wrong})")


def unreachable_device(ctx) -> str:
    """A device type (vendor 0, device 0) on which no EP device present advertises memory."""
    advertised = set()
    for device in ctx.ort.get_ep_devices():
        for kind in (ctx.ort.OrtDeviceMemoryType.DEFAULT, ctx.ort.OrtDeviceMemoryType.HOST_ACCESSIBLE):
            info = device.memory_info(kind)
            if info is not None:
                advertised.add((memory_device_type(ctx.ort, info), int(info.device_vendor_id), int(info.device_id)))
    for candidate in UNREACHABLE_CANDIDATES:
        if (candidate, 0, 0) not in advertised:
            return candidate
    raise NotRun(f"every device type IOBinding can name ({', '.join(UNREACHABLE_CANDIDATES)}, vendor 0) has an EP device here")


@dataclass
class BadBinding:
    """What a bad binding bound: a host buffer or a value that must stay untouched, and in words."""

    bound: str = ""
    buffer: Any = None
    value: Any = None
    value_type: tuple | None = None
    guard: GuardedArray | None = None  # around `buffer`: what was written past it


def _bad_value_type(setup: BindingSetup, request: str) -> tuple[tensors.DType, tuple[int, ...]] | None:
    """(element type, shape) of the wrong value a request binds; None for the requests that
    bind a device instead of a value. The check and its reproducer both take it from here."""
    return {"wrong-shape": (setup.dt, (BINDING_SHAPE[0] + 1, BINDING_SHAPE[1])),
            "wrong-rank": (setup.dt, (BINDING_SHAPE[0] * BINDING_SHAPE[1],)),  # same element count, flat
            "wrong-element-type": (tensors.DTYPES["int32"], BINDING_SHAPE),  # same byte size
            "other-element-size": (tensors.DTYPES["float64"], BINDING_SHAPE)}.get(request)  # same element count, twice the bytes


# unknown-name: a valid value bound under a name the model does not have
UNKNOWN_NAMES = {"input": "no_such_input", "output": "no_such_output"}


def _bind_bad(ctx, setup: BindingSetup, binding, which: str, request: str) -> BadBinding:
    """Binds something wrong to the input or output."""
    name = setup.input_name if which == "input" else setup.output_name
    call = Call(f"IOBinding bind {which}", note=f"bad request {request}")
    bad = _bad_value_type(setup, request)
    if bad:
        dt, shape = bad
        with ctx.precondition(f"placing a {dt.name} {list(shape)} value in {setup.memory} memory"):
            value = ctx.place(tensors.sentinel(dt, shape, OUTPUT_SENTINEL), setup.memory, dt)
        with ctx.calling(call):
            (binding.bind_ortvalue_input if which == "input" else binding.bind_ortvalue_output)(name, value)
        return BadBinding(f"a {dt.name} {list(shape)} value in {setup.memory} memory", value=value, value_type=(dt, shape))
    if request == "unknown-name":
        with ctx.precondition(f"placing a valid value in {setup.memory} memory"):
            value = ctx.place(tensors.sentinel(setup.dt, BINDING_SHAPE, OUTPUT_SENTINEL), setup.memory, setup.dt)
        with ctx.calling(call):
            (binding.bind_ortvalue_input if which == "input" else binding.bind_ortvalue_output)(UNKNOWN_NAMES[which], value)
        return BadBinding(f"a valid value under the name {UNKNOWN_NAMES[which]!r}, which the model does not have", value=value,
                          value_type=(setup.dt, BINDING_SHAPE))
    if request == "wrong-shape-numpy":
        if which != "input":
            raise NotApplicable("bind_cpu_input binds an input only: IOBinding has no numpy call for an output")
        array = tensors.sentinel(setup.dt, WRONG_BUFFER_SHAPE, OUTPUT_SENTINEL)
        with ctx.calling(call):
            binding.bind_cpu_input(name, array)
        return BadBinding(f"a numpy array of shape {list(WRONG_BUFFER_SHAPE)} (bind_cpu_input)", buffer=None)
    if request == "wrong-shape-buffer":
        guarded = GuardedArray.holding(tensors.sentinel(setup.dt, WRONG_BUFFER_SHAPE, OUTPUT_SENTINEL))
        bind = binding.bind_input if which == "input" else binding.bind_output
        with ctx.calling(call):
            bind(name, "cpu", 0, setup.dt.storage, list(WRONG_BUFFER_SHAPE), guarded.address)
        return BadBinding(f"a host buffer of shape {list(WRONG_BUFFER_SHAPE)} by address", guard=guarded)
    device = unreachable_device(ctx)
    if request == "unreachable-device" and which == "output":
        bound = f"the {device} device 0 (vendor 0), which no EP device here advertises"
        with ctx.calling(call):
            binding.bind_output(name, device, 0)
        return BadBinding(bound)
    # A host buffer that onnxruntime is told lives on the unreachable device: if it is written
    # or read as host memory, the result shows here instead of crashing the process.
    guarded = GuardedArray.holding(tensors.sentinel(setup.dt, BINDING_SHAPE, OUTPUT_SENTINEL))
    bind = binding.bind_input if which == "input" else binding.bind_output
    with ctx.calling(call):
        bind(name, device, 0, setup.dt.storage, list(BINDING_SHAPE), guarded.address)
    return BadBinding(f"a buffer on the {device} device 0 (vendor 0), which no EP device here advertises", buffer=guarded.array, guard=guarded)


def _binding_snippet(ctx, setup: BindingSetup, which: str, request: str, must_refuse: bool = True) -> str:
    """Python that binds `request` to the input or output of the session, the other end valid,
    and runs it (the run is expected to be refused)."""
    name = setup.input_name if which == "input" else setup.output_name
    shape = list(BINDING_SHAPE)
    ctx.memory_expr(setup.memory)
    sn = ctx.snippets
    bad = _bad_value_type(setup, request)
    if bad:
        bind = (f"{sn.sentinel('wrong', bad[0], bad[1], OUTPUT_SENTINEL)}\n{sn.place('bad', 'wrong', setup.memory, bad[0])}\n"
                f"b.bind_ortvalue_{which}({name!r}, bad)")
    elif request == "unknown-name":
        bind = (f"{sn.sentinel('valid', setup.dt, BINDING_SHAPE, OUTPUT_SENTINEL)}\n{sn.place('unknown', 'valid', setup.memory, setup.dt)}\n"
                f"b.bind_ortvalue_{which}({UNKNOWN_NAMES[which]!r}, unknown)  # a name the model does not have")
    elif request == "wrong-shape-numpy":
        bind = f"b.bind_cpu_input({name!r}, sentinel({list(WRONG_BUFFER_SHAPE)}, np.float32, {OUTPUT_SENTINEL:#x}))  # a numpy array of the wrong shape"
    elif request == "wrong-shape-buffer":
        bind = (f"buf = sentinel({list(WRONG_BUFFER_SHAPE)}, np.float32, {OUTPUT_SENTINEL:#x})  # host memory of the wrong shape\n"
                f"b.bind_{which}({name!r}, 'cpu', 0, np.float32, {list(WRONG_BUFFER_SHAPE)}, buf.ctypes.data)")
    elif which == "output" and request == "unreachable-device":
        bind = f"b.bind_output({name!r}, {unreachable_device(ctx)!r}, 0)"
    else:
        bind = (f"buf = np.zeros({shape}, np.float32)  # host memory, said to live on a device nobody advertises\n"
                f"b.bind_{which}({name!r}, {unreachable_device(ctx)!r}, 0, np.float32, {shape}, buf.ctypes.data)")
    float32 = tensors.DTYPES["float32"]
    return sn.script(f"IOBinding refuses a bad {which} ({request})", f"{ctx.session_snippet(setup.info.model_path)}\n"
            f"xs = np.random.default_rng(11).integers(-8, 9, size={shape}).astype(np.float32)\n{sn.place('x', 'xs', setup.memory, float32)}\n"
            f"{sn.sentinel('ys', float32, BINDING_SHAPE, OUTPUT_SENTINEL)}\n{sn.place('y', 'ys', setup.memory, float32)}\nb = s.io_binding()\n"
            + (f"b.bind_ortvalue_input({setup.input_name!r}, x)\n" if which == "output" else f"b.bind_ortvalue_output({setup.output_name!r}, y)\n")
            + "refusal = None\ntry:  # expected: an error, when binding or when running\n" + "".join(f"    {line}\n" for line in bind.splitlines())
            + "    s.run_with_iobinding(b)\nexcept Exception as e:\n    refusal = e\n    print('refused:', e)\n"
            + (f"else:\n    raise AssertionError('a bad {which} ({request}): expected an error, got: accepted')" if must_refuse else ""))


@check("iobinding.rejects-bad-output")
def rejects_bad_output(ctx, request: str, memory: str = "default") -> Iterator[Violation]:
    """Shows a valid binding works, then binds a wrong output and expects run_with_iobinding to
    refuse it, leaving the bound memory untouched."""
    setup = _binding_setup(ctx, memory)
    _require_valid_run(ctx, setup)
    binding = setup.info.session.io_binding()
    binding.bind_ortvalue_input(setup.input_name, setup.source)
    snippet = _binding_snippet(ctx, setup, "output", request)
    bad = BadBinding()
    try:  # onnxruntime may refuse when binding or when running
        ctx.attempt(f"binding the output to {request} and running", snippet)
        bad = _bind_bad(ctx, setup, binding, "output", request)
        with ctx.calling(Call("run_with_iobinding", memory, f"bad output {request}")):
            setup.info.session.run_with_iobinding(binding)
    except (NotApplicable, NotRun):
        raise
    except Exception as exc:
        ctx.prove("refused", message_line(exc)[:200])
        if not str(exc).strip():
            yield Violation(f"run_with_iobinding refused {bad.bound or request} without saying why", expected="an error message", actual=repr(exc),
                            reproducer=snippet)
    else:
        produced = binding.get_outputs()[0]
        yield Violation(f"run_with_iobinding accepted an output bound to {bad.bound}", expected="a clear error",
                        actual=f"accepted; the output is a {produced.device_name()} value of shape {produced.shape()}", reproducer=snippet)
    if bad.buffer is not None and ctx.compare(tensors.payload(tensors.sentinel(setup.dt, BINDING_SHAPE, OUTPUT_SENTINEL), setup.dt),
                                              tensors.payload(bad.buffer, setup.dt)):
        yield Violation("onnxruntime wrote the output into a buffer it was told lives on an unreachable device, as if it were host memory",
                        expected="the buffer untouched", actual="the buffer holds the result", reproducer=snippet)
    if bad.guard is not None and bad.buffer is None and ctx.compare(tensors.payload(tensors.sentinel(setup.dt, bad.guard.shape, OUTPUT_SENTINEL), setup.dt),
                                                                    tensors.payload(bad.guard.array, setup.dt)):
        yield Violation(f"the refused run wrote into {bad.bound}", expected="the buffer untouched", actual="bytes changed", reproducer=snippet)
    for overrun in bad.guard.check() if bad.guard is not None else []:
        yield Violation(f"the refused run {overrun.describe()} of the buffer bound to {bad.bound}", expected="the canaries around it intact",
                        actual=overrun.describe(), reproducer=snippet)
    if bad.value is not None:
        assert bad.value_type is not None, "a bad value is made with its type"
        dt, shape = bad.value_type
        with ctx.precondition("reading the bound output back"):
            got = ctx.read(bad.value, memory, dt, shape)
        if ctx.compare(tensors.payload(tensors.sentinel(dt, shape, OUTPUT_SENTINEL), dt), got):
            yield Violation(f"the refused run wrote into the output bound to {bad.bound}", expected="the output untouched", actual="bytes changed",
                            reproducer=snippet)


@check("iobinding.rebind-after-failure")
def rebind_after_failure(ctx, binding: str, request: str, memory: str = "default") -> Iterator[Violation]:
    """Binds something wrong to the input or output, runs (onnxruntime should refuse), binds
    the same name again with a valid value, runs again: the second run must give the right
    values in the rebound output."""
    setup = _binding_setup(ctx, memory)
    _require_valid_run(ctx, setup)
    io = setup.info.session.io_binding()
    if binding == "output":
        io.bind_ortvalue_input(setup.input_name, setup.source)
    else:
        io.bind_ortvalue_output(setup.output_name, _valid_output(ctx, setup))
    bound = request
    name = setup.input_name if binding == "input" else setup.output_name
    snippet = _binding_snippet(ctx, setup, binding, request, must_refuse=False) + (
        f"# then bind {name!r} again with a valid value and run: expected the right values\n"
        + (f"works('binding the input again with a valid value', b.bind_ortvalue_input, {name!r}, x)\n" if binding == "input" else
           ("b.clear_binding_outputs()  # drops the unknown name: IOBinding has no call that unbinds one\n" if request == "unknown-name" else "")
           + f"works('binding the output again with a valid value', b.bind_ortvalue_output, {name!r}, y)\n")
        + "works('the run after binding again', s.run_with_iobinding, b)\n"
        + f"same_bytes('the output after binding again', np.maximum(xs, 0), {ctx.snippets.read('y', 'ys', memory, tensors.DTYPES['float32'])})\n")
    try:  # onnxruntime may refuse when binding or when running
        ctx.attempt(f"binding the {binding} to {request} and running", snippet)
        bound = _bind_bad(ctx, setup, io, binding, request).bound
        with ctx.calling(Call("run_with_iobinding", memory, f"bad {binding} {request}")):
            setup.info.session.run_with_iobinding(io)
    except (NotApplicable, NotRun):
        raise
    except Exception as exc:
        refusal = f"refused: {message_line(exc)[:120]}"
    else:
        refusal = "accepted"  # not this contract's concern (iobinding.rejects-bad-output): the rebind must work all the same
    ctx.prove("bad_binding", refusal)
    output = _valid_output(ctx, setup)
    ctx.attempt(f"binding the {binding} again with a valid value and running, after the bad binding was {refusal.split(':')[0]}")
    try:
        with ctx.calling(Call(f"IOBinding rebind {binding}", note=f"after a bad {request}")):
            if binding == "input":
                io.bind_ortvalue_input(setup.input_name, setup.source)
            elif request == "unknown-name":
                io.clear_binding_outputs()  # an output bound under a name stays bound; this is how an application drops it
            wrong = _run_valid(ctx, setup, io, output, after=f"rebound after a bad {binding} {request}")
    except Exception as exc:
        yield Violation(f"after a bad {binding} binding ({bound}; {refusal}), binding it again with a valid value did not work: {type(exc).__name__}: {exc}",
                        expected="the run with the valid binding succeeds", actual=str(exc), reproducer=snippet)
        return
    if wrong:
        yield Violation(f"after a bad {binding} binding ({bound}; {refusal}), the run with the valid binding gave wrong values: {wrong}",
                        expected=f"numpy's {BINDING_RECIPE} of the input", actual=wrong, reproducer=snippet)
    produced = io.get_outputs()[0]
    ctx.prove("address_kept", produced.data_ptr() == output.data_ptr())
    if produced.data_ptr() != output.data_ptr():
        yield Violation(f"after a bad {binding} binding, the rebound output was not used in place", expected=f"0x{output.data_ptr():x}",
                        actual=f"0x{produced.data_ptr():x}", reproducer=snippet)
