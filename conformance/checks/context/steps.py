"""What the families' reproducers share: SENTINEL (the byte a landing is filled with, so that a
copy that did nothing shows), REFERENCES (numpy's result of each recipe, as a script computes it)
and the IOBinding run that both iobinding.in-place and the bad bindings' valid request reproduce.
Each family's own builders live beside its checks (`_..._script`), as a family may not import
another's module; each returns a complete script (`Snippets.script`) that ends in the assertion
of what the contract promises, so that it fails exactly when the contract is broken."""

from __future__ import annotations

from pathlib import Path

from conformance.testbed import tensors
from conformance.checks.context.snippets import Snippets

SENTINEL = 0x5A


REFERENCES = {"identity": "{0}", "relu": "np.maximum({0}, 0)", "add": "{0} + {1}", "add_relu": "np.maximum({0} + {1}, 0)",
              "sub_relu": "np.maximum({0} - {1}, 0)", "relu_neg_add": "np.minimum({0}, 0)"}


def iobinding_in_place(sn: Snippets, model_path: Path | None, recipe: str, dt: tensors.DType, shape: tuple[int, ...], kind: str) -> str:
    """A run with the input and a preallocated output bound in `kind` memory writes the result
    into that output, where it is."""
    reference = REFERENCES[recipe].format("x")
    body = [sn.session_snippet(model_path), f"x = np.random.default_rng(11).integers(-8, 9, size={list(shape)}).astype(np.{dt.storage.name})",
            f"expected = ({reference}).astype(np.{dt.storage.name})", sn.place("source", "x", kind, dt),
            sn.sentinel("landing", dt, shape, SENTINEL), sn.place("output", "landing", kind, dt),
            "b = s.io_binding()", "b.bind_ortvalue_input(s.get_inputs()[0].name, source)", "b.bind_ortvalue_output(s.get_outputs()[0].name, output)",
            "works('run_with_iobinding', s.run_with_iobinding, b)",
            "assert b.get_outputs()[0].data_ptr() == output.data_ptr(), "
            "f'the bound output: expected it used in place at 0x{output.data_ptr():x}, got 0x{b.get_outputs()[0].data_ptr():x}'",
            f"same_bytes('the preallocated output', expected, {sn.read('output', 'landing', kind, dt)})"]
    return sn.script(f"IOBinding of model '{recipe}' ({dt.name} {list(shape)}) with its input and output bound in {kind} memory", "\n".join(body))
