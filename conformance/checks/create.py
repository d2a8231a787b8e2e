"""Creating values: OrtValue.ortvalue_from_numpy and ortvalue_from_shape_and_type.

Each case asks for one value and checks what it is told back (shape(), element_type(),
tensor_size_in_bytes(), device_name()) against the request, then what the value holds. Host
arrays the checks hand onnxruntime are guarded (conformance.testbed.guard): a creation that writes
past them, or into a read-only one, shows.
"""

from __future__ import annotations

import ctypes
from typing import Iterator

import numpy as np

from conformance.testbed import tensors
from conformance.calls import Call
from conformance.checks.registry import check
from conformance.checks.context import steps
from conformance.checks.context.snippets import Snippets
from conformance.testbed.eps import memory_label
from conformance.findings import NotApplicable, Violation, message_line
from conformance.testbed.guard import GuardedArray
from conformance.checks.context import CheckContext
from conformance import proofs

DESTINATION_SENTINEL = 0x5A
# What ortvalue_from_numpy is asked with: no device arguments, or the CPU named explicitly
# (the only device_type the Python API takes for an EP device's memory is its built-in name).
NUMPY_DEVICE_ARGS = {"default-args": (), "device-args": ("cpu", 0)}


def _guarded_source(ctx: CheckContext, values: np.ndarray, layout: str) -> tuple[np.ndarray, GuardedArray]:
    """`values` laid out as asked, in a guarded host buffer: `strided` as every other element
    of a wider array (canaries in the gaps), `transposed` as the transpose of a C array
    (Fortran order), `read-only` contiguous but not writeable."""
    if layout in ("strided", "transposed") and values.ndim < (1 if layout == "strided" else 2):
        raise NotApplicable(f"a {layout} layout needs at least {1 if layout == 'strided' else 2} dimension(s)")
    if layout == "transposed":
        guarded = GuardedArray.holding(np.ascontiguousarray(values.T))
        source = guarded.array.T
    else:
        guarded = GuardedArray.holding(values, writeable=layout != "read-only", step=2 if layout == "strided" else 1)
        source = guarded.array
    ctx.watch(guarded, f"{layout} numpy source")
    return source, guarded


def _described(ctx: CheckContext, value, dt: tensors.DType, shape: tuple[int, ...], what: str, snippet: str) -> Iterator[Violation]:
    """What the value says of itself against what was asked: shape, element type, size in bytes."""
    said = {"shape()": list(value.shape()), "element_type()": value.element_type(), "tensor_size_in_bytes()": value.tensor_size_in_bytes()}
    asked = {"shape()": list(shape), "element_type()": dt.onnx_type, "tensor_size_in_bytes()": dt.nbytes(tensors.element_count(shape))}
    ctx.prove(proofs.DESCRIBED, asked)
    for accessor, expected in asked.items():
        if said[accessor] != expected:
            yield Violation(f"{what}: {accessor} is {said[accessor]}, not the {expected} asked for", expected=str(expected),
                            actual=str(said[accessor]), reproducer=snippet)


def _host_bytes(value) -> bytes:
    """The bytes of a value in CPU memory, read through data_ptr() for tensor_size_in_bytes()."""
    size = value.tensor_size_in_bytes()
    return ctypes.string_at(value.data_ptr(), size) if size else b""


@check("create.from-numpy")
def from_numpy(ctx: CheckContext, dtype: str, shape: str, layout: str = "contiguous", form: str = "default-args") -> Iterator[Violation]:
    dt = tensors.DTYPES[dtype]
    if not dt.numpy_native or dt.name == "string":
        raise NotApplicable(f"ortvalue_from_numpy cannot express {dt.name}: numpy has no such element type" if dt.name != "string"
                            else "onnxruntime's Python API creates no OrtValue from a string array")
    shp = tensors.parse_shape(shape, dt)
    values = tensors.sample(dt, shp, seed=11)
    source, _ = _guarded_source(ctx, values, layout)
    snippet = _from_numpy_script(ctx.snippets, dt, shp, layout, NUMPY_DEVICE_ARGS[form])
    what = f"ortvalue_from_numpy of a {layout} {dt.name} {list(shp)} array" + (f" with device {NUMPY_DEVICE_ARGS[form]}" if form != "default-args" else "")
    ctx.attempt(what, snippet)
    with ctx.calling(Call("ortvalue_from_numpy", layout, form)):
        value = ctx.ort.OrtValue.ortvalue_from_numpy(source, *NUMPY_DEVICE_ARGS[form])
    yield from _described(ctx, value, dt, shp, what, snippet)
    if value.device_name().lower() != "cpu":
        yield Violation(f"{what}: the value is in {value.device_name()} memory", expected="cpu", actual=value.device_name(), reproducer=snippet)
        return
    ctx.prove(proofs.ALIASES_THE_ARRAY, bool(source.size) and value.data_ptr() == source.ctypes.data)
    diff = ctx.compare(tensors.payload(values, dt), np.frombuffer(_host_bytes(value), np.uint8))
    if diff:
        yield Violation(f"{what}: the value does not hold the array's values: {diff.describe()}", expected="the array's logical values",
                        actual=diff.describe(), reproducer=snippet)


