"""Refusals people can act on: a refused request's message names what is wrong with it.

The requests are the refusal contracts' own (copy.bad-requests, update-inplace.rejects-mismatch,
iobinding.rejects-bad-output and iobinding.rebind-after-failure), taken from their families'
tables (`checks/context/bad_copies.py`, `bad_updates.py`, `bad_bindings.py`, shared with those
families) by the request names the YAML gives, so that a request added there is judged here by
naming it in specs/contracts/errors.yaml. What the message must name is derived from the same
definition: both sizes of a size mismatch, both element types of a type mismatch, both shapes
(or the dimension that differs, with both values) of a shape mismatch, the device it could not
reach. A request that is accepted is its refusal contract's failure, not this one's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from conformance.testbed import tensors
from conformance.calls import Call
from conformance.checks.registry import check
from conformance.checks.context import CheckContext, bad_bindings, bad_copies, bad_updates
from conformance.checks.context.snippets import Snippets
from conformance.checks.context import steps
from conformance.findings import NotApplicable, NotRun, Violation, message_line
from conformance import proofs

# How a message may write an element type: onnxruntime says 'tensor(float)', numpy 'float32',
# C 'float'. A name must stand as a word, so that 'float' is not read in 'float64'.
TYPE_WORDS = {"float32": ("float32", "float"), "float64": ("float64", "double"), "int32": ("int32", "int32_t", "int")}


def number(n: int) -> str:
    return rf"(?<![\w.]){n}(?![\w.])"


def shape_words(shape: tuple[int, ...]) -> str:
    """A shape as messages write it: [2, 3], {2,3}, (2, 3), 2x3; a one-dimensional one in brackets."""
    dims = r"\s*[,x]\s*".join(str(d) for d in shape)
    if len(shape) == 1:
        return rf"[\[{{(]\s*{dims}\s*,?\s*[\]}})]"
    return rf"(?<![\w.,]){dims}(?![\w.,])|[\[{{(]\s*{dims}\s*[\]}})]"


def type_words(dt: tensors.DType) -> str:
    return "|".join(rf"\b{re.escape(word)}\b" for word in TYPE_WORDS.get(dt.name, (dt.name,)))


@dataclass(frozen=True)
class Naming:
    """What a refusal's message must name (`what`, in words), and the ways of saying it: the
    message names it when every pattern of one of the `alternatives` occurs in it."""

    what: str
    alternatives: tuple[tuple[str, ...], ...]

    def said_in(self, message: str) -> bool:
        return any(all(re.search(p, message, re.IGNORECASE) for p in alternative) for alternative in self.alternatives)


def sizes(a: tuple[tensors.DType, tuple[int, ...]], b: tuple[tensors.DType, tuple[int, ...]], names=("source", "destination")) -> Naming:
    """Two sizes that differ: said as byte sizes, element counts or shapes, both of them."""
    (dt_a, shape_a), (dt_b, shape_b) = a, b
    count_a, count_b = tensors.element_count(shape_a), tensors.element_count(shape_b)
    bytes_a, bytes_b = dt_a.nbytes(count_a), dt_b.nbytes(count_b)
    ways = [(number(bytes_a), number(bytes_b)), (shape_words(shape_a), shape_words(shape_b))]
    if count_a != count_b:
        ways.append((number(count_a), number(count_b)))
    return Naming(f"both sizes ({names[0]} {bytes_a} bytes, {list(shape_a)}; {names[1]} {bytes_b} bytes, {list(shape_b)})", tuple(ways))


def types(a: tensors.DType, b: tensors.DType, names=("source", "destination")) -> Naming:
    return Naming(f"both element types ({names[0]} {a.name}, {names[1]} {b.name})", ((type_words(a), type_words(b)),))


def shapes(got: tuple[int, ...], expected: tuple[int, ...]) -> Naming:
    """Two shapes: both of them, or (for the same rank) the first dimension that differs with
    both its values, or (for another rank) both ranks, each said with got/expected."""
    ways = [(shape_words(got), shape_words(expected))]
    if len(got) == len(expected):
        index = next(i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e)
        ways.append((rf"got:?\s*{got[index]}\b", rf"expected:?\s*{expected[index]}\b"))
    else:
        ways.append((rf"got:?\s*{len(got)}\b", rf"expected:?\s*{len(expected)}\b"))
    return Naming(f"both shapes (bound {list(got)}, the model's {list(expected)})", tuple(ways))


# OrtDevice's device type codes (onnxruntime/core/framework/ortdevice.h), which onnxruntime's
# messages print as 'Device:[DeviceType:3 ...]'.
DEVICE_CODES = {"cpu": 0, "gpu": 1, "npu": 3}


def device(name: str) -> Naming:
    return Naming(f"the device it cannot reach ({name})", ((rf"\b{re.escape(name)}\b",), (rf"DeviceType:\s*{DEVICE_CODES[name]}\b",)))


def _judge(ctx: CheckContext, what: str, exc: Exception, naming: Naming, snippet: str, subject: str = "") -> Iterator[Violation]:
    """The refusal's message against what it must name."""
    text = str(exc)
    ctx.prove(proofs.REFUSED, message_line(exc)[:200])
    if naming.said_in(text):
        ctx.prove(proofs.NAMES, naming.what)
        return
    yield Violation(f"the refusal of {what} does not name {naming.what}: it says {message_line(exc)[:160]!r}",
                    expected=f"a message naming {naming.what}", actual=text.strip()[:400] or repr(exc), reproducer=snippet, subject=subject)


