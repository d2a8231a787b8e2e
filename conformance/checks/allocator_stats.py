"""The allocator statistics family: what onnxruntime's AllocatorGetStats does with an EP's
allocator that implements no GetStats.

`OrtAllocator::GetStats` is optional ("Implementation of this function is optional and GetStats
may be set to a nullptr", onnxruntime_c_api.h), and `OrtApi::AllocatorGetStats` promises an empty
OrtKeyValuePairs for such an allocator. The WebGPU plugin EP's shared allocator leaves the member
NULL; onnxruntime 1.32's AllocatorGetStats calls through it unchecked. The check reaches the
allocator an application gets (the C environment's shared allocator for the EP device's DEFAULT
memory) and asks, where the member is NULL; where the EP implements GetStats the case the header
covers does not arise.
"""

from __future__ import annotations

import ctypes
from typing import Iterator

from conformance.calls import Call
from conformance.checks.context import CheckContext
from conformance.checks.registry import check
from conformance.findings import NotApplicable, Violation
from conformance.testbed.interop import capi as C
from conformance.testbed.interop import rig
from conformance.testbed.interop.default_allocator import DefaultAllocator
from conformance import proofs


@check("memory-info.allocator-stats-optional")
def allocator_stats_optional(ctx: CheckContext) -> Iterator[Violation]:
    """AllocatorGetStats of the EP device's shared DEFAULT allocator, asked only where that
    allocator leaves GetStats NULL: OK and empty key-value pairs, as the header promises."""
    api, env, device = rig.c_device(ctx)
    allocator = DefaultAllocator(api, env, device)
    if allocator.memory is None:
        raise NotApplicable("the EP device advertises no DEFAULT memory: its allocator is onnxruntime's own CPU allocator, not the EP's")
    version = C.allocator_version(allocator.allocator)
    ctx.prove(proofs.ALLOCATOR, {"memory": allocator.label, "version": version})
    if C.implements_stats(allocator.allocator):
        raise NotApplicable(f"the EP's shared allocator for {allocator.label} implements GetStats: the allocator without one, "
                            "which the header's promise is about, does not arise here")
    if version < C.GET_STATS_SINCE:
        raise NotApplicable(f"the EP's allocator is of version {version}, older than GetStats (version {C.GET_STATS_SINCE}): "
                            "its struct ends before the member")
    snippet = _script(ctx)
    ctx.attempt("AllocatorGetStats of the EP's shared allocator, whose GetStats is NULL", snippet)
    pairs = ctypes.c_void_p()
    try:
        with ctx.calling(Call("AllocatorGetStats")):
            api.call("AllocatorGetStats", allocator.allocator, ctypes.byref(pairs))
    except C.OrtError as exc:
        yield Violation(f"AllocatorGetStats refused an allocator without GetStats: {exc.message[:200]}",
                        expected="OK and empty key-value pairs", actual=f"an error status: {exc.message[:200]}", reproducer=snippet)
        return
    if not pairs.value:
        yield Violation("AllocatorGetStats returned OK and no key-value pairs for an allocator without GetStats",
                        expected="an empty OrtKeyValuePairs to release", actual="NULL", reproducer=snippet)
        return
    keys, values, count = ctypes.POINTER(ctypes.c_char_p)(), ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_size_t()
    try:
        api.call("GetKeyValuePairs", pairs, ctypes.byref(keys), ctypes.byref(values), ctypes.byref(count))
    finally:
        api.call("ReleaseKeyValuePairs", pairs)
    ctx.prove(proofs.STATS, f"{count.value} pairs")
    if count.value:
        yield Violation(f"AllocatorGetStats gave {count.value} figures for an allocator without GetStats",
                        expected="empty key-value pairs", actual=f"{count.value} pairs", reproducer=snippet)


def _script(ctx: CheckContext) -> str:
    """A script of its own: the C path's set-up, then AllocatorGetStats of the shared allocator
    (after reading from the struct that its GetStats is NULL, as the run saw it)."""
    body = ctx.snippets.c_api_setup() + """\
class Head(ctypes.Structure):  # OrtAllocator's first members, as onnxruntime_c_api.h declares them
    _fields_ = [('version', ctypes.c_uint32), ('Alloc', P), ('Free', P), ('Info', P), ('Reserve', P), ('GetStats', P)]
head = Head.from_address(allocator.value)
if head.version < 23 or head.GetStats:
    print('not the set-up of the run: the shared allocator here implements GetStats (the run saw it NULL)', file=sys.stderr)
    sys.exit(2)
pairs, keys, values, count = P(), ctypes.POINTER(ctypes.c_char_p)(), ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_size_t()
call('AllocatorGetStats', allocator, ctypes.byref(pairs))  # onnxruntime 1.32: a jump through the NULL member
assert pairs, 'AllocatorGetStats returned OK and no key-value pairs'
call('GetKeyValuePairs', pairs, ctypes.byref(keys), ctypes.byref(values), ctypes.byref(count))
assert count.value == 0, f'AllocatorGetStats gave {count.value} figures for an allocator without GetStats'
print('AllocatorGetStats gave empty pairs for an allocator without GetStats')
"""
    return ctx.snippets.script("AllocatorGetStats of an allocator without GetStats gives empty key-value pairs", body)