@check("create.read-only-source")
def read_only_source(ctx: CheckContext, dtype: str = "float32", shape: str = "2x3", write: str = "update-inplace") -> Iterator[Violation]:
    """A value made from a read-only array must not become a way to write into it: onnxruntime
    may copy the array, or alias it and refuse writes, but a write it accepts through the value
    must leave the array as it was."""
    dt = tensors.DTYPES[dtype]
    shp = tensors.parse_shape(shape, dt)
    values = tensors.sample(dt, shp, seed=12)
    source, guarded = _guarded_source(ctx, values, "read-only")
    snippet = _read_only_source_script(ctx.snippets, dt, shp)
    ctx.attempt("ortvalue_from_numpy of a read-only array, then update_inplace of the value", snippet)
    with ctx.calling(Call("ortvalue_from_numpy", "read-only")):
        value = ctx.ort.OrtValue.ortvalue_from_numpy(source)
    aliases = value.data_ptr() == guarded.address
    ctx.prove(proofs.ALIASES_THE_ARRAY, aliases)
    try:
        with ctx.calling(Call("update_inplace", "numpy>cpu", "read-only destination's array")):
            value.update_inplace(tensors.sentinel(dt, shp, DESTINATION_SENTINEL))
    except Exception as exc:
        ctx.prove(proofs.REFUSED, message_line(exc)[:200])
    diff = ctx.compare(tensors.payload(values, dt), tensors.payload(guarded.array, dt))
    if diff:
        yield Violation("a write through the value made by ortvalue_from_numpy reached the read-only array it was made from"
                        f" ({'aliased' if aliases else 'copied'}): {diff.describe()}", expected="the read-only array unchanged",
                        actual=diff.describe(), reproducer=snippet)


# The forms of ortvalue_from_shape_and_type that name memory `kind`: none (the CPU by default),
# the device by name (the CPU only: an EP device's memory has no device_type name the Python
# API takes) and memory_info= (the EP device's memory infos; CPU memory has none there).
SHAPE_AND_TYPE_FORMS = ("default-args", "device-args", "memory-info")


@check("create.from-shape-and-type")
def from_shape_and_type(ctx: CheckContext, dtype: str, shape: str, memory: str, form: str = "") -> Iterator[Violation]:
    ctx.require_memory(memory)
    form = form or ("default-args" if memory == "cpu" else "memory-info")
    dt = tensors.DTYPES[dtype]
    if dt.name == "string":
        raise NotApplicable("a string tensor holds pointers to strings, not bytes a copy moves")
    if (memory == "cpu") != (form != "memory-info"):
        raise NotApplicable(f"the {form} form does not name {memory} memory"
                            + (" (plain CPU memory has no memory info of the EP device)" if memory == "cpu" else ""))
    shp = tensors.parse_shape(shape, dt)
    if form == "memory-info":
        ctx.require_api("memory_info_alloc", "cannot allocate from an EP memory info")
        if ctx.memory_info(memory) is None:
            raise NotApplicable(f"the EP device advertises no memory info for its {memory} memory")
    args: dict = {"device-args": {"device_type": "cpu", "device_id": 0}, "memory-info": {"memory_info": ctx.memory_info(memory)},
                  "default-args": {}}[form]
    snippet = _from_shape_and_type_script(ctx.snippets, dt, shp, memory, form)
    what = f"ortvalue_from_shape_and_type({list(shp)}, {dt.name}) in {memory} memory ({form})"
    ctx.attempt(what, snippet)
    with ctx.calling(Call("allocate", memory, form)):
        value = ctx.ort.OrtValue.ortvalue_from_shape_and_type(list(shp), dt.onnx_type, **args)
    yield from _described(ctx, value, dt, shp, what, snippet)
    ctx.prove_item(proofs.MEMORY, memory, memory_label(ctx.memory_facts(memory)))
    # The value holds what is copied into it, all of it: its buffer is as large as it says.
    values = tensors.sample(dt, shp, seed=13)
    source = ctx.place(values, "cpu", dt)
    ctx.attempt(f"filling the value: {what}", snippet)
    if ctx.is_cpu_memory(memory):
        ctypes.memmove(value.data_ptr(), source.data_ptr(), value.tensor_size_in_bytes())
    else:
        ctx.copy([source], [value], f"cpu>{memory}")
    diff = ctx.compare(tensors.payload(values, dt), ctx.read(value, memory, dt, shp))
    if diff:
        yield Violation(f"{what}: the value does not hold what was copied into it: {diff.describe()}", expected="the values copied in",
                        actual=diff.describe(), memory={memory: ctx.memory_facts(memory)}, reproducer=snippet)


