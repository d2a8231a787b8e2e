"""Sessions: the nodes meant for the EP run on it, and give the right values."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from conformance import tensors
from conformance.checks import Violation, check

SESSION_SHAPE = (3, 5)


def small_integers(names: tuple[str, ...], dt: tensors.DType, shape: tuple[int, ...] = SESSION_SHAPE) -> dict[str, np.ndarray]:
    # Small integers, so every element type computes them exactly and NaN payloads do not
    # make a correct Add look wrong.
    rng = np.random.default_rng(11)
    return {name: rng.integers(-8, 9, size=shape).astype(dt.storage) for name in names}


def reference(recipe: str, feeds: dict[str, np.ndarray]) -> np.ndarray:
    values = list(feeds.values())
    if recipe == "identity":
        return values[0]
    if recipe == "relu":
        return np.maximum(values[0], 0)
    if recipe == "add":
        return values[0] + values[1]
    if recipe == "add_relu":
        return np.maximum(values[0] + values[1], 0)
    raise ValueError(f"no reference for recipe '{recipe}'")


@check("session.nodes-on-ep")
def nodes_on_ep(ctx, recipe: str, dtype: str) -> Iterator[Violation]:
    dt = tensors.DTYPES[dtype]
    info = ctx.session(recipe, dt, SESSION_SHAPE)
    snippet = (f"{ctx.preamble()}\nso = ort.SessionOptions(); so.add_session_config_entry('session.record_ep_graph_assignment_info', '1')\n"
               + ("so.add_provider_for_devices([dev], {})\n" if ctx.device is not None else "")
               + f"s = ort.InferenceSession({str(info.model_path)!r}, so"
               + (")" if ctx.device is not None else f", providers=[{ctx.target.provider!r}])")
               + "\nprint([(g.ep_name, [n.op_type for n in g.get_nodes()]) for g in s.get_provider_graph_assignment_info()])")
    ctx.require_nodes_on_ep(info)
    recipe_inputs = ctx.models.recipes[recipe].inputs
    feeds = small_integers(recipe_inputs, dt)
    ctx.announce_call("InferenceSession.run, inputs in cpu")
    (output,) = info.session.run(None, feeds)
    expected = reference(recipe, feeds)
    diff = tensors.compare(tensors.payload(expected.astype(dt.storage), dt), tensors.payload(np.asarray(output), dt))
    if diff:
        yield Violation(f"model '{recipe}' on {ctx.target.provider} computed wrong values: {diff.describe()}",
                        expected="numpy's result for the same inputs", actual=diff.describe(), reproducer=snippet + "\nprint(s.run(None, feeds))")
