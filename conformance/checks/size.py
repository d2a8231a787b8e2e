"""Sizes: copies of tensors past 2 and 4 GiB, and copies that change their destination and
nothing else.

Both go through the C API (`size_blocks`): a device tensor can only be seen a chunk at a time,
through small tensors over parts of its memory, and a destination can only be given neighbours
in device memory by placing it inside a larger allocation. Both judge `size_blocks.copy_pair`
and use the EP's own copies of small chunks as the means of seeing it, as copy.direction does.

Those small tensors sit at a DEFAULT block's data pointer + an offset, which the public API does
not promise to mean anything: a child process asks first (`size_probe`). Where the EP's DEFAULT
data pointers are no addresses, large-copy copies whole tensors (host -> A -> B -> host, judged
in the host destination) and neighbours-untouched judges only guards in host memory.
"""

from __future__ import annotations

import time
from typing import Iterator

import numpy as np

from conformance.calls import Call
from conformance.checks import size_blocks, size_plan, size_probe, size_scripts
from conformance.checks.context import CheckContext
from conformance.checks.registry import check
from conformance.checks.size_blocks import GUARD, ELEMENT_TYPES, CPath, DeviceBlock, DeviceTensor, HostBlock
from conformance.checks.size_plan import CHUNK, PAST_END, LargeTensor, Region, boundaries_within, compared_bytes, large_tensors, pattern, regions
from conformance.checks.size_probe import OffsetProbe
from conformance.checks.size_room import large_copy_need, room_for, size_text
from conformance.findings import NotApplicable, NotRun, Violation, message_line
from conformance.testbed import tensors
from conformance.testbed.interop import capi as C
from conformance.testbed.interop import rig
from conformance import proofs

SENTINEL = 0x5A  # what a destination holds where it is compared, before the copy
PROBE_BYTES = 4096
Block = DeviceBlock | HostBlock | DeviceTensor


def _device_path(ctx: CheckContext) -> CPath:
    """The C path to the EP device under test; NotApplicable where its DEFAULT memory is CPU memory."""
    api, env, device = rig.c_device(ctx)
    with ctx.calling(Call("EpDevice_MemoryInfo", "default")):
        advertised = C.ep_device_memory(api, device, "default")
    if advertised is None or advertised["device_type"] == "cpu":
        where = "none" if advertised is None else f"{advertised['name']}, a CPU device's"
        raise NotApplicable(f"the EP device's DEFAULT memory is plain CPU memory ({where}): CopyTensors has no device end to reach")
    ctx.prove(proofs.MEMORY, {"default": f"{advertised['name']} ({advertised['device_type']}, {advertised['memory_type']})"})
    return CPath(ctx, api, env, device)


def _offset_views(ctx: CheckContext) -> OffsetProbe:
    """Whether a tensor wrapped at a DEFAULT block's data pointer + an offset is those bytes, as
    the probe in a child process found (once per worker and EP device), in the evidence. The
    child copies CPU > DEFAULT through the C API: where that call crashed or hung in an earlier
    check it is not made again (the quarantine stops the check here), and while the child runs
    it is the call in flight, so that a hang of it is that call's and quarantines it."""
    with ctx.calling(Call("CopyTensors", "cpu>default")):
        probe = size_probe.offset_views(ctx)
    ctx.prove(proofs.DEVICE_OFFSET_VIEWS, probe.evidence())
    return probe


def _block(path: CPath, kind: str, size: int, note: str = "") -> Block:
    return path.host_block(size) if kind == "cpu" else path.device_block(size, note)


def _masked(data: np.ndarray, tensor_bytes: int, half_used: bool, start: int) -> np.ndarray:
    """`data` (the bytes from `start`) with the high nibble of a 4-bit tensor's half-used last byte
    cleared: it holds no element, so a copy may leave it as it was."""
    last = tensor_bytes - 1 - start
    if half_used and 0 <= last < data.size:
        data = data.copy()
        data[last] &= 0x0F
    return data


# --- size.large-copy ----------------------------------------------------------------------------