def _accepted(what: str, contract: str) -> NotApplicable:
    return NotApplicable(f"{what} was accepted, so there is no refusal to read (the failure of {contract})")


# --- copy_tensors ------------------------------------------------------------------------

def _copy_naming(request: str, sources, destinations) -> Naming:
    if request in ("size-mismatch", "fewer-elements"):
        return sizes(sources[0][1:], destinations[0][1:])
    if request == "other-element-size":  # the element counts agree: the types or the byte sizes say what is wrong
        return Naming(f"both element types or both sizes ({sources[0][1].name}, {destinations[0][1].name})",
                      types(sources[0][1], destinations[0][1]).alternatives + sizes(sources[0][1:], destinations[0][1:]).alternatives)
    if request == "type-mismatch":
        return types(sources[0][1], destinations[0][1])
    if request == "unequal-lists":
        return Naming(f"both list lengths ({len(sources)} sources, {len(destinations)} destinations)",
                      ((number(len(sources)), number(len(destinations))),))
    if request == "empty-lists":
        return Naming("that the lists are empty", ((r"\bempty\b|\bno (source|destination|tensor|value)s?\b|\bzero\b|(?<![\w.])0(?![\w.])",),))
    raise NotApplicable(f"a refusal of '{request}' has no quantity its message must name")


@check("errors.copy-refusal", apis=("copy_tensors",))
def copy_refusal(ctx: CheckContext, request: str, direction: str = "cpu>default") -> Iterator[Violation]:
    """Makes copy.bad-requests' request `request` and reads the refusal."""
    source_kind, destination_kind = direction.split(">")
    sources = bad_copies.ends(bad_copies.BAD_REQUESTS[request]["sources"], source_kind, destination_kind)
    destinations = bad_copies.ends(bad_copies.BAD_REQUESTS[request]["destinations"], source_kind, destination_kind)
    naming = _copy_naming(request, sources, destinations)
    sn, body = ctx.snippets, []
    for index, (kind, dt, shape) in enumerate(sources):
        body += [sn.values(f"values{index}", dt, shape, 8 + index), sn.place(f"source{index}", f"values{index}", kind, dt)]
    for index, (kind, dt, shape) in enumerate(destinations):
        body += [sn.sentinel(f"landing{index}", dt, shape, bad_copies.DESTINATION_SENTINEL), sn.place(f"destination{index}", f"landing{index}", kind, dt)]
    call = (f"ort.copy_tensors([{', '.join(f'source{i}' for i in range(len(sources)))}], "
            f"[{', '.join(f'destination{i}' for i in range(len(destinations)))}], None)")
    what = f"copy_tensors' bad request {request} ({direction})"
    snippet = _refusal_message_script(sn, what, body, call, naming.what, naming.alternatives)
    for pair in sorted({(s[0], d[0]) for s, d in zip(sources, destinations, strict=False)} or {(source_kind, destination_kind)}):
        bad_copies.valid_copy(ctx, *pair)  # a refusal of every copy says nothing of the request
    with ctx.precondition(f"placing the values of the request in {direction}"):
        src_values = [ctx.place(tensors.sample(dt, shp, seed=8), kind, dt) for kind, dt, shp in sources]
        dst_values = [ctx.place(tensors.sentinel(dt, shp, bad_copies.DESTINATION_SENTINEL), kind, dt) for kind, dt, shp in destinations]
    passed_through = request in bad_copies.PASSED_THROUGH and not (ctx.is_cpu_memory(source_kind) and ctx.is_cpu_memory(destination_kind))
    ctx.attempt(f"copy_tensors with a bad request ({request})", snippet)
    try:
        ctx.copy(src_values, dst_values, direction, note=f"bad request {request}")
    except Exception as exc:
        yield from _judge(ctx, what, exc, naming, snippet, subject="both" if passed_through else "")
    else:
        raise _accepted(what, "copy.bad-requests")


