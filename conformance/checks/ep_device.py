"""The EP device as onnxruntime's own EP conformance suite sees an EP (onnxruntime PR 28968,
`ep_conformance_invariants.h`), through the public API: the EP's name, its read-only queries, and
the memory infos its allocators are keyed by. Each check names the invariant it carries over;
`conformance/catalogue/upstream_invariants.yaml` maps every invariant of that suite onto the
contracts, and says why the public API cannot reach the others."""

from __future__ import annotations

from typing import Any, Iterator

from conformance.calls import Call
from conformance.checks.registry import check
from conformance.checks.context.sessions import SESSION_SHAPE
from conformance.findings import NotApplicable, Violation
from conformance.testbed import tensors
from conformance.testbed.eps import memory_label
from conformance.checks.context import CheckContext
from conformance import proofs


def _devices(ctx: CheckContext) -> list:
    """The EP's OrtEpDevices as a fresh get_ep_devices() call lists them."""
    with ctx.calling(Call("get_ep_devices")):
        return [d for d in ctx.ort.get_ep_devices() if d.ep_name == ctx.target.provider]


def _require_device(ctx: CheckContext) -> None:
    if ctx.device is None:
        raise NotApplicable(f"{ctx.target.provider} has no OrtEpDevice in this build: it has no EP device to query")


def _script(ctx: CheckContext, title: str, body: str) -> str:
    return ctx.snippets.script(title, body)


@check("ep-device.name-stable", apis=("ep_devices",))
def name_stable(ctx: CheckContext) -> Iterator[Violation]:
    """PR 28968 CheckTypeIsNonEmptyAndStable: the name is non-empty, the same on repeated
    queries and on independent instances (here: two get_ep_devices() calls, two sessions)."""
    _require_device(ctx)
    provider, index = ctx.target.provider, ctx.device_index
    snippet = _script(ctx, f"the EP's name is non-empty and stable: {provider}", f"""\
first = [d.ep_name for d in ort.get_ep_devices() if d.ep_name == {provider!r}]
second = [d.ep_name for d in ort.get_ep_devices() if d.ep_name == {provider!r}]
assert {provider!r} and first == second, f'get_ep_devices(): expected the same EP devices twice, got {{first}} then {{second}}'""")
    ctx.attempt("listing the EP devices twice", snippet)
    first, second = _devices(ctx), _devices(ctx)
    if not provider.strip():
        yield Violation("the EP's name is empty", expected="a non-empty name", actual=repr(provider), reproducer=snippet)
    if len(first) != len(second) or len(second) <= index:
        yield Violation(f"get_ep_devices() lists {len(first)} then {len(second)} devices of {provider}",
                        expected=f"the same devices on every call (at least {index + 1})", actual=f"{len(first)}, then {len(second)}", reproducer=snippet)
        return
    ctx.prove(proofs.EP_DEVICES_LISTED, [len(first), len(second)])
    # Two sessions made for the EP: each is an instance of the EP from the same source.
    model, path = ctx.models.get("relu", tensors.DTYPES["float32"], SESSION_SHAPE)
    session_snippet = _script(ctx, f"two sessions made for {provider} both name it among their providers",
                              ctx.session_snippet(path) + f"\nassert s.get_providers()[0] == {provider!r}, s.get_providers()")
    ctx.attempt("creating two sessions for the EP", session_snippet)
    providers = []
    for _ in range(2):
        with ctx.calling(Call("InferenceSession creation")):
            providers.append(list(ctx.create_session(model).get_providers()))
    ctx.prove(proofs.SESSION_PROVIDERS, providers)
    for listed in providers:
        if not listed or listed[0] != provider:
            yield Violation(f"a session made for {provider} lists its providers as {listed}",
                            expected=f"{provider} first, under the name its EP devices have", actual=repr(listed), reproducer=session_snippet)


def _queries(device) -> dict[str, Any]:
    """Every read-only query of an OrtEpDevice and its hardware device, as plain data."""
    hardware = device.device
    return {"ep_name": device.ep_name, "ep_vendor": device.ep_vendor, "ep_metadata": dict(device.ep_metadata),
            "ep_options": dict(device.ep_options), "hardware.type": hardware.type.name, "hardware.vendor": hardware.vendor,
            "hardware.vendor_id": int(hardware.vendor_id), "hardware.device_id": int(hardware.device_id),
            "hardware.metadata": dict(hardware.metadata)}


@check("ep-device.queries-stable", apis=("ep_devices",))
def queries_stable(ctx: CheckContext) -> Iterator[Violation]:
    """PR 28968 CheckMetadataQueriesAreCallable: the read-only queries answer, and answer the
    same on another listing of the same device."""
    _require_device(ctx)
    provider, index = ctx.target.provider, ctx.device_index
    snippet = _script(ctx, f"the read-only queries of {provider}'s device {index} answer the same twice", f"""\
def queries(d):
    h = d.device
    return (d.ep_name, d.ep_vendor, dict(d.ep_metadata), dict(d.ep_options), h.type.name, h.vendor, h.vendor_id, h.device_id, dict(h.metadata))
first, second = (queries([d for d in ort.get_ep_devices() if d.ep_name == {provider!r}][{index}]) for _ in range(2))
assert first == second, f'expected the same answers, got {{first}} then {{second}}'""")
    ctx.attempt(f"reading the queries of {provider}'s device {index}, twice", snippet)
    answers = []
    for _ in range(2):
        devices = _devices(ctx)
        if len(devices) <= index:
            raise NotApplicable(f"a second listing has no device {index} of {provider} (ep-device.name-stable's failure)")
        try:
            with ctx.calling(Call("OrtEpDevice queries")):
                answers.append(_queries(devices[index]))
        except Exception as exc:  # a query that raises is this contract broken
            yield Violation(f"a read-only query of {provider}'s EP device failed: {exc}", expected="an answer", actual=str(exc), reproducer=snippet)
            return
    ctx.prove(proofs.QUERIES, sorted(answers[0]))
    differs = {key: (answers[0][key], answers[1][key]) for key in answers[0] if answers[0][key] != answers[1][key]}
    if differs:
        yield Violation(f"{provider}'s EP device answers {', '.join(differs)} differently on a second listing",
                        expected=", ".join(f"{k}={a!r}" for k, (a, _) in differs.items()),
                        actual=", ".join(f"{k}={b!r}" for k, (_, b) in differs.items()), reproducer=snippet)