@check("size.large-copy")
def large_copy(ctx: CheckContext) -> Iterator[Violation]:
    """Each tensor of `size_plan.large_tensors()` copied cpu>default, default>default (where the
    EP copies it) and default>cpu, between blocks of the largest one's size: three blocks are
    made for all copies, two held at a time, so that the case costs what touching its memory
    costs. A refused allocation is not_applicable with the figures; a refused copy, after the EP
    took both ends, is a violation."""
    items = large_tensors()
    block_bytes = max(item.nbytes for item in items)
    path = _device_path(ctx)
    try:
        views = _offset_views(ctx).addressable
        working = _working_directions(ctx, path, views)
        needed = large_copy_need(block_bytes, GUARD, CHUNK, views=views)
        what = f"copying {' and '.join(item.describe() for item in items)}"
        with room_for(ctx, needed, what) as room:
            caps = path.allocator_caps()
            figures = f"{size_text(needed)} needed at once; {room.describe()}; the allocator's cap: " + (
                ", ".join(f"{name} {size_text(value)}" for name, value in caps.items()) or "none reported")
            ctx.prove(proofs.MEMORY_FIGURES, figures)
            if caps and block_bytes + 2 * GUARD > min(caps.values()):
                raise NotApplicable(f"the EP's allocator caps one allocation below {size_text(block_bytes)}: {figures}")
            deadline, rounds = ctx.load.deadline(), 0
            while True:
                rounds += 1
                if views:
                    yield from _chain(ctx, path, items, working, block_bytes, figures, seed=rounds * 16)
                else:
                    for index, item in enumerate(items):
                        yield from _whole_chain(ctx, path, item, working, figures, seed=rounds * 16 + index)
                if not ctx.load.soaking or time.monotonic() >= deadline:
                    break
            ctx.prove(proofs.ROUNDS, rounds)
        yield from _staging_violations(path, ctx)
    finally:
        path.close()


def _large_copy_call(direction: str, item: LargeTensor) -> Call:
    """The copy of a large tensor as the quarantine knows it: CopyTensors in its direction, told
    apart by the tensor. One that crashed says nothing of copies of ordinary sizes, which the
    contracts after this one make (concurrency.copies, endurance.allocations: on the WebGPU plugin
    EP 0.4.0 an allocation past the device's maxBufferSize is accepted and its copy crashes, and
    with the bare key they were not_run). A crash of an ordinary copy still stops this check early:
    its 4 KiB probes and chunk copies are CopyTensors in their direction alone."""
    return Call("CopyTensors", direction, item.describe())


def _working_directions(ctx: CheckContext, path: CPath, views: bool) -> list[str]:
    """The directions of the chain the EP copies, tried on 4 KiB first (in blocks seen through
    offset views, or whole tensors where `views` is false): cpu>default and default>cpu are how
    the kit sees DEFAULT memory at all (NotApplicable where either is refused); default>default
    is left out of the chain where it is refused (the functional tier judges refusals)."""
    ctx.attempt("trying CopyTensors of 4 KiB in each direction before the large tensors")
    refused: dict[str, str] = {}

    def probe_block() -> DeviceBlock | DeviceTensor:
        if views:
            return path.device_block(PROBE_BYTES, "4 KiB probe")
        return path.device_tensor(ELEMENT_TYPES["uint8"], PROBE_BYTES, PROBE_BYTES, "4 KiB probe")
    try:
        first = probe_block()
        with path.staging("filling 4 KiB of device memory and reading it back", "cpu>default"):
            first.write(0, np.zeros(PROBE_BYTES, np.uint8))
            first.read(0, PROBE_BYTES)
    except C.OrtError as exc:
        raise NotApplicable(f"{exc.call} is refused on 4 KiB of DEFAULT memory ({exc.message}): the kit cannot fill or read DEFAULT "
                            "memory to judge a large copy (the functional tier judges refusals)") from None
    try:
        second = probe_block()
        with ctx.calling(Call("CopyTensors", "default>default")):
            path.stage(first.tensor(ELEMENT_TYPES["uint8"], PROBE_BYTES, PROBE_BYTES), second.tensor(ELEMENT_TYPES["uint8"], PROBE_BYTES, PROBE_BYTES))
        path.free(second)
    except C.OrtError as exc:
        refused["default>default"] = exc.message
    path.free(first)
    if refused:
        ctx.prove(proofs.REFUSED_ON_4KIB, refused)
    return [direction for direction in ("cpu>default", "default>default", "default>cpu") if direction not in refused]


