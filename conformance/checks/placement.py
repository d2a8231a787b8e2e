"""Placement: the EP's kernels receive their inputs in the memory the EP declared, at every
partition boundary of a session (a graph input, a CPU node's output, a value that went from the
EP to the CPU and back).

Where the EP records the memory of every input its kernels receive, the kit reads that record
back: the EP device's metadata `conformance.kernel_input_log` names an environment variable
which, set to a file's path, makes every kernel call append one line per input, `<node> <input
index> <device type> <memory type> <vendor id>` (refdev does; see refdev/README.md). The check
sets it around its own run only, in the worker, which is the process that loaded the EP. Where
the EP keeps no such record, a wrong placement on an EP of device memory shows in the values (a
kernel that reads CPU memory as its device's, or the reverse, computes garbage); on an EP whose
DEFAULT memory is CPU memory nothing more can be shown than the other session contracts show.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np

from conformance.testbed import tensors
from conformance.checks.registry import check
from conformance.checks.context.reference import reference, small_integers
from conformance.checks.context.sessions import SESSION_SHAPE, cpu_input_run
from conformance.checks.context import steps
from conformance.checks.context.snippets import Snippets
from conformance.findings import NotApplicable, NotRun, Violation
from conformance.checks.context import CheckContext
from conformance import proofs

LOG_KEY = "conformance.kernel_input_log"  # the EP device's metadata key naming the variable


def declared(ctx: CheckContext) -> tuple[str, str, int]:
    """(device type, memory type, vendor id) of the memory the EP's kernels declared for their
    inputs: the EP device's DEFAULT memory, or plain CPU memory where it advertises none."""
    facts = ctx.memory_facts("default")
    if facts is None:
        return "cpu", "default", 0
    return facts.device_type, "default", facts.vendor_id


def parse_log(text: str) -> list[tuple[str, int, str, str, int]]:
    """The record's lines as (node, input index, device type, memory type, vendor id)."""
    entries = []
    for line in text.splitlines():
        node, index, device_type, memory_type, vendor = line.rsplit(" ", 4)
        entries.append((node, int(index), device_type, memory_type, int(vendor, 16)))
    return entries


