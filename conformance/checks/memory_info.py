"""Memory infos: where session inputs and outputs live, what the EP device advertises."""

from __future__ import annotations

from typing import Any, Iterator

from conformance.testbed import tensors
from conformance.checks.registry import check
from conformance.facts import MemoryFacts
from conformance.findings import NotApplicable, Violation
from conformance.checks.context.sessions import SESSION_SHAPE  # the session checks' shape: their sessions serve these too
from conformance.testbed.eps import DEVICE_NAMES, memory_facts, memory_label
from conformance.checks.context import CheckContext
from conformance import proofs


def _same_memory(a: MemoryFacts | None, b: MemoryFacts | None) -> bool:
    return a is not None and b is not None and (a.name, a.vendor_id, a.device_id, a.device_mem_type) == (b.name, b.vendor_id, b.device_id, b.device_mem_type)


def _session_memory(ctx: CheckContext, recipe: str, dtype: str, which: str):
    """The session's `which` values with their memory facts; the memory infos seen are the
    evidence. A model without a node, or without such values, shows nothing of the EP: where
    onnxruntime places a value no node of the EP touches is its own choice (not_applicable)."""
    if not ctx.models.recipes[recipe].ops:
        raise NotApplicable(f"model '{recipe}' has no node: the EP places none of its values, onnxruntime does")
    info = ctx.session_on_ep(recipe, tensors.DTYPES[dtype], SESSION_SHAPE)
    ctx.require_nodes_on_ep(info)
    values = info.session.get_inputs() if which == "input" else info.session.get_outputs()
    ctx.attempt(f"reading the session's {which} memory infos", _snippet(ctx, info, which))
    infos = info.session.get_input_memory_infos() if which == "input" else info.session.get_output_memory_infos()
    seen = [(v.name, memory_facts(ctx.ort, mi)) for v, mi in zip(values, infos, strict=False)]
    if not seen:
        raise NotApplicable(f"model '{recipe}' has no session {which}")
    for name, facts in seen:
        ctx.prove_item(proofs.MEMORY, f"{which} {name}", memory_label(facts))
    return info, seen


def _snippet(ctx: CheckContext, info, which: str) -> str:
    getter = "get_input_memory_infos" if which == "input" else "get_output_memory_infos"
    return ctx.snippets.script(f"where the session's {which}s live (compare with the expected memory)",
                               f"{ctx.session_snippet(info.model_path)}\nprint([(m.name, m.device_mem_type, m.device_vendor_id) for m in s.{getter}()])")


@check("memory-info.session-inputs", apis=("session_memory_infos",))
def session_inputs(ctx: CheckContext, recipe: str, dtype: str) -> Iterator[Violation]:
    info, inputs = _session_memory(ctx, recipe, dtype, "input")
    default = ctx.memory_facts("default")
    # The rule the contract holds where its sources disagree (specs/contracts/memory-info.yaml,
    # `contested`): for a plugin EP with HOST_ACCESSIBLE memory on onnxruntime >= 1.27, which
    # places CPU inputs in that memory (PR 28037), the EP device's own HOST_ACCESSIBLE memory
    # is lawful too; the runner says whether it holds for this EP device and build.
    own_host = ctx.memory_facts("host_accessible") if ctx.contested_rule_holds else None
    if ctx.contested_rule_holds:
        ctx.prove(proofs.RULE, "contested: plain CPU, DEFAULT or the EP device's own HOST_ACCESSIBLE memory")
    allowed = "plain CPU memory or " + ctx.describe_memory("default") + (
        " or " + ctx.describe_memory("host_accessible") + " (the rule held for plugin EPs on onnxruntime >= 1.27)" if own_host else "")
    for name, facts in inputs:
        if _same_memory(facts, own_host):
            continue
        if facts is None:
            continue  # plain CPU memory, lawful for an input
        if facts.device_mem_type == "host_accessible" or not (facts.on_cpu or _same_memory(facts, default)):
            yield Violation(
                f"session input '{name}' lives in {memory_label(facts)}",
                expected=allowed,
                actual=memory_label(facts),
                memory={"input": facts, "default": default},
                reproducer=_snippet(ctx, info, "input"),
            )