def _allocate(ctx: CheckContext, path: CPath, kind: str, size: int, figures: str) -> Block:
    """A block for the chain; NotApplicable where the EP (or the host) refuses it, with the figures."""
    memory = "host" if kind == "cpu" else "DEFAULT"
    ctx.attempt(f"allocating {size_text(size)} of {memory} memory")
    started = time.monotonic()
    try:
        block = _block(path, kind, size, f"{size_text(size)} block")
        made = ctx.evidence.get(proofs.ALLOCATION_SECONDS) or {}
        ctx.prove_item(proofs.ALLOCATION_SECONDS, f"{memory} #{len(made) + 1}", round(time.monotonic() - started, 3))
        return block
    except C.OrtError as exc:
        if exc.call != "CreateTensorAsOrtValue":  # the block was made; laying its guard bytes failed
            raise NotRun(f"filling the guard bytes of a new block of DEFAULT memory failed ({exc}), so the large copy could not be tried") from None
        raise NotApplicable(f"the EP refused to allocate {size_text(size + 2 * GUARD)} of DEFAULT memory: {exc.message} "
                            f"({figures})") from None
    except MemoryError:
        raise NotApplicable(f"the host refused {size_text(size)} ({figures})") from None


def _chain(ctx: CheckContext, path: CPath, items: list[LargeTensor], working: list[str], block_bytes: int, figures: str,
           seed: int) -> Iterator[Violation]:
    """host -> A (cpu>default), A -> B (default>default), B -> host (default>cpu), each tensor in
    turn, each block freed as soon as the chain has passed it."""
    host = _allocate(ctx, path, "cpu", block_bytes, figures)
    first = _allocate(ctx, path, "default", block_bytes, figures)
    for index, item in enumerate(items):
        yield from _large_step(ctx, path, host, first, item, "cpu>default", seed + index)
    path.free(host)
    source = first
    if "default>default" in working:
        try:
            second = _allocate(ctx, path, "default", block_bytes, figures)
        except NotApplicable as refusal:  # a device that holds one large block, not two: the other directions still count
            ctx.prove_item(proofs.REFUSED, "default>default", str(refusal))
        else:
            for index, item in enumerate(items):
                yield from _large_step(ctx, path, first, second, item, "default>default", seed + 4 + index)
            path.free(first)
            source = second
    landing = _allocate(ctx, path, "cpu", block_bytes, figures)
    assert isinstance(landing, HostBlock)
    started = time.monotonic()
    landing.fill(SENTINEL, f"the {size_text(block_bytes)} host destination of default>cpu")
    ctx.prove(proofs.HOST_DESTINATION_TOUCHED_SECONDS, round(time.monotonic() - started, 3))
    for index, item in enumerate(items):
        yield from _large_step(ctx, path, source, landing, item, "default>cpu", seed + 8 + index)
    path.free(landing)
    path.free(source)


