"""The EPContext model a session writes with ep.context_enable=1: onnxruntime's own invariant
that an EP with nothing compiled reports no EPContext node (CheckEpContextNodesEmptyOnFreshEp,
ep_conformance_invariants.h), seen through the public API, where EPContext nodes show only in
the model the session writes.

What holds for any lawful EP: an EP that compiles nothing (kernels registered) writes no
EPContext node, and a compiling one writes them only in place of nodes it took, each naming
that EP as its `source` where it names one; every node it did not take stays as it was, and the
model keeps its graph inputs and outputs. An EP may also refuse to write one (an error status
at session creation): the case is then not_applicable, with its message.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from typing import Iterator

from conformance.calls import Call
from conformance.checks.context import CheckContext
from conformance.checks.context.sessions import SESSION_SHAPE
from conformance.checks.registry import check
from conformance.findings import NotApplicable, NotRun, Violation, first_line
from conformance.testbed import onnx_wire, tensors
from conformance import proofs

EP_CONTEXT_OP = "EPContext"
SCRIPT_MODEL = "ep_context_ctx.onnx"  # where a reproducer has its session write the model, beside it


def context_config(path: str) -> dict[str, str]:
    """The session config entries that make onnxruntime write an EPContext model at `path`
    (EP-Context-Design: ep.context_enable, ep.context_file_path, which a model given as bytes
    needs, ep.context_embed_mode 1: the context inside the model)."""
    return {"ep.context_enable": "1", "ep.context_file_path": path, "ep.context_embed_mode": "1"}


def read_context_model(path: str) -> onnx_wire.Graph | None:
    """The graph of the model the session wrote at `path`, or None where it wrote none
    (onnxruntime writes no file when no EP made an EPContext node). Read without onnx, whose
    import takes 0.9 s with ml_dtypes 0.7 (onnx_wire); NotAModel where the file is not one."""
    if not os.path.exists(path):
        return None
    with open(path, "rb") as file:
        return onnx_wire.read_graph(file.read())


def source_of(node: onnx_wire.Node) -> str | None:
    source = node.strings.get("source")
    return source.decode(errors="replace") if source is not None else None


@check("session.ep-context-model")
def ep_context_model(ctx: CheckContext, recipe: str) -> Iterator[Violation]:
    """A session of model `recipe` on the EP with ep.context_enable=1: the EPContext nodes of the
    model it writes are no more than the nodes the EP took (none where it took none), each names
    the EP where it names a source, the nodes it did not take are all there, and the graph's
    inputs and outputs are kept."""
    provider = ctx.target.provider
    dt = tensors.DTYPES["float32"]
    model, path = ctx.models.get(recipe, dt, SESSION_SHAPE)
    original = onnx_wire.read_graph(model)
    ctx.attempt(f"a session of model '{recipe}' that writes an EPContext model", ctx.snippets.script(
        f"the EPContext model a session of '{recipe}' on {provider} writes", _script(ctx, path, provider)))
    with tempfile.TemporaryDirectory(prefix="ep-context-") as folder:
        written = os.path.join(folder, "model_ctx.onnx")
        try:
            with ctx.calling(Call("InferenceSession creation", note="ep.context_enable=1")):
                session = ctx.create_session(model, config=context_config(written))
        except Exception as exc:  # the EP declined to write a context model, which it may
            raise NotApplicable(f"a session with ep.context_enable=1 was refused, which an EP that writes no EPContext model may do: "
                                f"{first_line(exc)}") from None
        assignment = ctx.assignment_of(session)
        if not assignment:
            raise NotRun("this onnxruntime cannot say which nodes the EP took (session.record_ep_graph_assignment_info, 1.24+)")
        taken = assignment.get(provider, [])
        try:
            context = read_context_model(written)
        except onnx_wire.NotAModel as exc:
            yield Violation(f"the EPContext model the session wrote is not an ONNX model: {exc}", expected="an ONNX model", actual=str(exc))
            return
    nodes = list(context.nodes) if context is not None else []
    marked = [node for node in nodes if node.op_type == EP_CONTEXT_OP]
    ctx.prove(proofs.TAKEN, sorted(taken))
    ctx.prove(proofs.EP_CONTEXT_NODES, len(marked))
    if len(marked) > len(taken):
        what = "took no node" if not taken else f"took {len(taken)} ({', '.join(sorted(taken))})"
        yield Violation(f"the EPContext model has {len(marked)} EPContext nodes, but {provider} {what}: an EPContext node stands only for "
                        "nodes the EP compiled", expected=f"at most {len(taken)} EPContext nodes", actual=f"{len(marked)}")
    foreign = sorted({source for source in map(source_of, marked) if source is not None and source != provider})
    if foreign:
        yield Violation(f"EPContext nodes written by a session on {provider} name another EP as their source: {', '.join(foreign)}",
                        expected=f"source {provider!r} (the EP that made them, which takes them back on load)", actual=", ".join(foreign))
    if context is None:
        return
    left = Counter(node.op_type for node in original.nodes) - Counter(taken)
    missing = left - Counter(node.op_type for node in nodes)
    if missing:
        yield Violation(f"nodes {provider} did not take are missing from the EPContext model: {', '.join(sorted(missing.elements()))}",
                        expected="every node the EP did not take, as it was", actual=f"missing: {sorted(missing.elements())}")
    ends = [(sorted(graph.inputs), sorted(graph.outputs)) for graph in (original, context)]
    if ends[0] != ends[1]:
        yield Violation("the EPContext model does not keep the model's graph inputs and outputs",
                        expected=f"inputs, outputs {ends[0]}", actual=f"{ends[1]}")


def _script(ctx: CheckContext, model_path, provider: str) -> str:
    session = ctx.snippets.session_snippet(model_path, config=context_config(SCRIPT_MODEL))
    return f'''import onnx
from collections import Counter
if os.path.exists({SCRIPT_MODEL!r}):
    os.remove({SCRIPT_MODEL!r})  # the session writes it anew
{session}
taken = [n.op_type for g in s.get_provider_graph_assignment_info() if g.ep_name == {provider!r} for n in g.get_nodes()]
nodes = list(onnx.load({SCRIPT_MODEL!r}).graph.node) if os.path.exists({SCRIPT_MODEL!r}) else []
marked = [n for n in nodes if n.op_type == {EP_CONTEXT_OP!r}]
assert len(marked) <= len(taken), f"{{len(marked)}} EPContext nodes for the {{len(taken)}} nodes {provider} took: {{taken}}"
sources = {{a.s.decode() for n in marked for a in n.attribute if a.name == "source"}}
assert sources <= {{{provider!r}}}, f"EPContext nodes name another EP as their source: {{sources}}"
if nodes:
    original = onnx.load({str(model_path)!r})
    missing = Counter(n.op_type for n in original.graph.node) - Counter(taken) - Counter(n.op_type for n in nodes)
    assert not missing, f"nodes {provider} did not take are missing from the EPContext model: {{sorted(missing.elements())}}"
print(f"the EPContext model holds {{len(marked)}} EPContext nodes for the {{len(taken)}} nodes {provider} took")'''
