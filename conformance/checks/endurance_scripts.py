"""The endurance family's reproducers: each repeats the check's loop on its own (the same count,
the same checkpoints, the same samples after the same warm-up) and judges it as the check did,
so a call that fails at call 8,000, bytes that go wrong after run 500 and memory that grows all
fail the script, and a good build passes it.

The memory judgement is the kit's own function, carried as source (`slope_per_call`), so the
script and the check cannot disagree on what grows.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

from conformance.checks.context.snippets import Snippets
from conformance.checks.context.steps import REFERENCES
from conformance.checks.endurance_growth import THRESHOLD_PER_CALL, Sampler, slope_per_call
from conformance.testbed.interop import slots

# What every endurance script has after the kit's helpers: its gauge, the judgement, and a
# byte comparison that prints only what is wrong (thousands of checks, one line each otherwise).
GROWTH = f'''
def rss():  # the process's resident memory (Linux)
    with open('/proc/self/statm') as statm:
        return int(statm.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')


{inspect.getsource(slope_per_call).rstrip()}


def no_growth(gauge, samples, per, threshold):  # the samples after the warm-up, judged by their slope
    slope, discounted = slope_per_call([c for c, _ in samples], [v for _, v in samples])
    assert slope <= threshold, (f"{{gauge}} grew {{slope:,.0f}} bytes per {{per}} ({{slope * 1000 / 2**20:.1f}} MiB per 1,000 calls) "
                                f"over calls {{samples[0][0]:,}} to {{samples[-1][0]:,}} ({{len(samples)}} samples): "
                                f"expected at most {{threshold:,}} bytes per {{per}}")
    print(f"{{gauge}}: {{slope:,.0f}} bytes per {{per}} over {{len(samples)}} samples (at most {{threshold:,}}): not growing")


def right(what, expected, actual):  # same_bytes, quiet when they are
    if not np.array_equal(np.ascontiguousarray(expected).view(np.uint8), np.ascontiguousarray(actual).view(np.uint8)):
        same_bytes(what, expected, actual)
'''


def plan_lines(sampler: Sampler, count: int) -> str:
    """The loop's numbers as the check had them: COUNT calls, samples from WARMUP every EVERY calls."""
    return f"\n\nCOUNT, WARMUP, EVERY, THRESHOLD = {count}, {sampler.warmup}, {sampler.every}, {sampler.threshold}\n"


DUE = "(call >= WARMUP and (call - WARMUP) % EVERY == 0)"


def copies(sn: Snippets, direction: str, count: int, sampler: Sampler, elements: int) -> str:
    """copy_tensors in one direction COUNT times, two sources in turn; the destination's bytes
    checked at the first, the regular and the last calls; the process's memory judged."""
    source_kind, destination_kind = direction.split(">")
    if destination_kind == "cpu":  # between canaries: a copy that writes past it shows
        landing = (f"raw, landing = guarded(sentinel([{elements}], np.float32))\ndestination = cpu_value(landing, 1)\n"
                   f"def landed(): intact('copy_tensors {direction}', raw)\n")
    else:
        landing = f"destination = place(sentinel([{elements}], np.float32), {sn.memory_expr(destination_kind)}, 1)\ndef landed(): pass\n"
    body = GROWTH + plan_lines(sampler, count) + f"""
patterns = [filled([{elements}], np.float32, 22), filled([{elements}], np.float32, 21)]  # call n copies patterns[n % 2]
sources = [place(p, {sn.memory_expr(source_kind)}, 1) for p in patterns]
{landing}samples = []
for call in range(1, COUNT + 1):
    works(f'copy_tensors {direction}, call {{call:,}} of {{COUNT:,}}', ort.copy_tensors, [sources[call % 2]], [destination], None)
    due = {DUE}
    if due:
        samples.append((call, rss()))
    if due or call in (1, COUNT):
        right(f'the destination after copy {{call:,}} of {{COUNT:,}} ({direction})', patterns[call % 2], read(destination, patterns[0], 1))
        landed()
print(f'{{COUNT:,}} copies {direction}: each worked, the bytes right at every check')
no_growth('process RSS', samples, 'copy', THRESHOLD)
"""
    return sn.script(f"copy_tensors {direction} {count:,} times in one process: the last as right as the first, memory not growing", body)


def _feeds(recipe: str, inputs: tuple[str, ...], shape: tuple[int, ...], sets: int) -> str:
    """FEEDS[k] and EXPECTED[k]: the small integers of the kit's session checks, moved by k - sets // 2."""
    reference = REFERENCES[recipe].format(*(f"feeds[{name!r}]" for name in inputs))
    return f"""rng = np.random.default_rng(11)
base = {{name: rng.integers(-8, 9, size={list(shape)}).astype(np.float32) for name in {list(inputs)!r}}}
FEEDS = [{{name: (values + np.float32(k - {sets // 2})).astype(np.float32) for name, values in base.items()}} for k in range({sets})]
EXPECTED = []
for feeds in FEEDS:
    EXPECTED.append(({reference}).astype(np.float32))
"""