def _large_step(ctx: CheckContext, path: CPath, source: Block, destination: Block, item: LargeTensor, direction: str,
                seed: int) -> Iterator[Violation]:
    """One copy of `item` from the start of `source` to the start of `destination`, judged where
    `regions` says: the source's bytes there filled with `pattern`, the destination's with the
    sentinel, then compared; the blocks' guards and the bytes just past the tensor must be as
    they were."""
    every_byte = ctx.load.soaking
    plan = regions(item.nbytes, every_byte=every_byte, past_end=min(PAST_END, destination.size - item.nbytes))
    script = size_scripts.large(ctx, direction, item, plan, seed)
    ctx.attempt(f"filling the regions of {item.describe()} compared around CopyTensors {direction}", script)
    with ctx.precondition(f"filling the regions compared around CopyTensors {direction}"), \
            path.staging(f"filling the regions of {item.describe()} compared around CopyTensors {direction}", "cpu>default"):
        for region in plan:
            if region.inside:
                source.write(region.start, pattern(region.start, region.length, seed), "the source")
            destination.write(region.start, np.full(region.length, SENTINEL, np.uint8), "the destination")
    element_type = ELEMENT_TYPES[item.dtype]
    source_tensor = source.tensor(element_type, item.count, item.nbytes)
    destination_tensor = destination.tensor(element_type, item.count, item.nbytes)
    ctx.prove_item(proofs.TENSOR_SIZE_IN_BYTES, item.describe(), path.size_of(destination_tensor))
    ctx.attempt(f"CopyTensors {direction} of {item.describe()}", script)
    started = time.monotonic()
    try:
        with ctx.calling(_large_copy_call(direction, item)):
            size_blocks.copy_pair(path.api, path.env, source_tensor, destination_tensor)
    except C.OrtError as exc:
        yield Violation(f"CopyTensors {direction} of {item.describe()} failed, though the EP had allocated both ends: {exc.message}",
                        expected="the copy", actual=f"status {exc.code}: {exc.message}", reproducer=script)
        return
    finally:
        path.release(source_tensor)
        path.release(destination_tensor)
    seconds = time.monotonic() - started
    with ctx.precondition(f"reading the regions compared after CopyTensors {direction}"), \
            path.staging(f"reading the regions of {item.describe()} compared after CopyTensors {direction}", "default>cpu"):
        wrong, past = _compare_regions(ctx, path, destination, item, plan, seed, direction)
        outside = [f"the destination ({where})" for where in destination.outside()] + [f"the source ({where})" for where in source.outside()]
    if past:
        outside.insert(0, f"past the end of the destination, inside its block ({past})")
    if wrong:
        yield Violation(f"CopyTensors {direction} of {item.describe()} did not deliver the source bytes: {wrong}",
                        expected="every byte compared equal to the source's", actual=wrong, reproducer=script)
    if outside:
        yield Violation(f"CopyTensors {direction} of {item.describe()} wrote outside its tensors: {'; '.join(outside)}",
                        expected="the bytes past the end and the guard bytes unchanged", actual="; ".join(outside), reproducer=script)
    if not wrong and not outside:
        reached = ctx.evidence.get(proofs.LARGEST_BYTES) or 0
        ctx.prove(proofs.LARGEST_BYTES, max(reached, item.nbytes))
    ctx.prove_item(proofs.COPIES, f"{direction} {item.describe()}", {
        "seconds": round(seconds, 3), "bytes_compared": compared_bytes(plan),
        "checked": _what_was_checked(item, plan, every_byte)})


def _what_was_checked(item: LargeTensor, plan: list[Region], every_byte: bool) -> str:
    said = ["every byte" if every_byte else f"head, middle, {size_plan.SAMPLES} pages, tail, both sides of " + (
        " and ".join(f"2^{b.bit_length() - 1}" for b in boundaries_within(item.nbytes)) or "no boundary")]
    past = sum(region.length for region in plan if not region.inside)
    return ", ".join(said + ([f"{past} bytes past the end"] if past else []) + ["the guards around both blocks"])


def _compare_regions(ctx: CheckContext, path: CPath, destination: Block, item: LargeTensor, plan: list[Region], seed: int,
                     direction: str) -> tuple[str, str]:
    """What differs in the tensor's regions, and in the bytes just past its end ('' where nothing):
    how many bytes, and where the first is."""
    found: dict[bool, list] = {True: [0, 0, None], False: [0, 0, None]}  # inside: [compared, differing, first]
    for region in plan:
        got = destination.read(region.start, region.length, "the destination")
        expected = pattern(region.start, region.length, seed) if region.inside else np.full(region.length, SENTINEL, np.uint8)
        got = _masked(got, item.nbytes, item.half_used_last_byte, region.start)
        expected = _masked(expected, item.nbytes, item.half_used_last_byte, region.start)
        ctx.tally(proofs.BYTES_COMPARED, region.length)
        bad = np.flatnonzero(got != expected)
        tally = found[region.inside]
        tally[0] += region.length
        tally[1] += int(bad.size)
        if bad.size and tally[2] is None:
            tally[2] = (region.start + int(bad[0]), int(got[bad[0]]), int(expected[bad[0]]))
        path.tick(f"comparing the regions of {item.describe()} after CopyTensors {direction}")
    inside, past = found[True], found[False]
    said = ["", ""]
    if inside[2] is not None:
        at, got_byte, expected_byte = inside[2]
        left = " (the sentinel: left as it was)" if got_byte == SENTINEL else ""
        cut = next((b for b in (size_plan.UINT32_BOUNDARY, size_plan.INT32_BOUNDARY) if item.nbytes >= b and at == item.nbytes % b), None)
        hint = f"; {at} is the byte count {item.nbytes} modulo 2^{cut.bit_length() - 1}, where a count kept in 32 bits ends" if cut else ""
        said[0] = f"{inside[1]} of {inside[0]} bytes compared differ; the first at byte {at}: 0x{got_byte:02x} instead of 0x{expected_byte:02x}{left}{hint}"
    if past[2] is not None:
        at, got_byte, expected_byte = past[2]
        said[1] = (f"{past[1]} of the {past[0]} bytes just past it changed; the first at +{at - item.nbytes} (byte {at}): "
                   f"0x{got_byte:02x} instead of 0x{expected_byte:02x}")
    return said[0], said[1]


