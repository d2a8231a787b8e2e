"""IOBinding: bound device values are used in place."""

from __future__ import annotations

from typing import Iterator

from conformance import tensors
from conformance.checks import Violation, check
from conformance.checks.session import reference, small_integers

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
    snippet = (f"{ctx.preamble()}\n# s: a session of {info.model_path}\nb = s.io_binding()\n"
               f"x = ort.OrtValue.ortvalue_from_shape_and_type({list(shp)}, {dt.onnx_type}, memory_info={ctx.memory_expr(memory)})\n"
               f"y = ort.OrtValue.ortvalue_from_shape_and_type({list(shp)}, {dt.onnx_type}, memory_info={ctx.memory_expr(memory)})\n"
               "b.bind_ortvalue_input('x', x); b.bind_ortvalue_output('y', y); s.run_with_iobinding(b)\nassert b.get_outputs()[0].data_ptr() == y.data_ptr()")
    (values,) = small_integers(("x",), dt, shp).values()
    expected = reference(recipe, {"x": values})
    source = ctx.place(values, memory, dt)
    output = ctx.place(tensors.sentinel(dt, shp, OUTPUT_SENTINEL), memory, dt)
    binding = info.session.io_binding()
    (input_name,), (output_name,) = [i.name for i in info.session.get_inputs()], [o.name for o in info.session.get_outputs()]
    binding.bind_ortvalue_input(input_name, source)
    binding.bind_ortvalue_output(output_name, output)
    info.session.run_with_iobinding(binding)
    produced = binding.get_outputs()[0]
    if produced.data_ptr() != output.data_ptr():
        yield Violation("the bound output was not used in place", expected=f"0x{output.data_ptr():x}", actual=f"0x{produced.data_ptr():x}",
                        memory={memory: ctx.memory_facts(memory)}, reproducer=snippet)
    diff = tensors.compare(tensors.payload(expected.astype(dt.storage), dt), ctx.read(output, memory, dt, shp))
    if diff:
        yield Violation(f"the preallocated output does not hold the result: {diff.describe()}", expected=f"numpy's {recipe} of the input",
                        actual=diff.describe(), memory={memory: ctx.memory_facts(memory)}, reproducer=snippet)
