"""The size family's reproducers: standalone scripts on the C path (ctypes over the wheel's
libonnxruntime.so, as the checks use it) that place the source and destination as the check
did (inside larger blocks with guard bytes, from the shared allocator for DEFAULT memory), fill
the same regions with the same bytes, make the one copy, and assert the same comparisons.

Where the EP's DEFAULT data pointers are no addresses (`size_probe`), the scripts take the path
the check took: DEFAULT tensors made whole by the shared allocator and copied whole, guard bytes
in host memory only (`large_whole`, `neighbours_whole`); `offset_probe` is the probe itself.
"""

from __future__ import annotations

import inspect

from conformance.checks import size_plan
from conformance.checks.size_blocks import GUARD, ELEMENT_TYPES
from conformance.checks.size_plan import CHUNK, LargeTensor, Region
from conformance.checks.size_room import SPARE_BYTES, large_copy_need

SENTINEL = 0x5A


def _header(ctx) -> str:
    """The C API set up (`Snippets.c_api_setup`: `device` the EP device under test, `info` its
    DEFAULT memory, `allocator`, `cpu_info`), and `Block`: bytes of DEFAULT or host memory between
    guard bytes, written and read a chunk at a time, with a tensor over their start."""
    return "import mmap\n" + ctx.snippets.c_api_setup() + f"""release = ctypes.CFUNCTYPE(None, P)(api[SLOT['ReleaseValue']])
U8, CHUNK, GUARD, SENTINEL = 2, {CHUNK}, {GUARD}, {SENTINEL:#x}
def tensor_at(address, nbytes, count, type_, device):  # a tensor over memory that is already there (no copy)
    v = P()
    call('CreateTensorWithDataAsOrtValue', info if device else cpu_info, P(address), ctypes.c_size_t(nbytes), (ctypes.c_int64 * 1)(count),
         ctypes.c_size_t(1), ctypes.c_int(type_), ctypes.byref(v))
    return v
def device_tensor(count, type_):  # a tensor the shared allocator makes whole: its data pointer is never offset
    v = P()
    call('CreateTensorAsOrtValue', allocator, (ctypes.c_int64 * 1)(count), ctypes.c_size_t(1), ctypes.c_int(type_), ctypes.byref(v))
    return v
def copy(src, dst):
    call('CopyTensors', env, (P * 1)(src), (P * 1)(dst), None, ctypes.c_size_t(1))
class Block:  # `size` bytes between GUARD canary bytes on each side, of DEFAULT memory (the shared allocator's) or host memory
    def __init__(self, size, device):
        self.size, self.device = size, device
        if device:
            self.value, data = P(), P()
            call('CreateTensorAsOrtValue', allocator, (ctypes.c_int64 * 1)(size + 2 * GUARD), ctypes.c_size_t(1), ctypes.c_int(U8), ctypes.byref(self.value))
            call('GetTensorMutableData', self.value, ctypes.byref(data))
            self.start = data.value + GUARD
        else:  # mapped here, not numpy's: its huge pages can stall a first touch of gigabytes
            self.host = np.frombuffer(mmap.mmap(-1, size + 2 * GUARD), np.uint8)
            self.start = self.host.ctypes.data + GUARD
        self.write(-GUARD, canaries(0, GUARD))
        self.write(size, canaries(size + GUARD, size + 2 * GUARD))
    def write(self, offset, data):  # a chunk at a time: CopyTensors CPU > DEFAULT for device memory
        if not self.device:
            self.host[GUARD + offset:GUARD + offset + data.size] = data
            return
        for at in range(0, data.size, CHUNK):
            piece = np.ascontiguousarray(data[at:at + CHUNK])
            s, d = tensor_at(piece.ctypes.data, piece.size, piece.size, U8, False), tensor_at(self.start + offset + at, piece.size, piece.size, U8, True)
            copy(s, d)
            release(s), release(d)
    def read(self, offset, length):  # a chunk at a time: CopyTensors DEFAULT > CPU for device memory
        if not self.device:
            return self.host[GUARD + offset:GUARD + offset + length].copy()
        out = np.empty(length, np.uint8)
        for at in range(0, length, CHUNK):
            n = min(CHUNK, length - at)
            landing = np.full(n, 0xA5, np.uint8)
            s, d = tensor_at(self.start + offset + at, n, n, U8, True), tensor_at(landing.ctypes.data, n, n, U8, False)
            copy(s, d)
            release(s), release(d)
            out[at:at + n] = landing
        return out
    def tensor(self, count, type_, nbytes):  # a tensor over the block's first bytes
        return tensor_at(self.start, nbytes, count, type_, self.device)
    def guards_intact(self, what):
        before = np.count_nonzero(self.read(-GUARD, GUARD) != canaries(0, GUARD))
        after = np.count_nonzero(self.read(self.size, GUARD) != canaries(self.size + GUARD, self.size + 2 * GUARD))
        assert not before and not after, (f'{{what}}: expected the {{GUARD}} guard bytes on each side unchanged, '
                                          f'got {{before}} changed before its start, {{after}} after its end')
TABLE_BYTES = {size_plan.TABLE_BYTES}
{inspect.getsource(size_plan.pattern)}
def masked(data, start):  # a 4-bit tensor of odd length: the high nibble of its last byte holds no element
    if HALF_USED and start <= NBYTES - 1 < start + data.size:
        data = data.copy()
        data[NBYTES - 1 - start] &= 0x0F
    return data
"""