def session_runs(sn: Snippets, model_path: Path | None, recipe: str, inputs: tuple[str, ...], shape: tuple[int, ...], count: int,
                 sampler: Sampler, sets: int) -> str:
    """One session run COUNT times, its inputs changing from run to run, every output checked."""
    body = GROWTH + plan_lines(sampler, count) + sn.session_snippet(model_path) + "\n" + _feeds(recipe, inputs, shape, sets) + f"""samples = []
for call in range(1, COUNT + 1):
    (output,) = works(f'run {{call:,}} of {{COUNT:,}}', s.run, None, FEEDS[call % {sets}])
    right(f'the output of run {{call:,}} of {{COUNT:,}}', EXPECTED[call % {sets}], np.asarray(output))
    if {DUE}:
        samples.append((call, rss()))
print(f"{{COUNT:,}} runs of model {recipe!r}: every output right")
no_growth('process RSS', samples, 'run', THRESHOLD)
"""
    return sn.script(f"model '{recipe}' run {count:,} times on {sn.under_test.target.provider}: every output right, memory not growing", body)


def session_lifecycle(sn: Snippets, model_path: Path | None, recipe: str, inputs: tuple[str, ...], shape: tuple[int, ...], count: int,
                      sampler: Sampler, sets: int) -> str:
    """COUNT sessions created, run once and released, one after another."""
    create = "\n".join("    " + line for line in sn.session_snippet(model_path).splitlines())
    body = GROWTH + plan_lines(sampler, count) + f"""

def create():
{create}
    return s


""" + _feeds(recipe, inputs, shape, sets) + f"""samples = []
for call in range(1, COUNT + 1):
    s = create()
    (output,) = works(f'a run of session {{call:,}} of {{COUNT:,}}', s.run, None, FEEDS[call % {sets}])
    right(f'the output of session {{call:,}} of {{COUNT:,}}', EXPECTED[call % {sets}], np.asarray(output))
    del s  # released: the session is the only reference
    if {DUE}:
        samples.append((call, rss()))
print(f"{{COUNT:,}} sessions of model {recipe!r} created, run and released: every output right")
no_growth('process RSS', samples, 'session', THRESHOLD)
"""
    return sn.script(f"{count:,} sessions of model '{recipe}' created and released on {sn.under_test.target.provider}: "
                     "each runs right, memory not growing", body)


C_FUNCTIONS = ("GetErrorMessage", "CreateEnv", "RegisterExecutionProviderLibrary", "GetEpDevices", "EpDevice_EpName", "EpDevice_MemoryInfo",
               "GetSharedAllocator", "GetAllocatorWithDefaultOptions", "CreateTensorAsOrtValue", "ReleaseValue", "CreateCpuMemoryInfo",
               "CreateTensorWithDataAsOrtValue", "CopyTensors", "GetTensorMutableData", "AllocatorGetStats", "GetKeyValuePairs",
               "ReleaseKeyValuePairs")