@check("memory-info.session-outputs", apis=("session_memory_infos",))
def session_outputs(ctx: CheckContext, recipe: str, dtype: str) -> Iterator[Violation]:
    info, outputs = _session_memory(ctx, recipe, dtype, "output")
    allowed = [ctx.memory_facts("default"), ctx.memory_facts("host_accessible")]
    for name, facts in outputs:
        plain_cpu = facts is None or (facts.on_cpu and facts.device_mem_type == "default")
        if not (plain_cpu or any(_same_memory(facts, a) for a in allowed)):
            yield Violation(
                f"session output '{name}' lives in {memory_label(facts)}",
                expected="plain CPU memory, " + ctx.describe_memory("default") + " or " + ctx.describe_memory("host_accessible"),
                actual=memory_label(facts),
                memory={"output": facts, "default": allowed[0], "host_accessible": allowed[1]},
                reproducer=_snippet(ctx, info, "output"),
            )


@check("memory-info.cpu-default-io", apis=("session_memory_infos",))
def cpu_default_io(ctx: CheckContext, recipe: str, dtype: str) -> Iterator[Violation]:
    for which in ("input", "output"):
        info, values = _session_memory(ctx, recipe, dtype, which)
        for name, facts in values:
            if facts is not None and not facts.on_cpu:
                yield Violation(
                    f"session {which} '{name}' of an EP device without DEFAULT memory lives in {memory_label(facts)}",
                    expected="plain CPU memory",
                    actual=memory_label(facts),
                    memory={which: facts},
                    reproducer=_snippet(ctx, info, which),
                )


@check("memory-info.allocatable")
def allocatable(ctx: CheckContext, memory: str) -> Iterator[Violation]:
    facts = ctx.memory_facts(memory)
    if facts is None:
        raise NotApplicable(f"the EP device advertises no {memory.upper()} memory info")
    dtype, shape = tensors.DTYPES["uint8"], (4, 1024)
    snippet = ctx.snippets.script(f"allocating from the {memory.upper()} memory info",
                                  "v = works('allocating', ort.OrtValue.ortvalue_from_shape_and_type, [4, 1024], np.uint8"
                                  + ("" if ctx.memory_expr(memory) == "None" else f", memory_info={ctx.memory_expr(memory)}")
                                  + ")\nassert v.data_ptr(), 'the allocator returned a null buffer'")
    ctx.attempt(f"allocating from the {memory.upper()} memory info", snippet)
    try:
        value = ctx.allocate(memory, dtype, shape)
    except Exception as exc:
        yield Violation(f"allocating from the advertised {memory.upper()} memory info failed: {exc}", expected="an OrtValue", actual=str(exc),
                        memory={memory: facts}, reproducer=snippet)
        return
    ctx.prove(proofs.MEMORY, {memory: memory_label(facts)})
    ctx.prove(proofs.ALLOCATED_BYTES, value.tensor_size_in_bytes())
    if value.data_ptr() == 0:
        yield Violation("the allocator returned a null buffer", memory={memory: facts}, reproducer=snippet)
    if memory == "host_accessible":
        try:
            view = value.numpy()
        except Exception as exc:
            yield Violation(f"HOST_ACCESSIBLE memory is not CPU-visible: numpy() failed: {exc}", memory={memory: facts}, reproducer=snippet + "\nv.numpy()")
            return
        ctx.prove(proofs.NUMPY_ALIASES, view.ctypes.data == value.data_ptr())
        if view.ctypes.data != value.data_ptr():
            yield Violation(
                "numpy() of a HOST_ACCESSIBLE value is a copy, not a view of the memory",
                expected=f"0x{value.data_ptr():x}", actual=f"0x{view.ctypes.data:x}", memory={memory: facts},
                reproducer=snippet + "\nprint(hex(v.data_ptr()), hex(v.numpy().ctypes.data))",
            )