# --- update_inplace ----------------------------------------------------------------------

@check("errors.update-inplace-refusal")
def update_inplace_refusal(ctx: CheckContext, source: str, request: str, memory: str = "default") -> Iterator[Violation]:
    """Makes update-inplace.rejects-mismatch's request `request` into a float32 [2, 3] value."""
    bad_updates.require_source(ctx, source, memory)
    float32 = tensors.DTYPES["float32"]
    src_name, src_shape = bad_updates.MISMATCHES[request]
    src_dt = tensors.DTYPES[src_name]
    if src_dt.nbytes(tensors.element_count(src_shape)) == float32.nbytes(6) and src_dt != float32:
        naming = types(src_dt, float32)  # the sizes agree: only the element types can say what is wrong
    elif src_dt != float32:
        naming = Naming(f"both element types or both sizes ({src_dt.name} {list(src_shape)}, float32 [2, 3])",
                        types(src_dt, float32).alternatives + sizes((src_dt, src_shape), (float32, (2, 3))).alternatives)
    else:
        naming = sizes((src_dt, src_shape), (float32, (2, 3)))
    sn = ctx.snippets
    body = [sn.values("values", src_dt, src_shape, 3), sn.place("payload", "values", memory, src_dt) if source == "ortvalue" else "payload = values",
            sn.sentinel("landing", float32, (2, 3), steps.SENTINEL), sn.place("destination", "landing", memory, float32)]
    what = f"update_inplace({source}) of a {src_dt.name} {list(src_shape)} source into a float32 [2, 3] value ({request})"
    snippet = _refusal_message_script(sn, what, body, "destination.update_inplace(payload)", naming.what, naming.alternatives)
    ctx.attempt(f"placing valid values in {memory} memory", snippet)
    with ctx.precondition(f"placing valid values in {memory} memory"):
        values = tensors.sample(src_dt, src_shape, seed=3)
        payload = ctx.place(values, memory, src_dt) if source == "ortvalue" else values
        destination = ctx.place(tensors.sentinel(float32, (2, 3), steps.SENTINEL), memory, float32)
    ctx.attempt(f"update_inplace({source}) with a mismatched source ({request})", snippet)
    try:
        with ctx.calling(Call("update_inplace", f"{source}>{memory}", f"bad request {request}")):
            destination.update_inplace(payload)
    except Exception as exc:
        yield from _judge(ctx, what, exc, naming, snippet)
    else:
        raise _accepted(what, "update-inplace.rejects-mismatch")


# --- IOBinding ---------------------------------------------------------------------------