def _whole_chain(ctx: CheckContext, path: CPath, item: LargeTensor, working: list[str], figures: str, seed: int) -> Iterator[Violation]:
    """`item` through host -> A (cpu>default) [-> B (default>default)] -> host (default>cpu), each
    DEFAULT end a tensor the shared allocator makes whole, each copy of the whole tensor: the
    path where DEFAULT data pointers are no addresses. Every block is freed once the chain has
    passed it, so two large ones are held at most. The regions are compared in the host
    destination, with the bytes past it and its guards; bytes past a DEFAULT end cannot be seen."""
    every_byte, element_type = ctx.load.soaking, ELEMENT_TYPES[item.dtype]
    plan = regions(item.nbytes, every_byte=every_byte, past_end=PAST_END)
    script = size_scripts.large_whole(ctx, working, item, plan, seed)
    chain = f"the chain {' -> '.join(['host', *['DEFAULT'] * (len(working) - 1), 'host'])} of {item.describe()} (whole tensors)"
    host = _allocate(ctx, path, "cpu", item.nbytes, figures)
    ctx.attempt(f"filling the regions of {item.describe()} compared in the host source", script)
    for region in plan:
        if region.inside:
            host.write(region.start, pattern(region.start, region.length, seed))
    ends: list[Block] = [host]
    outside: list[str] = []
    try:
        for direction in working:
            if direction == "default>cpu":
                ends.append(_allocate(ctx, path, "cpu", item.nbytes + PAST_END, figures))
                assert isinstance(ends[-1], HostBlock)
                ends[-1].fill(SENTINEL, f"the host destination of {item.describe()}")
            else:
                ends.append(_whole_device(ctx, path, item, figures))
            source, destination = ends[-2], ends[-1]
            ctx.attempt(f"CopyTensors {direction} of {item.describe()}, whole", script)
            started = time.monotonic()
            try:
                with ctx.calling(_large_copy_call(direction, item)):
                    size_blocks.copy_pair(path.api, path.env, source.tensor(element_type, item.count, item.nbytes),
                                          destination.tensor(element_type, item.count, item.nbytes))
            except C.OrtError as exc:
                yield Violation(f"CopyTensors {direction} of {item.describe()} failed, though the EP had allocated both ends: {exc.message}",
                                expected="the copy", actual=f"status {exc.code}: {exc.message}", reproducer=script)
                return
            ctx.prove_item(proofs.COPIES, f"{direction} {item.describe()}", {"seconds": round(time.monotonic() - started, 3), "whole_tensor": True})
            if isinstance(destination, DeviceTensor):
                ctx.prove_item(proofs.TENSOR_SIZE_IN_BYTES, item.describe(), path.size_of(destination.value))
            outside += [f"the host source ({where})" for where in source.outside()]
            path.free(source)
        landing = ends[-1]
        wrong, past = _compare_regions(ctx, path, landing, item, plan, seed, "the chain")
        outside += [f"the host destination ({where})" for where in landing.outside()]
    finally:
        for end in ends:
            path.free(end)
    if past:
        outside.insert(0, f"past the end of the host destination, inside its block ({past})")
    if wrong:
        yield Violation(f"{chain} did not deliver the source bytes: {wrong}", expected="every byte compared equal to the source's",
                        actual=wrong, reproducer=script)
    if outside:
        yield Violation(f"{chain} wrote outside its host tensors: {'; '.join(outside)}",
                        expected="the bytes past the end and the guard bytes unchanged", actual="; ".join(outside), reproducer=script)
    if not wrong and not outside:
        ctx.prove(proofs.LARGEST_BYTES, max(ctx.evidence.get(proofs.LARGEST_BYTES) or 0, item.nbytes))
    ctx.prove_item(proofs.CHAINS, chain, {"bytes_compared": compared_bytes(plan), "checked": _what_was_checked(item, plan, every_byte).replace(
        "the guards around both blocks", "the guards around the host source and destination; bytes past a DEFAULT tensor and guards in "
        "DEFAULT memory cannot be placed where its data pointers are no addresses, so they are not checked")})


