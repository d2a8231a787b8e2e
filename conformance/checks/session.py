"""Sessions: the nodes meant for the EP run on it, and give the right values."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from conformance.target import tensors
from conformance.calls import Call
from conformance.checks.registry import check
from conformance.checks.context import steps
from conformance.checks.context.reference import reference, small_integers
from conformance.checks.context.sessions import SESSION_SHAPE
from conformance.findings import ClaimedButUnrunnable, Violation
from conformance.checks.context import CheckContext



@check("session.nodes-on-ep")
def nodes_on_ep(ctx: CheckContext, recipe: str, dtype: str) -> Iterator[Violation]:
    dt = tensors.DTYPES[dtype]
    info = ctx.session(recipe, dt, SESSION_SHAPE)
    ctx.require_nodes_on_ep(info)
    recipe_inputs = ctx.models.recipes[recipe].inputs
    feeds = small_integers(recipe_inputs, dt)
    snippet = steps.session_run(ctx.snippets, info.model_path, recipe, recipe_inputs, dt, SESSION_SHAPE)
    ctx.attempt(f"running model '{recipe}' ({dt.name}) with inputs in CPU memory", snippet)
    with ctx.calling(Call("InferenceSession.run", note="inputs in cpu")), ctx.running(info):
        (output,) = info.session.run(None, feeds)
    expected = tensors.payload(reference(recipe, feeds).astype(dt.storage), dt)
    diff = ctx.compare(expected, tensors.payload(np.asarray(output), dt))
    if diff:
        yield Violation(f"model '{recipe}' on {ctx.target.provider} computed wrong values: {diff.describe()}",
                        expected="numpy's result for the same inputs", actual=diff.describe(), reproducer=snippet)


@check("session.claimed-nodes-run")
def claimed_nodes_run(ctx: CheckContext, recipe: str, dtype: str) -> Iterator[Violation]:
    """Creates a session of a one-node model of each element type: the EP either takes the node
    and creates its kernel (the session exists, the node assigned to the EP), or declines it so
    that onnxruntime places it elsewhere (not_applicable: an honest decline). Claiming the node
    and then failing the session is the violation."""
    dt = tensors.DTYPES[dtype]
    try:
        info = ctx.session(recipe, dt, SESSION_SHAPE)
    except ClaimedButUnrunnable as exc:
        yield exc.violation
        return
    # The evidence: the nodes the EP took, its kernels created. A model it declines (where it
    # takes another) is not_applicable: an honest decline; one where it takes nothing at all is
    # not_run: it is not functional here, and nothing was shown.
    ctx.require_nodes_on_ep(info)