def _regions_literal(plan: list[Region], nbytes: int) -> str:
    inside = [region for region in plan if region.inside]
    if len(inside) > 64:  # every byte: the chunks, not listed one by one
        text = f"[(s, min(CHUNK, {nbytes} - s), True) for s in range(0, {nbytes}, CHUNK)]"
    else:
        text = repr([(region.start, region.length, True) for region in inside])
    past = [(region.start, region.length, False) for region in plan if not region.inside]
    return f"{text} + {past!r}" if past else text


def _body(direction: str, item: LargeTensor, plan: list[Region], seed: int, *, whole_source: bool) -> str:
    source_kind, destination_kind = direction.split(">")
    block = max(region.end for region in plan)
    what = f"CopyTensors {direction} of {item.describe()}"
    lines = [f"TYPE, COUNT, NBYTES, SEED, HALF_USED = {ELEMENT_TYPES[item.dtype]}, {item.count}, {item.nbytes}, {seed}, {item.half_used_last_byte}",
             f"REGIONS = {_regions_literal(plan, item.nbytes)}  # (start, length, inside the tensor): where the run compared",
             f"source, destination = Block({block}, {source_kind != 'cpu'}), Block({block}, {destination_kind != 'cpu'})",
             "for start, length, inside in REGIONS:",
             "    if inside:",
             "        source.write(start, pattern(start, length, SEED))",
             "    destination.write(start, np.full(length, SENTINEL, np.uint8))",
             f"works({what!r}, copy, source.tensor(COUNT, TYPE, NBYTES), destination.tensor(COUNT, TYPE, NBYTES))",
             "for start, length, inside in REGIONS:",
             "    want = pattern(start, length, SEED) if inside else np.full(length, SENTINEL, np.uint8)",
             f"    same_bytes(f'{direction}: bytes {{start}}..{{start + length}}' + ('' if inside else ' (past the tensor)'), masked(want, start), "
             "masked(destination.read(start, length), start))",
             f"destination.guards_intact({('the destination of ' + what)!r})",
             f"source.guards_intact({('the source of ' + what)!r})"]
    if whole_source:
        lines.append(f"same_bytes('the source after {what}', pattern(0, NBYTES, SEED), source.read(0, NBYTES))")
    lines.append(f"print({(what + ': right, and nothing around it changed').__repr__()})")
    return "\n".join(lines)


def _memory_required(block: int, views: bool) -> str:
    needed = large_copy_need(block, GUARD, CHUNK, views=views)
    return (f"signal.alarm(int(os.environ.get('REPRO_TIMEOUT_SECONDS', '1800')))  # gigabytes take a while\n"
            f"available = int(next(l.split()[1] for l in open('/proc/meminfo') if l.startswith('MemAvailable:'))) * 1024\n"
            f"precondition(available >= {needed + SPARE_BYTES}, 'available memory (MemAvailable)', "
            f"'{needed + SPARE_BYTES} bytes (two blocks of {block} bytes, and 1 GiB to spare)', available)\n")


def large(ctx, direction: str, item: LargeTensor, plan: list[Region], seed: int) -> str:
    """The script of one large copy: this machine's memory required first (exit 2 where short)."""
    block = max(region.end for region in plan)
    return ctx.snippets.script(f"CopyTensors {direction} of {item.describe()} delivers the bytes at both 32-bit boundaries and its end",
                               _memory_required(block, True) + _header(ctx) + _body(direction, item, plan, seed, whole_source=False))


