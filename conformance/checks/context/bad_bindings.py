"""Bad IOBindings and the valid run around them: a session of the relu model with valid input and
output values (`binding_setup`), the valid run that must work for a refusal to mean anything
(`require_valid_run`), each bad request bound for real (`bind_bad`) and as a reproducer
(`binding_snippet`). Shared by the families that bind them: iobinding (refused, then rebound)
and errors (the refusal's message).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.calls import Call
from conformance.checks.context import CheckContext, steps
from conformance.checks.context.reference import reference, small_integers
from conformance.findings import NotApplicable, NotRun
from conformance.testbed import tensors
from conformance.testbed.eps import memory_device_type
from conformance.testbed.guard import GuardedArray

OUTPUT_SENTINEL = 0x5A  # what a destination holds before anything writes it

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


def binding_setup(ctx: CheckContext, memory: str) -> BindingSetup:
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


def valid_output(ctx: CheckContext, setup: BindingSetup):
    return ctx.place(tensors.sentinel(setup.dt, BINDING_SHAPE, OUTPUT_SENTINEL), setup.memory, setup.dt)


def run_valid(ctx: CheckContext, setup: BindingSetup, binding, output, after: str = "") -> str:
    """Runs `binding` with `output` bound and returns what is wrong with the result ('' when
    right); `after` names what happened to the binding before (the call's note)."""
    binding.bind_ortvalue_output(setup.output_name, output)
    with ctx.calling(Call("run_with_iobinding", setup.memory, after)), ctx.running(setup.info):
        setup.info.session.run_with_iobinding(binding)
    diff = ctx.compare(setup.expected, ctx.read(output, setup.memory, setup.dt, BINDING_SHAPE))
    return diff.describe() if diff else ""


def require_valid_run(ctx: CheckContext, setup: BindingSetup) -> None:
    """These are onnxruntime's promises: where a valid IOBinding run already fails or gives
    wrong values on the EP, a bad binding would prove nothing about them (not_run)."""
    binding = setup.info.session.io_binding()
    binding.bind_ortvalue_input(setup.input_name, setup.source)
    with ctx.precondition("a valid IOBinding run of the same model"):
        wrong = run_valid(ctx, setup, binding, valid_output(ctx, setup))
    if wrong:
        raise NotRun(f"a valid IOBinding run of the same model gives wrong values ({wrong})")


def unreachable_device(ctx: CheckContext) -> str:
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


def bad_value_type(setup: BindingSetup, request: str) -> tuple[tensors.DType, tuple[int, ...]] | None:
    """(element type, shape) of the wrong value a request binds; None for the requests that
    bind a device instead of a value. The check and its reproducer both take it from here."""
    return {"wrong-shape": (setup.dt, (BINDING_SHAPE[0] + 1, BINDING_SHAPE[1])),
            "wrong-rank": (setup.dt, (BINDING_SHAPE[0] * BINDING_SHAPE[1],)),  # same element count, flat
            "wrong-element-type": (tensors.DTYPES["int32"], BINDING_SHAPE),  # same byte size
            "other-element-size": (tensors.DTYPES["float64"], BINDING_SHAPE)}.get(request)  # same element count, twice the bytes


# unknown-name: a valid value bound under a name the model does not have
UNKNOWN_NAMES = {"input": "no_such_input", "output": "no_such_output"}


def bind_bad(ctx: CheckContext, setup: BindingSetup, binding, which: str, request: str) -> BadBinding:
    """Binds something wrong to the input or output."""
    name = setup.input_name if which == "input" else setup.output_name
    call = Call(f"IOBinding bind {which}", note=f"bad request {request}")
    bad = bad_value_type(setup, request)
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


def binding_snippet(ctx: CheckContext, setup: BindingSetup, which: str, request: str, must_refuse: bool = True) -> str:
    """Python that binds `request` to the input or output of the session, the other end valid,
    and runs it (the run is expected to be refused)."""
    name = setup.input_name if which == "input" else setup.output_name
    shape = list(BINDING_SHAPE)
    ctx.memory_expr(setup.memory)
    sn = ctx.snippets
    bad = bad_value_type(setup, request)
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
