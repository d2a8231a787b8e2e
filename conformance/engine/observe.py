"""What sessions of the kit's models show of the EP under test: which of their nodes it takes,
in which element types, where their inputs and outputs live, and whether a run of them stays on
it. `ort-conformance init` drafts an EP's spec from this and the copy matrix
(conformance.engine.capabilities); the parent's side is conformance.tools.init.

Every model of models/recipes.yaml that has a node is tried in every element type the kit
knows, each session made as the checks make theirs (conformance.checks.context.sessions:
fallback disabled, the node assignment recorded). An answer is plain data:

    {"assignment_known": bool,  # onnxruntime (>= 1.24) says which EP took which node
     "sessions": [{"recipe", "dtype", "ops_on_ep": [op types the EP took], "ops_elsewhere": [...],
                   "inputs": [memory facts | None], "outputs": [...],  # where the EP took a node
                   "ran": bool,  # a run was tried: numpy holds the element type, so its inputs can be fed
                   "run": "" | why the run failed,  # '' when it ran and stayed on the EP
                   "refused": "" | why the session could not be made,
                   "claimed_but_unrunnable": bool}]}

Memory facts are eps.memory_facts' (None: plain CPU memory as onnxruntime names it); which
memory kind each is, the parent decides against the EP device's advertised memories. Computed
inside a worker, as the copy matrix is.
"""

from __future__ import annotations

from typing import Any

from conformance.calls import Call
from conformance.checks.context import CheckContext
from conformance.checks.context.reference import small_integers
from conformance.checks.context.sessions import SESSION_SHAPE, cpu_input_run
from conformance.findings import ClaimedButUnrunnable, SilentRetry, message_line
from conformance.testbed import tensors
from conformance.facts import memory_wire
from conformance.testbed.eps import memory_facts


def sessions_seen(ctx: CheckContext, dtypes: list[str] | None = None, runs: list[list[str]] | None = None) -> dict[str, Any]:
    """The sessions of every recipe with a node, in each of `dtypes` (default: every element
    type of tensors.DTYPES), on the EP device of `ctx`; only the (recipe, dtype) pairs of `runs`
    (default: all) are run: the cases of session.nodes-on-ep, the one contract a failed run breaks."""
    names = dtypes if dtypes is not None else list(tensors.DTYPES)
    allowed = None if runs is None else {tuple(pair) for pair in runs}
    seen = []
    for recipe, model in ctx.models.recipes.items():
        if model.ops:
            seen += [_session(ctx, recipe, tensors.DTYPES[name], allowed is None or (recipe, name) in allowed) for name in names]
    return {"assignment_known": ctx.target.has_api("graph_assignment_info"), "sessions": seen}


def _session(ctx: CheckContext, recipe: str, dt: tensors.DType, run: bool = True) -> dict[str, Any]:
    provider = ctx.target.provider
    entry: dict[str, Any] = {"recipe": recipe, "dtype": dt.name, "ops_on_ep": [], "ops_elsewhere": [], "inputs": [], "outputs": [],
                             "ran": False, "run": "", "refused": "", "claimed_but_unrunnable": False}
    try:
        info = ctx.session(recipe, dt, SESSION_SHAPE)
    except ClaimedButUnrunnable as exc:
        return dict(entry, refused=exc.violation.message, claimed_but_unrunnable=True)
    except Exception as exc:  # an element type or model nobody takes here: refused, and said so
        return dict(entry, refused=message_line(exc))
    entry["ops_on_ep"] = sorted(info.assignment.get(provider, ()))
    entry["ops_elsewhere"] = sorted(op for ep, ops in info.assignment.items() if ep != provider for op in ops)
    if not entry["ops_on_ep"] and ctx.target.has_api("graph_assignment_info"):
        return entry  # the EP took none of it: where its values live is onnxruntime's choice, not the EP's
    with ctx.calling(Call("session memory infos")):
        entry["inputs"] = [memory_wire(memory_facts(ctx.ort, mi)) for mi in info.session.get_input_memory_infos()]
        entry["outputs"] = [memory_wire(memory_facts(ctx.ort, mi)) for mi in info.session.get_output_memory_infos()]
    if not dt.numpy_native or not run:
        return entry  # its inputs cannot be fed as numpy arrays: the session's memory is seen, no run tried
    feeds = small_integers(ctx.models.recipes[recipe].inputs, dt)
    entry["ran"] = True
    try:
        with ctx.calling(cpu_input_run()), ctx.running(info):
            info.session.run(None, feeds)
    except SilentRetry as retry:
        entry["run"] = retry.violation.message
    except Exception as exc:
        entry["run"] = message_line(exc)
    return entry