# --- the reproducers: standalone scripts of each check's step ------------------------------


def _layout_lines(name: str) -> str:
    """Lines that make `source`, the array `values` laid out as `name`."""
    return {"contiguous": "source = values.copy()",
            "read-only": "source = values.copy()\nsource.flags.writeable = False",
            "strided": "wide = np.zeros(values.shape[:-1] + (values.shape[-1] * 2,), values.dtype)\nwide[..., ::2] = values\nsource = wide[..., ::2]",
            "transposed": "source = np.ascontiguousarray(values.T).T"}[name]


def _described_assertion(what: str, value: str, dt: tensors.DType, shape: tuple[int, ...]) -> str:
    """The assertion that `value` reports the shape, element type and byte size asked for."""
    asked = (list(shape), dt.onnx_type, dt.nbytes(tensors.element_count(shape)))
    return (f"said = (list({value}.shape()), {value}.element_type(), {value}.tensor_size_in_bytes())\n"
            f"assert said == {asked!r}, f{what + ': expected (shape, element type, bytes) ' + repr(asked) + ', got '!r}" " + repr(said)")


def _from_numpy_script(sn: Snippets, dt: tensors.DType, shape: tuple[int, ...], layout: str, device_args: tuple) -> str:
    """ortvalue_from_numpy gives a CPU value of the array's shape, type, size and logical values."""
    what = f"ortvalue_from_numpy of a {layout} {dt.name} {list(shape)} array"
    args = "".join(f", {a!r}" for a in device_args)
    body = [sn.values("values", dt, shape, 11), _layout_lines(layout), f"value = works({what!r}, ort.OrtValue.ortvalue_from_numpy, source{args})",
            _described_assertion(what, "value", dt, shape),
            f"assert value.device_name().lower() == 'cpu', f'{what}: expected a CPU value, got ' + value.device_name()",
            f"same_bytes({what!r}, values, read(value, values, {dt.onnx_type}))"]
    return sn.script(f"{what} on {sn.under_test.target.provider}", "\n".join(body))


def _read_only_source_script(sn: Snippets, dt: tensors.DType, shape: tuple[int, ...]) -> str:
    """A write through a value made from a read-only array leaves the array as it was."""
    body = [sn.values("values", dt, shape, 12), _layout_lines("read-only"), "value = ort.OrtValue.ortvalue_from_numpy(source)",
            "print('the value aliases the read-only array:', value.data_ptr() == source.ctypes.data)",
            sn.sentinel("other", dt, shape, steps.SENTINEL),
            "try:\n    value.update_inplace(other)\nexcept Exception as error:\n    print('update_inplace refused:', error)",
            "same_bytes('the read-only array after a write through the value made from it', values, source)"]
    return sn.script("ortvalue_from_numpy of a read-only array gives no way to write into it", "\n".join(body))


def _from_shape_and_type_script(sn: Snippets, dt: tensors.DType, shape: tuple[int, ...], kind: str, form: str) -> str:
    """ortvalue_from_shape_and_type gives a value of the shape, type and size asked for, in the
    memory asked for, that holds what is copied into it."""
    what = f"ortvalue_from_shape_and_type({list(shape)}, {dt.name}) in {kind} memory ({form})"
    args = {"default-args": "", "device-args": ", 'cpu', 0", "memory-info": f", memory_info={sn.memory_expr(kind)}"}[form]
    body = [f"value = works({what!r}, ort.OrtValue.ortvalue_from_shape_and_type, {list(shape)}, {dt.onnx_type}{args})",
            _described_assertion(what, "value", dt, shape), sn.values("values", dt, shape, 13), "source = cpu_value(values, %d)" % dt.onnx_type,
            "if value.device_name().lower() == 'cpu':\n    ctypes.memmove(value.data_ptr(), source.data_ptr(), value.tensor_size_in_bytes())\n"
            f"else:\n    works('copy_tensors cpu>{kind}', ort.copy_tensors, [source], [value], None)",
            f"same_bytes({what!r}, values, read(value, values, {dt.onnx_type}){sn.nbytes(dt, shape)})"]
    return sn.script(f"{what} on {sn.under_test.target.provider}", "\n".join(body))
