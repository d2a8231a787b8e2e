"""Sessions: the nodes meant for the EP run on it, and give the right values, on empty tensors too."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from conformance.testbed import tensors
from conformance.checks.registry import check
from conformance.checks.context import steps
from conformance.checks.context.snippets import Snippets
from conformance.checks.context.reference import reference, small_integers
from conformance.checks.context.sessions import SESSION_SHAPE, SessionInfo, cpu_input_run
from conformance.errors import KitError
from conformance.findings import ClaimedButUnrunnable, NotRun, Violation, first_line
from conformance.checks.context import CheckContext
from conformance import proofs


@check("session.nodes-on-ep")
def nodes_on_ep(ctx: CheckContext, recipe: str, dtype: str) -> Iterator[Violation]:
    dt = tensors.DTYPES[dtype]
    info = ctx.session(recipe, dt, SESSION_SHAPE)
    ctx.require_nodes_on_ep(info)
    recipe_inputs = ctx.models.recipes[recipe].inputs
    feeds = small_integers(recipe_inputs, dt)
    snippet = _session_run_script(ctx.snippets, info.model_path, recipe, recipe_inputs, dt, SESSION_SHAPE)
    ctx.attempt(f"running model '{recipe}' ({dt.name}) with inputs in CPU memory", snippet)
    with ctx.calling(cpu_input_run()), ctx.running(info):
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
    # The evidence: the nodes the EP took, its kernels created.
    claimed = taken_session(ctx, recipe, tensors.DTYPES[dtype], SESSION_SHAPE)
    if isinstance(claimed, Violation):
        yield claimed


def taken_session(ctx: CheckContext, recipe: str, dt: tensors.DType, shape: tuple[int, ...]) -> SessionInfo | Violation:
    """The EP's session of the model with its nodes on the EP, or the violation of claiming them
    and failing the session (ClaimedButUnrunnable). A model the EP declines (where it takes
    another) is not_applicable: an honest decline; one where it takes nothing at all is not_run:
    it is not functional here, and nothing was shown (require_nodes_on_ep)."""
    try:
        info = ctx.session(recipe, dt, shape)
    except ClaimedButUnrunnable as exc:
        return exc.violation
    ctx.require_nodes_on_ep(info)
    return info


@check("session.empty-tensors")
def empty_tensors(ctx: CheckContext, recipe: str, dtype: str, shape: str) -> Iterator[Violation]:
    """Runs a model whose inputs have a zero-sized dimension (a static shape of the model): the
    EP either declines its nodes (not_applicable: onnxruntime places them elsewhere) or runs them
    to the empty output the model defines. Taking the nodes and then failing the run, or giving
    another shape or element type, is the violation; so is claiming them and failing the session."""
    dt = tensors.DTYPES[dtype]
    shp = tensors.parse_shape(shape, dt)
    if tensors.element_count(shp):
        raise NotRun(f"shape {shape} is not empty: this contract is about tensors with a zero-sized dimension")
    info = taken_session(ctx, recipe, dt, shp)
    if isinstance(info, Violation):
        yield info
        return
    recipe_inputs = ctx.models.recipes[recipe].inputs
    feeds = {name: np.zeros(shp, dt.storage) for name in recipe_inputs}
    expected = np.asarray(reference(recipe, feeds)).astype(dt.storage)
    provider = ctx.target.provider
    snippet = _empty_run_script(ctx.snippets, info.model_path, recipe, recipe_inputs, dt, shp)
    ctx.attempt(f"running model '{recipe}' ({dt.name} {list(shp)}, empty) with inputs in CPU memory", snippet)
    try:
        # The same call as iobinding.bind-calls' plain run of an empty input: one that crashed
        # there is not made again here, and the other way round.
        with ctx.calling(cpu_input_run(shp)), ctx.running(info):
            (output,) = info.session.run(None, feeds)
    except KitError:
        raise  # a retry on another EP (SilentRetry) says so itself
    except Exception as exc:  # whatever the run raised is the EP's failure: it took the nodes (above)
        # The whole error, in one line: an EP's own reason often comes lines after onnxruntime's first.
        said = " ".join(f"{type(exc).__name__}: {exc}".split())
        yield Violation(f"{provider} took the nodes of model '{recipe}' ({dt.name} {list(shp)}) and failed to run them on "
                        f"empty inputs: {said}",
                        expected=f"an empty output of shape {list(shp)} and {dt.name}, or the nodes declined so that onnxruntime places them elsewhere",
                        actual=f"the run failed: {first_line(exc)}", reproducer=snippet)
        return
    got = np.asarray(output)
    ctx.prove(proofs.OUTPUT, {"shape": list(got.shape), "dtype": str(got.dtype)})
    if (got.shape, got.dtype) != (expected.shape, expected.dtype):
        yield Violation(f"model '{recipe}' on {provider} gave an output of shape {list(got.shape)} and {got.dtype} for empty inputs",
                        expected=f"shape {list(expected.shape)} and {expected.dtype} (empty, as the model defines)",
                        actual=f"shape {list(got.shape)} and {got.dtype}", reproducer=snippet)


# --- the reproducers: standalone scripts of each check's step ------------------------------


def _session_run_script(sn: Snippets, model_path: Path | None, recipe: str, inputs, dt: tensors.DType, shape: tuple[int, ...]) -> str:
    """A session of the model on the EP, its inputs in CPU memory, computes numpy's result."""
    reference = steps.REFERENCES[recipe].format(*(f"feeds[{name!r}]" for name in inputs))
    body = [sn.session_snippet(model_path), "rng = np.random.default_rng(11)",
            f"feeds = {{name: rng.integers(-8, 9, size={list(shape)}).astype(np.{dt.storage.name}) for name in {list(inputs)!r}}}",
            f"expected = ({reference}).astype(np.{dt.storage.name})",
            "(output,) = works('running the session', s.run, None, feeds)",
            f"same_bytes('model {recipe} ({dt.name}) on {sn.under_test.target.provider} against numpy', expected, np.asarray(output))"]
    return sn.script(f"model '{recipe}' ({dt.name} {list(shape)}) computes numpy's result on {sn.under_test.target.provider}", "\n".join(body))


def _empty_run_script(sn: Snippets, model_path: Path | None, recipe: str, inputs, dt: tensors.DType, shape: tuple[int, ...]) -> str:
    """A session of the model on the EP, its inputs empty (a zero-sized dimension), runs and gives
    the empty output the model defines: numpy's result has that shape and element type, and no
    bytes to compare, so the assertion is on shape and element type."""
    reference = steps.REFERENCES[recipe].format(*(f"feeds[{name!r}]" for name in inputs))
    body = [sn.session_snippet(model_path),
            f"feeds = {{name: np.zeros({list(shape)}, np.{dt.storage.name}) for name in {list(inputs)!r}}}",
            f"expected = ({reference}).astype(np.{dt.storage.name})  # empty: no bytes, only a shape and an element type",
            "(output,) = works('running the session on empty inputs', s.run, None, feeds)",
            "output = np.asarray(output)",
            "assert (output.shape, output.dtype) == (expected.shape, expected.dtype), "
            "f'expected an empty output of shape {expected.shape} and {expected.dtype}, got shape {output.shape} and {output.dtype}'",
            "print(f'an empty output of shape {output.shape} and {output.dtype}, as the model defines')"]
    return sn.script(f"model '{recipe}' ({dt.name} {list(shape)}, empty) runs on {sn.under_test.target.provider} to an empty output", "\n".join(body))