@check("memory-info.tensor-size")
def tensor_size(ctx: CheckContext, dtype: str, shape: str) -> Iterator[Violation]:
    dt = tensors.DTYPES[dtype]
    shp = tensors.parse_shape(shape, dt)
    with ctx.precondition(f"allocating a {dt.name} {list(shp)} value in DEFAULT memory"):
        value = ctx.allocate("default", dt, shp)
    expected, reported = dt.nbytes(tensors.element_count(shp)), value.tensor_size_in_bytes()
    ctx.prove(proofs.TENSOR_SIZE_IN_BYTES, {"reported": reported, "expected": expected})
    if reported != expected:
        memory = ctx.memory_expr("default")
        snippet = ctx.snippets.script(f"tensor_size_in_bytes() of a {dt.name} {list(shp)} value in DEFAULT memory",
                                      f"v = ort.OrtValue.ortvalue_from_shape_and_type({list(shp)}, {dt.onnx_type}"
                                      + ("" if memory == "None" else f", memory_info={memory}") + ")\n"
                                      f"assert v.tensor_size_in_bytes() == {expected}, f'expected {expected} bytes, got {{v.tensor_size_in_bytes()}}'\n"
                                      "print(v.tensor_size_in_bytes())")
        yield Violation(f"tensor_size_in_bytes() of a {list(shp)} {dt.name} value in DEFAULT memory is {reported}", expected=f"{expected} bytes",
                        actual=f"{reported} bytes", memory={"default": ctx.memory_facts("default")}, reproducer=snippet)


def _declared(memory) -> dict[str, Any] | None:
    if memory is None:
        return None
    return {k: v for k, v in (("device_type", memory.device_type), ("vendor_id", memory.vendor_id), ("name", memory.name)) if v is not None}


@check("memory-info.declaration")
def declaration(ctx: CheckContext) -> Iterator[Violation]:
    spec = ctx.target.spec
    if spec is None:
        raise NotApplicable("no vendor declaration (EP spec) was given for this EP")
    hardware = ctx.facts.hardware
    ctx.prove_item(proofs.COMPARED, "hardware", hardware.type if spec.device_type and hardware else "not declared")
    if spec.device_type and hardware and hardware.type != spec.device_type:
        yield Violation("the EP device's hardware type differs from the declaration",
                        expected=spec.device_type, actual=hardware.type,
                        reproducer=ctx.snippets.script("the EP device's hardware type",
                                                       f"assert str(dev.device.type).lower().endswith({spec.device_type!r}), dev.device.type"))
    for kind, memory in (("default", spec.default_memory), ("host_accessible", spec.host_accessible)):
        declared, advertised = _declared(memory), ctx.memory_facts(kind)
        snippet = _declaration_snippet(ctx, kind, declared)
        ctx.prove_item(proofs.COMPARED, kind, memory_label(advertised) if advertised else "none")
        if declared is None and advertised is None:
            continue
        if declared is None or advertised is None:
            yield Violation(
                f"{kind.upper()} memory: the declaration and the build disagree",
                expected="none (plain CPU memory)" if declared is None else str(declared),
                actual="none (memory_info is None)" if advertised is None else memory_label(advertised),
                memory={kind: advertised}, reproducer=snippet,
            )
            continue
        differs = {k: (v, getattr(advertised, k)) for k, v in declared.items() if getattr(advertised, k) != v}
        if differs:
            yield Violation(
                f"{kind.upper()} memory differs from the declaration in {', '.join(differs)}",
                expected=", ".join(f"{k}={v!r}" for k, (v, _) in differs.items()),
                actual=", ".join(f"{k}={a!r}" for k, (_, a) in differs.items()),
                memory={kind: advertised}, reproducer=snippet,
            )


def _declaration_snippet(ctx: CheckContext, kind: str, declared: dict[str, Any] | None) -> str:
    """A script asserting the EP device's `kind` memory info is what the declaration says (its
    name and vendor id; none at all where none is declared)."""
    lines = [f"m = dev.memory_info(ort.OrtDeviceMemoryType.{kind.upper()})"]
    if declared is None:
        lines.append(f"assert m is None, f'{kind.upper()} memory: expected none (as declared), got {{m.name}} vendor {{m.device_vendor_id:#x}}'")
    else:
        wanted = {key: declared[key] for key in ("device_type", "name", "vendor_id") if key in declared}
        lines += [f"assert m is not None, {f'expected {kind.upper()} memory {wanted}, got none'!r}",
                  # the device type as the kit reads it (conformance.testbed.eps.memory_device_type): what a value allocated there says
                  "device = ort.OrtValue.ortvalue_from_shape_and_type([1], np.uint8, memory_info=m).device_name().lower()",
                  f"advertised = {{'device_type': {DEVICE_NAMES!r}.get(device, device), 'name': m.name, 'vendor_id': m.device_vendor_id}}",
                  f"expected = {wanted!r}",
                  "assert {k: advertised[k] for k in expected} == expected, f'expected {expected}, got {advertised}'"]
    return ctx.snippets.script(f"the advertised {kind.upper()} memory is the declared one", "\n".join(lines))