@check("placement.kernel-inputs")
def kernel_inputs(ctx: CheckContext, recipe: str) -> Iterator[Violation]:
    float32 = tensors.DTYPES["float32"]
    info = ctx.session(recipe, float32, SESSION_SHAPE)
    elsewhere = ctx.require_nodes_on_ep(info)
    boundary = {"add": "a graph input", "sub_relu": "a CPU node's output", "relu_neg_add": "a value from the EP through the CPU back to the EP"}[recipe]
    if recipe != "add" and not elsewhere:
        raise NotApplicable(f"{ctx.target.provider} took every node of '{recipe}': no partition boundary at {boundary}")
    variable = ctx.facts.ep_metadata.get(LOG_KEY, "")
    expected = declared(ctx)
    if not variable and ctx.is_cpu_memory("default"):
        raise NotApplicable(f"{ctx.target.provider} keeps no record of its kernels' inputs ({LOG_KEY}) and its DEFAULT memory is CPU memory: "
                            "a misplaced input would not show in the values")
    inputs = ctx.models.recipes[recipe].inputs
    feeds = small_integers(inputs, float32)
    snippet = _placement_script(ctx.snippets, info.model_path, recipe, inputs, SESSION_SHAPE, variable, expected)
    ctx.attempt(f"running model '{recipe}' and reading where its kernels' inputs were", snippet)
    with tempfile.TemporaryDirectory() as folder:
        log = os.path.join(folder, "inputs.log")
        if variable:
            os.environ[variable] = log
        try:
            # The same call as any run with its inputs in CPU memory: one that crashed before is not made again.
            # A run that raises is the EP's failure (session.nodes-on-ep's) or cannot be told from it: not_run, not onnxruntime's.
            with ctx.precondition(f"running model '{recipe}' on {ctx.target.provider}"), \
                    ctx.calling(cpu_input_run()), ctx.running(info):
                (output,) = info.session.run(None, feeds)
        finally:
            os.environ.pop(variable, None)
        entries = parse_log(Path(log).read_text()) if variable and os.path.exists(log) else []
    diff = ctx.compare(tensors.payload(reference(recipe, feeds).astype(np.float32), float32), tensors.payload(np.asarray(output), float32))
    if diff and variable:
        # The record says where the inputs were; wrong values are the EP's kernels or copies,
        # which session.nodes-on-ep reports: nothing here is onnxruntime's placement.
        raise NotRun(f"model '{recipe}' computed wrong values on {ctx.target.provider} ({diff.describe()}): "
                     "its kernels or copies are broken, so where onnxruntime placed the inputs shows nothing")
    if diff:
        yield Violation(f"model '{recipe}' computed wrong values at {boundary}: {diff.describe()}; the EP keeps no record of its kernels' "
                        "inputs, so the kit cannot tell a misplaced input (onnxruntime's) from a wrong kernel (the EP's): counted against both",
                        expected="numpy's result", actual=diff.describe(), reproducer=snippet, subject="both")
        return
    if not variable:
        ctx.prove(proofs.PLACEMENT_SHOWN_BY, "values")
        return
    if not entries:
        raise NotRun(f"{ctx.target.provider} names {variable} as the record of its kernels' inputs ({LOG_KEY}) but recorded none")
    ctx.prove(proofs.KERNEL_INPUTS_RECORDED, len(entries))
    ctx.prove(proofs.DECLARED_PLACEMENT, " ".join(map(str, expected[:2])) + f" 0x{expected[2]:X}")
    for node, index, *where in entries:
        if tuple(where) != expected:
            yield Violation(f"the kernel of node {node} received input {index} in {where[0]} {where[1]} memory of vendor 0x{where[2]:X} "
                            f"at {boundary}, not in the memory the EP declared",
                            expected=f"{expected[0]} {expected[1]} vendor 0x{expected[2]:X}", actual=f"{where[0]} {where[1]} vendor 0x{where[2]:X}",
                            memory={"default": ctx.memory_facts("default")}, reproducer=snippet)


# --- the reproducer ---------------------------------------------------------------------------


def _placement_script(sn: Snippets, model_path: Path | None, recipe: str, inputs, shape: tuple[int, ...], variable: str,
              expected: tuple[str, str, int]) -> str:
    """A run of the model gives numpy's result and, where the EP records its kernels' inputs
    (the environment variable `variable`), every input was in the `expected` memory
    (device type, memory type, vendor id)."""
    reference = steps.REFERENCES[recipe].format(*(f"feeds[{name!r}]" for name in inputs))
    body = ["log = os.path.join(os.environ.get('TMPDIR', '/tmp'), f'kernel-inputs-{os.getpid()}.log')",
            "if os.path.exists(log):\n    os.remove(log)"]
    if variable:
        body.append(f"os.environ[{variable!r}] = log  # the EP appends '<node> <input> <device type> <memory type> <vendor id>' per kernel input")
    body += [sn.session_snippet(model_path), "rng = np.random.default_rng(11)",
             f"feeds = {{name: rng.integers(-8, 9, size={list(shape)}).astype(np.float32) for name in {list(inputs)!r}}}",
             f"expected = ({reference}).astype(np.float32)",
             "(output,) = works('running the session', s.run, None, feeds)",
             f"same_bytes('model {recipe} against numpy', expected, np.asarray(output))"]
    if variable:
        want = f"{expected[0]} {expected[1]} 0x{expected[2]:X}"
        body += ["lines = open(log).read().splitlines() if os.path.exists(log) else []",
                 "assert lines, 'the EP recorded no kernel input'",
                 "for line in lines:",
                 "    node, index, where = line.split(' ', 2)",
                 f"    assert where == {want!r}, f'node {{node}} input {{index}}: expected its input in {want}, got {{where}}'",
                 "print(len(lines), 'kernel inputs, all in', " + repr(want) + ")"]
    return sn.script(f"the kernels of model '{recipe}' on {sn.under_test.target.provider} receive their inputs in the memory it declared", "\n".join(body))
