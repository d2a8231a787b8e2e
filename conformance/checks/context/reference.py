"""What a session of each recipe model is fed and must compute: small integers (exact in every
element type) and numpy's result for them. Shared by every family that runs a session (session,
placement, iobinding, lifecycle, ep-device, memory-info), none of which borrows it from another.
"""

from __future__ import annotations

import numpy as np

from conformance.checks.context.sessions import SESSION_SHAPE
from conformance.testbed import tensors


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
    if recipe == "sub_relu":
        return np.maximum(values[0] - values[1], 0)
    if recipe == "relu_neg_add":
        return np.minimum(values[0], 0)
    raise ValueError(f"no reference for recipe '{recipe}'")