ALLOCATIONS = 2
ALLOCATION_BYTES = 256  # as PR 28968's CheckPreferredAllocatorsAllocateUsableMemory


@check("memory-info.allocator-well-formed", apis=("memory_info_alloc",))
def allocator_well_formed(ctx: CheckContext, memory: str) -> Iterator[Violation]:
    """PR 28968 CheckPreferredAllocatorInfoIsConsistent, CheckPreferredAllocatorsAreNonNullAndRepeatable
    and CheckPreferredAllocatorsAllocateUsableMemory: the memory info names itself, has a valid
    allocator type and the memory type it was asked for; allocating from it works again and
    again, each time a buffer of its own; CPU-accessible memory holds what the CPU writes."""
    ctx.require_memory(memory)
    info, facts = ctx.memory_info(memory), ctx.memory_facts(memory)
    if info is None:
        raise NotApplicable(f"the EP device advertises no {memory.upper()} memory info")
    kind = memory.upper()
    snippet = _script(ctx, f"the {kind} memory info is well formed and allocates again and again", f"""\
m = {kind}
assert m.name and 'INVALID' not in m.allocator_type.name.upper() and m.device_mem_type.name == {kind!r}, \\
    f'expected a name, a valid allocator type and memory type {kind}, got {{(m.name, m.allocator_type.name, m.device_mem_type.name)}}'
values = [works('allocating', ort.OrtValue.ortvalue_from_shape_and_type, [{ALLOCATION_BYTES}], np.uint8, memory_info=m) for _ in range({ALLOCATIONS})]
addresses = [v.data_ptr() for v in values]
assert all(addresses) and len(set(addresses)) == len(addresses), f'expected {ALLOCATIONS} distinct non-null buffers, got {{[hex(a) for a in addresses]}}'""")
    ctx.attempt(f"reading the {kind} memory info and allocating from it {ALLOCATIONS} times", snippet)
    said = {"name": info.name, "allocator_type": info.allocator_type.name, "device_mem_type": info.device_mem_type.name}
    ctx.prove(proofs.MEMORY_INFO, said)
    # a valid allocator type: any but onnxruntime's OrtInvalidAllocator (ORT_INVALID_ALLOCATOR in Python)
    if not info.name or "INVALID" in info.allocator_type.name.upper() or info.device_mem_type.name != kind:
        yield Violation(f"the {kind} memory info is malformed: {said}", expected=f"a name, a valid allocator type, memory type {kind}",
                        actual=repr(said), memory={memory: facts}, reproducer=snippet)
    values = []
    for attempt in range(ALLOCATIONS):
        try:
            values.append(ctx.allocate(memory, tensors.DTYPES["uint8"], (ALLOCATION_BYTES,)))
        except Exception as exc:
            yield Violation(f"allocation {attempt + 1} from the {kind} memory info failed: {exc}", expected="a value", actual=str(exc),
                            memory={memory: facts}, reproducer=snippet)
            return
    addresses = [value.data_ptr() for value in values]
    ctx.prove(proofs.ALLOCATIONS, [hex(a) for a in addresses])
    if not all(addresses) or len(set(addresses)) != len(addresses):
        yield Violation(f"{ALLOCATIONS} allocations from the {kind} memory info gave {[hex(a) for a in addresses]}",
                        expected=f"{ALLOCATIONS} distinct non-null buffers", actual=repr([hex(a) for a in addresses]), memory={memory: facts},
                        reproducer=snippet)
        return
    if memory == "host_accessible":
        yield from _usable_from_the_cpu(ctx, values, memory_label(facts), snippet)


def _usable_from_the_cpu(ctx: CheckContext, values, label: str, snippet: str) -> Iterator[Violation]:
    """CPU-accessible memory holds what the CPU writes into it (PR 28968 writes 0xAB and reads it back)."""
    import ctypes

    for value in values:
        ctypes.memset(value.data_ptr(), 0xAB, ALLOCATION_BYTES)
    seen = [ctypes.string_at(value.data_ptr(), ALLOCATION_BYTES) for value in values]
    ctx.prove(proofs.CPU_WRITTEN_BYTES, ALLOCATION_BYTES * len(values))
    if any(bytes_ != b"\xab" * ALLOCATION_BYTES for bytes_ in seen):
        yield Violation(f"{label}: bytes the CPU wrote read back otherwise", expected="0xab throughout",
                        actual=repr([b[:8].hex() for b in seen]), reproducer=snippet + "\n" + f"""\
for v in values:
    ctypes.memset(v.data_ptr(), 0xAB, {ALLOCATION_BYTES})
    assert ctypes.string_at(v.data_ptr(), {ALLOCATION_BYTES}) == b'\\xab' * {ALLOCATION_BYTES}, 'the CPU reads back otherwise'""")