def _binding_naming(ctx: CheckContext, setup, request: str, binding: str) -> Naming:
    bad = bad_bindings.bad_value_type(setup, request)
    if request == "unreachable-device":
        return device(bad_bindings.unreachable_device(ctx))
    if request in ("wrong-shape-buffer", "wrong-shape-numpy"):
        return shapes(bad_bindings.WRONG_BUFFER_SHAPE, bad_bindings.BINDING_SHAPE)
    if request == "unknown-name":
        unknown = [bad_bindings.UNKNOWN_NAMES["input" if binding == "input" else "output"]]
        return Naming(f"the unknown name {unknown[0]!r}", ((re.escape(unknown[0]),),))
    if bad is None:
        raise NotApplicable(f"a refusal of '{request}' has no quantity its message must name")
    dt, shape = bad
    return types(dt, setup.dt, ("bound", "the model's")) if dt != setup.dt else shapes(shape, bad_bindings.BINDING_SHAPE)


@check("errors.iobinding-refusal")
def iobinding_refusal(ctx: CheckContext, request: str, binding: str, memory: str = "default") -> Iterator[Violation]:
    """Makes the bad binding of iobinding.rejects-bad-output (or, for an input,
    iobinding.rebind-after-failure) and reads run_with_iobinding's refusal."""
    # An input bound to a device onnxruntime cannot reach may abort the process instead of being
    # refused (onnxruntime 1.32 with plain CPU memory): the contract runs each case in a process
    # of its own (own_process), so that crash is this case's finding and takes no other case.
    setup = bad_bindings.binding_setup(ctx, memory)
    bad_bindings.require_valid_run(ctx, setup)
    naming = _binding_naming(ctx, setup, request, binding)
    io = setup.info.session.io_binding()
    if binding == "output":
        io.bind_ortvalue_input(setup.input_name, setup.source)
    else:
        io.bind_ortvalue_output(setup.output_name, bad_bindings.valid_output(ctx, setup))
    snippet = bad_bindings.binding_snippet(ctx, setup, binding, request, must_refuse=False)
    snippet = _refusal_message_ending(snippet, f"run_with_iobinding with a bad {binding} ({request})", naming.what, naming.alternatives)
    what = f"run_with_iobinding with a bad {binding} ({request})"
    try:
        ctx.attempt(f"binding the {binding} to {request} and running", snippet)
        bad_bindings.bind_bad(ctx, setup, io, binding, request)
        with ctx.calling(Call("run_with_iobinding", memory, f"bad {binding} {request}")):
            setup.info.session.run_with_iobinding(io)
    except (NotApplicable, NotRun):
        raise
    except Exception as exc:
        yield from _judge(ctx, what, exc, naming, snippet)
    else:
        raise _accepted(what, "iobinding.rejects-bad-output" if binding == "output" else "iobinding.rebind-after-failure")


# --- the reproducers ---------------------------------------------------------------------------


def _refusal_message_script(sn: Snippets, what: str, body: list[str], call: str, named: str, alternatives) -> str:
    """`call` (after the set-up lines `body`) is refused with a message that names `named`:
    every pattern of one of `alternatives` occurs in it. An accepted call exits 0 (its refusal
    contract's failure, not this one's)."""
    attempt = ["refusal = None", "try:", f"    {call}", "except Exception as error:", "    refusal = error"]
    return _refusal_message_ending(sn.script(f"the refusal of {what} names {named}", "\n".join(body + attempt)), what, named, alternatives)


def _refusal_message_ending(script: str, what: str, named: str, alternatives) -> str:
    """`script`, which leaves the exception it was refused with in `refusal` (None: accepted),
    followed by the assertion that the refusal's message names `named`."""
    return script.rstrip() + "\n" + "\n".join([
        "import re",
        f"if refusal is None:\n    print({f'accepted, so there is no refusal to read: {what}'!r})\n    raise SystemExit(0)",
        f"WAYS = {[list(a) for a in alternatives]!r}  # the message names it when every pattern of one way occurs in it",
        "message = str(refusal)",
        f"assert any(all(re.search(p, message, re.IGNORECASE) for p in way) for way in WAYS), "
        f"{f'the refusal of {what}: expected a message naming {named}, got: '!r} + repr(message)",
        f"print({f'the refusal of {what} names {named}:'!r}, message.splitlines()[0] if message.strip() else '')"]) + "\n"