def _whole_device(ctx: CheckContext, path: CPath, item: LargeTensor, figures: str) -> DeviceTensor:
    """A DEFAULT tensor of `item`'s type and count; NotApplicable where the EP refuses it, with the figures."""
    ctx.attempt(f"allocating {size_text(item.nbytes)} of DEFAULT memory, whole")
    started = time.monotonic()
    try:
        made = path.device_tensor(ELEMENT_TYPES[item.dtype], item.count, item.nbytes, f"{size_text(item.nbytes)}, whole")
        timed = ctx.evidence.get(proofs.ALLOCATION_SECONDS) or {}
        ctx.prove_item(proofs.ALLOCATION_SECONDS, f"DEFAULT #{len(timed) + 1}", round(time.monotonic() - started, 3))
        return made
    except C.OrtError as exc:
        raise NotApplicable(f"the EP refused to allocate {size_text(item.nbytes)} of DEFAULT memory: {exc.message} ({figures})") from None


def _staging_violations(path: CPath, ctx: CheckContext) -> Iterator[Violation]:
    """The EP's copies that filled and read the blocks wrote past a host buffer: its defect too."""
    ctx.prove(proofs.STAGING_CANARIES_INTACT, not path.staging_overruns)
    if path.staging_overruns:
        shown = "; ".join(path.staging_overruns[:3])
        yield Violation(f"a CopyTensors of a chunk wrote outside its host buffer: {shown}", expected="the canaries intact", actual=shown)


# --- size.neighbours-untouched ------------------------------------------------------------------

@check("size.neighbours-untouched")
def neighbours_untouched(ctx: CheckContext, direction: str, dtype: str, shape: str) -> Iterator[Violation]:
    """One copy between tensors placed inside larger blocks of their memory (device memory: a
    block of the shared allocator, host memory: one the kit maps, each with guard bytes around
    the tensor); everything but the destination's bytes must be as it was, the source's
    included. Under a soak, again with other bytes until the deadline."""
    dt = tensors.DTYPES[dtype]
    item = LargeTensor(dtype, tensors.element_count(tensors.parse_shape(shape, dt)))
    path = _device_path(ctx)
    deadline, rounds = ctx.load.deadline(), 0
    try:
        probe = _offset_views(ctx)
        if not probe.addressable and direction.split(">")[1] != "cpu":
            raise NotApplicable(f"the EP's DEFAULT data pointers are not addresses: a tensor wrapped at block + 64 of DEFAULT memory is not "
                                f"those bytes ({probe.outcome}); guard bytes in device memory cannot be placed around a DEFAULT destination. "
                                "CPU-side guards are still judged (default>cpu)")
        if not probe.addressable:
            ctx.prove(proofs.DEVICE_GUARDS, "none: the DEFAULT source is a tensor of its own, copied whole (its data pointer is no address); "
                                       "the guards around the host destination are judged")
        while True:
            rounds += 1
            found = list(_neighbours_round(ctx, path, direction, item, probe.addressable, seed=2 + rounds))
            yield from found
            if found or not ctx.load.soaking or time.monotonic() >= deadline:
                break
        yield from _staging_violations(path, ctx)
        ctx.prove(proofs.GUARD_BYTES_EACH_SIDE, GUARD)
        ctx.prove(proofs.TENSOR, {"dtype": dtype, "elements": item.count, "bytes": item.nbytes, "last_byte_half_used": item.half_used_last_byte})
        ctx.prove(proofs.ROUNDS, rounds)
    finally:
        path.close()