def large_whole(ctx, directions: list[str], item: LargeTensor, plan: list[Region], seed: int) -> str:
    """The script of one chain of whole-tensor copies (host -> DEFAULT [-> DEFAULT] -> host), as
    the check makes it where DEFAULT data pointers are no addresses: the regions compared in the
    host destination, its guard bytes and the bytes past it in its host block."""
    block = max(region.end for region in plan)
    chain = " -> ".join(["host", *(["DEFAULT"] * len(directions))[:len(directions) - 1], "host"])
    what = f"CopyTensors {', '.join(directions)} of {item.describe()}"
    lines = [f"TYPE, COUNT, NBYTES, SEED, HALF_USED = {ELEMENT_TYPES[item.dtype]}, {item.count}, {item.nbytes}, {seed}, {item.half_used_last_byte}",
             f"REGIONS = {_regions_literal(plan, item.nbytes)}  # (start, length, inside the tensor): where the run compared",
             f"host = Block({block}, False)",
             "for start, length, inside in REGIONS:",
             "    if inside:",
             "        host.write(start, pattern(start, length, SEED))",
             "first = device_tensor(COUNT, TYPE)",
             "works('CopyTensors cpu>default', copy, host.tensor(COUNT, TYPE, NBYTES), first)",
             "del host  # each block freed once the chain has passed it: two large ones at most"]
    if "default>default" in directions:
        lines += ["second = device_tensor(COUNT, TYPE)", "works('CopyTensors default>default', copy, first, second)",
                  "release(first)", "first = second"]
    lines += [f"landing = Block({block}, False)", f"landing.host[GUARD:GUARD + {block}] = SENTINEL",
              "works('CopyTensors default>cpu', copy, first, landing.tensor(COUNT, TYPE, NBYTES))",
              "release(first)",
              "for start, length, inside in REGIONS:",
              "    want = pattern(start, length, SEED) if inside else np.full(length, SENTINEL, np.uint8)",
              f"    same_bytes(f'{chain}: bytes {{start}}..{{start + length}}' + ('' if inside else ' (past the tensor)'), masked(want, start), "
              "masked(landing.read(start, length), start))",
              f"landing.guards_intact({('the host destination of ' + what)!r})",
              f"print({(what + ': right at every region compared, and nothing around the host destination changed').__repr__()})"]
    return ctx.snippets.script(f"{what} delivers the bytes at both 32-bit boundaries and its end, whole tensors only",
                               _memory_required(block, False) + _header(ctx) + "\n".join(lines))


def neighbours(ctx, direction: str, item: LargeTensor, seed: int) -> str:
    """The script of one copy between tensors inside larger blocks: the destination right, its
    guard bytes and the source unchanged."""
    plan = [Region(0, item.nbytes)]
    return ctx.snippets.script(f"CopyTensors {direction} of {item.describe()} changes its destination and nothing else",
                               _header(ctx) + _body(direction, item, plan, seed, whole_source=True))


def neighbours_whole(ctx, item: LargeTensor, seed: int) -> str:
    """The script of one default>cpu copy from a DEFAULT tensor made whole (no guard bytes in device
    memory where its data pointers are no addresses) into host memory between guard bytes."""
    what = f"CopyTensors default>cpu of {item.describe()}"
    lines = [f"TYPE, COUNT, NBYTES, SEED, HALF_USED = {ELEMENT_TYPES[item.dtype]}, {item.count}, {item.nbytes}, {seed}, {item.half_used_last_byte}",
             "held = np.ascontiguousarray(pattern(0, NBYTES, SEED))",
             "source = device_tensor(COUNT, TYPE)",
             "works('filling the DEFAULT source whole', copy, tensor_at(held.ctypes.data, NBYTES, COUNT, TYPE, False), source)",
             "destination = Block(NBYTES, False)",
             "destination.write(0, np.full(NBYTES, SENTINEL, np.uint8))",
             f"works({what!r}, copy, source, destination.tensor(COUNT, TYPE, NBYTES))",
             "same_bytes('the host destination', masked(pattern(0, NBYTES, SEED), 0), masked(destination.read(0, NBYTES), 0))",
             f"destination.guards_intact({('the host destination of ' + what)!r})",
             "back = np.zeros(NBYTES, np.uint8)",
             "works('reading the DEFAULT source back whole', copy, source, tensor_at(back.ctypes.data, NBYTES, COUNT, TYPE, False))",
             "same_bytes('the source after the copy', pattern(0, NBYTES, SEED), back)",
             f"print({(what + ': right, and nothing around its host destination changed').__repr__()})"]
    return ctx.snippets.script(f"{what} changes its destination and nothing else (guard bytes in host memory)", _header(ctx) + "\n".join(lines))


def offset_probe(ctx) -> str:
    """The script `size_probe` runs in a child: a tensor wrapped at a DEFAULT block's data pointer
    + 64 must be those bytes of the block (exit 0), as the offset views need."""
    body = """BLOCK, AT, N = 256, 64, 64
block, data = P(), P()
call('CreateTensorAsOrtValue', allocator, (ctypes.c_int64 * 1)(BLOCK), ctypes.c_size_t(1), ctypes.c_int(U8), ctypes.byref(block))
call('GetTensorMutableData', block, ctypes.byref(data))
before = np.full(BLOCK, 0x3C, np.uint8)
copy(tensor_at(before.ctypes.data, BLOCK, BLOCK, U8, False), block)  # the whole block: no offset
mark = (np.arange(N, dtype=np.uint8) * 3 + 1).astype(np.uint8)
copy(tensor_at(mark.ctypes.data, N, N, U8, False), tensor_at((data.value or 0) + AT, N, N, U8, True))  # what is probed
after = np.zeros(BLOCK, np.uint8)
copy(block, tensor_at(after.ctypes.data, BLOCK, BLOCK, U8, False))
want = before.copy()
want[AT:AT + N] = mark
same_bytes('the block after a copy into the tensor wrapped at block + 64', want, after)
"""
    return ctx.snippets.script("a tensor wrapped at a DEFAULT block's data pointer + 64 is those bytes of the block", _header(ctx) + body)