def allocations(sn: Snippets, api_version: int, count: int, sampler: Sampler, elements: int, stat: str | None) -> str:
    """Through the C API, as the check: COUNT float32 tensors allocated from the EP device's
    DEFAULT allocator and released, the bytes of the first, the regular and the last written and
    read back; the process's memory, and the allocator's `stat` where it reports it, judged."""
    target, under_test = sn.under_test.target, sn.under_test
    register = (f"capi('RegisterExecutionProviderLibrary', env, ctypes.c_char_p({target.registration!r}.encode()), "
                f"ctypes.c_char_p({os.path.abspath(target.library)!r}.encode()))" if target.registration and target.library
                else "# a built-in EP: nothing to register")
    slot = {name: slots.ORT_API[name][0] for name in C_FUNCTIONS}
    gauge = f"samples_{stat}.append((call, int(stats()[{stat!r}])))" if stat else "pass"
    judged = f"no_growth('the allocator\\'s {stat}', samples_{stat}, 'allocation', THRESHOLD)" if stat else ""
    body = GROWTH + plan_lines(sampler, count) + f"""
P = ctypes.c_void_p
SLOT = {slot!r}  # OrtApi slot indices, from onnxruntime_c_api.h
CAPI = os.path.join(os.path.dirname(ort.__file__), 'capi')  # the wheel's C library, beside its Python extension
lib = ctypes.CDLL(os.path.join(CAPI, sorted(f for f in os.listdir(CAPI) if f.startswith('libonnxruntime.so'))[0]))
lib.OrtGetApiBase.restype = ctypes.POINTER(P * 2)
api = ctypes.cast(ctypes.CFUNCTYPE(P, ctypes.c_uint32)(lib.OrtGetApiBase().contents[0])({api_version}), ctypes.POINTER(P))
def capi(name, *args):
    status = ctypes.CFUNCTYPE(P, *[type(a) if isinstance(a, ctypes._SimpleCData) else P for a in args])(api[SLOT[name]])(*args)
    if status:
        raise AssertionError(name + ': ' + ctypes.CFUNCTYPE(ctypes.c_char_p, P)(api[SLOT['GetErrorMessage']])(status).decode())
env = P()
capi('CreateEnv', ctypes.c_int(3), ctypes.c_char_p(b'repro'), ctypes.byref(env))
{register}
devices, found = ctypes.POINTER(P)(), ctypes.c_size_t()
capi('GetEpDevices', env, ctypes.byref(devices), ctypes.byref(found))
name_of = ctypes.CFUNCTYPE(ctypes.c_char_p, P)(api[SLOT['EpDevice_EpName']])
device = [devices[i] for i in range(found.value) if name_of(devices[i]) == {target.provider!r}.encode()][{under_test.index}]
info = ctypes.CFUNCTYPE(P, P, ctypes.c_int)(api[SLOT['EpDevice_MemoryInfo']])(device, 0)  # DEFAULT
allocator = P()
if info:
    capi('GetSharedAllocator', env, P(info), ctypes.byref(allocator))
else:  # no DEFAULT memory info: plain CPU memory, onnxruntime's allocator
    capi('GetAllocatorWithDefaultOptions', ctypes.byref(allocator))
cpu_info = P()
capi('CreateCpuMemoryInfo', ctypes.c_int(0), ctypes.c_int(0), ctypes.byref(cpu_info))
NBYTES = {elements * 4}
DEVICE_MEMORY = {not _cpu_readable(under_test)}  # the DEFAULT memory is device memory, not what the CPU reads
def tensor():
    v, address = P(), P()
    capi('CreateTensorAsOrtValue', allocator, (ctypes.c_int64 * 1)({elements}), ctypes.c_size_t(1), ctypes.c_int(1), ctypes.byref(v))
    capi('GetTensorMutableData', v, ctypes.byref(address))
    assert address.value, 'CreateTensorAsOrtValue returned OK and a tensor with no memory (a NULL data pointer)'
    return v
def host(array):  # a CPU tensor over the array's bytes
    v = P()
    capi('CreateTensorWithDataAsOrtValue', cpu_info, P(array.ctypes.data), ctypes.c_size_t(NBYTES), (ctypes.c_int64 * 1)({elements}),
         ctypes.c_size_t(1), ctypes.c_int(1), ctypes.byref(v))
    return v
def roundtrip(value, pattern):  # the pattern written into the tensor and read back
    landing = sentinel([{elements}], np.float32, 0xA5)
    if DEVICE_MEMORY:  # its bytes are reached through CopyTensors
        source, destination = host(pattern), host(landing)
        capi('CopyTensors', env, (P * 1)(source), (P * 1)(value), None, ctypes.c_size_t(1))
        capi('CopyTensors', env, (P * 1)(value), (P * 1)(destination), None, ctypes.c_size_t(1))
        for v in (source, destination):
            ctypes.CFUNCTYPE(None, P)(api[SLOT['ReleaseValue']])(v)
    else:  # CPU memory: through its address
        address = P()
        capi('GetTensorMutableData', value, ctypes.byref(address))
        ctypes.memmove(address.value, pattern.ctypes.data, NBYTES)
        ctypes.memmove(landing.ctypes.data, address.value, NBYTES)
    return landing
def stats():
    pairs, keys, values, n = P(), ctypes.POINTER(ctypes.c_char_p)(), ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_size_t()
    capi('AllocatorGetStats', allocator, ctypes.byref(pairs))
    ctypes.CFUNCTYPE(None, P, P, P, P)(api[SLOT['GetKeyValuePairs']])(pairs, ctypes.byref(keys), ctypes.byref(values), ctypes.byref(n))
    found = {{keys[i].decode(): values[i].decode() for i in range(n.value)}}
    ctypes.CFUNCTYPE(None, P)(api[SLOT['ReleaseKeyValuePairs']])(pairs)
    return found
release = ctypes.CFUNCTYPE(None, P)(api[SLOT['ReleaseValue']])
samples, samples_{stat or 'none'} = [], []
for call in range(1, COUNT + 1):
    value = tensor()
    due = {DUE}
    if due or call in (1, COUNT):
        pattern = filled([{elements}], np.float32, call)
        right(f'the bytes of allocation {{call:,}} of {{COUNT:,}}', pattern, roundtrip(value, pattern))
    release(value)
    if due:
        samples.append((call, rss()))
        {gauge}
print(f'{{COUNT:,}} allocations and frees: each worked, the bytes right at every check')
no_growth('process RSS', samples, 'allocation', THRESHOLD)
{judged}
"""
    return sn.script(f"{count:,} allocations and frees in the DEFAULT memory of {target.provider}'s device through the C API: "
                     "each works, memory not growing", body)


def _cpu_readable(under_test) -> bool:
    facts = under_test.facts.default_memory
    return facts is None or facts.on_cpu


__all__ = ["THRESHOLD_PER_CALL", "allocations", "copies", "session_lifecycle", "session_runs"]