def _neighbours_round(ctx: CheckContext, path: CPath, direction: str, item: LargeTensor, views: bool, seed: int) -> Iterator[Violation]:
    source_kind, destination_kind = direction.split(">")
    script = size_scripts.neighbours(ctx, direction, item, seed) if views else size_scripts.neighbours_whole(ctx, item, seed)
    ctx.attempt(f"placing {item.describe()} between guard bytes for CopyTensors {direction}", script)
    with ctx.precondition(f"placing the source in {source_kind} memory and the destination in {destination_kind} memory between guard bytes"), \
            path.staging("filling the source and destination", "cpu>default"):
        source: Block = _block(path, source_kind, item.nbytes) if views or source_kind == "cpu" else \
            path.device_tensor(ELEMENT_TYPES[item.dtype], item.count, item.nbytes, f"{item.describe()}, whole")
        source.write(0, pattern(0, item.nbytes, seed), "the source")
        destination = _block(path, destination_kind, item.nbytes)
        destination.write(0, np.full(item.nbytes, SENTINEL, np.uint8), "the destination")
        source_tensor = source.tensor(ELEMENT_TYPES[item.dtype], item.count, item.nbytes)
        destination_tensor = destination.tensor(ELEMENT_TYPES[item.dtype], item.count, item.nbytes)
    ctx.attempt(f"CopyTensors {direction} of {item.describe()} between guard bytes", script)
    try:
        with ctx.calling(Call("CopyTensors", direction)):
            size_blocks.copy_pair(path.api, path.env, source_tensor, destination_tensor)
    except C.OrtError as exc:
        raise NotApplicable(f"CopyTensors {direction} is refused here ({message_line(exc)}): no copy to judge "
                            "(the functional tier judges refusals)") from None
    finally:
        path.release(source_tensor)
        path.release(destination_tensor)
    with ctx.precondition("reading the destination, the source and their guard bytes back"), path.staging("reading them back", "default>cpu"):
        got = destination.read(0, item.nbytes, "the destination")
        after_source = source.read(0, item.nbytes, "the source")
        outside = {"destination": destination.outside(), "source": source.outside()}
    path.free(source)
    path.free(destination)
    yield from _neighbour_violations(ctx, item, direction, seed, got, after_source, outside, script)


def _neighbour_violations(ctx: CheckContext, item: LargeTensor, direction: str, seed: int, got: np.ndarray, after_source: np.ndarray,
                          outside: dict[str, list[str]], script: str) -> Iterator[Violation]:
    source_kind, destination_kind = direction.split(">")
    expected = _masked(pattern(0, item.nbytes, seed), item.nbytes, item.half_used_last_byte, 0)
    diff = ctx.compare(expected, _masked(got, item.nbytes, item.half_used_last_byte, 0))
    if diff:
        yield Violation(f"CopyTensors {direction} of {item.describe()} did not deliver the source bytes: {diff.describe()}",
                        expected="byte-identical destination", actual=diff.describe(), reproducer=script)
    if outside["destination"]:
        shown = "; ".join(outside["destination"])
        yield Violation(f"CopyTensors {direction} of {item.describe()} wrote outside its destination in {destination_kind} memory: {shown}",
                        expected="the guard bytes around the destination unchanged", actual=shown, reproducer=script)
    source_diff = ctx.compare(pattern(0, item.nbytes, seed), after_source)
    if source_diff or outside["source"]:
        shown = "; ".join(outside["source"] + ([f"its bytes: {source_diff.describe()}"] if source_diff else []))
        yield Violation(f"CopyTensors {direction} of {item.describe()} changed its source or the bytes around it in {source_kind} memory: "
                        f"{shown}", expected="the source and its guard bytes unchanged", actual=shown, reproducer=script)
