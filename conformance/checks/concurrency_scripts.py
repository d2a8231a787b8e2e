"""The concurrency family's reproducers: standalone scripts that make the same calls at once from
as many threads, as many times, as the check did, check every result, say how many calls
overlapped in time, and fail exactly when a result is wrong (never on the overlap count, which
depends on the machine).

The copies go through the C API by ctypes (the GIL released during each call), as the check's
did; sessions through Python (InferenceSession.run releases the GIL).
"""

from __future__ import annotations


from conformance.checks.context import CheckContext
from conformance.checks.context.steps import REFERENCES
from conformance.testbed.interop import capi as C

THREAD_NOTE = "from a thread other than the one that registered the library"  # the note of such calls (conformance.calls.Call)

# What every script of the family has: threads started together, and the overlap of their calls.
THREADED = '''\
import threading, time


def at_once(work, count):  # work(t) on `count` threads released together; the first error of any is raised
    start, errors = threading.Barrier(count, timeout=60), []

    def run(t):
        try:
            start.wait()
            work(t)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def timed(spans, t, call, *args):  # a call, its (thread, start, end) appended to spans
    start = time.monotonic_ns()
    try:
        return call(*args)
    finally:
        spans.append((t, start, time.monotonic_ns()))


def overlapping(spans):  # how many calls overlapped in time a call of another thread
    events = sorted([(s, 1, i) for i, (_, s, _) in enumerate(spans)] + [(e, 0, i) for i, (_, _, e) in enumerate(spans)])
    flying, hit = set(), set()
    for _, starts, i in events:
        if not starts:
            flying.discard(i)
            continue
        others = [j for j in flying if spans[j][0] != spans[i][0]]
        hit.update(others + [i] if others else [])
        flying.add(i)
    return len(hit)
'''


def c_header(ctx: CheckContext) -> str:
    """The C API set up (`Snippets.c_api_setup`: `device` the EP device under test, `call`,
    `error(status)`), then `device_tensor(n)` and `host_tensor(n)` (n bytes as
    float32, the host's between 64 canary bytes), `copy_tensors` (CopyTensors, the GIL released
    while it runs)."""
    return ctx.snippets.c_api_setup() + f"""\
copy_tensors = ctypes.CFUNCTYPE(P, P, ctypes.POINTER(P), ctypes.POINTER(P), P, ctypes.c_size_t)(api[SLOT['CopyTensors']])
hosts = []  # every host buffer: its canaries are checked at the end
def device_tensor(n):
    v = P()
    call('CreateTensorAsOrtValue', allocator, (ctypes.c_int64 * 1)(n // 4), ctypes.c_size_t(1), ctypes.c_int({C.ELEMENT_TYPES['float32']}), ctypes.byref(v))
    return v
def host_tensor(n):  # n bytes between 64 canary bytes (0xC3) on each side: its bytes (uint8) and a float32 tensor over them
    raw = np.full(n + 192, 0xC3, np.uint8)
    start = 64 + (-raw[64:].ctypes.data) % 64  # 64-byte aligned, as the kit's buffers
    hosts.append((raw, start, n))
    v = P()
    call('CreateTensorWithDataAsOrtValue', cpu_info, P(raw[start:].ctypes.data), ctypes.c_size_t(n), (ctypes.c_int64 * 1)(n // 4),
         ctypes.c_size_t(1), ctypes.c_int({C.ELEMENT_TYPES['float32']}), ctypes.byref(v))
    return raw[start:start + n], v
"""


def copies(ctx: CheckContext, *, threads: int, pairs: int, nbytes: int, rounds: int, chain: tuple[str, ...]) -> str:
    """`threads` threads, each with `pairs` chains of its own (`nbytes` each, its own bytes,
    changed each round), copy along `chain` (one CopyTensors call per step for all its pairs)
    `rounds` times at once; every landing is compared with its source, the canaries around every
    host buffer too."""
    body = c_header(ctx) + THREADED + f"""
THREADS, PAIRS, NBYTES, ROUNDS, CHAIN = {threads}, {pairs}, {nbytes}, {rounds}, {list(chain)!r}
lanes = []
for t in range(THREADS):  # each thread's tensors, made before the threads start (as the check made them)
    rng = np.random.default_rng(0x5EED + t)
    patterns = [rng.integers(0, 256, NBYTES, dtype=np.uint8) for _ in range(PAIRS)]
    sources = [host_tensor(NBYTES) for _ in range(PAIRS)]
    middles = [[device_tensor(NBYTES) for _ in range(PAIRS)] for _ in CHAIN[1:]]
    landings = [host_tensor(NBYTES) for _ in range(PAIRS)]
    ends = [[v for _, v in sources], *middles, [v for _, v in landings]]
    steps = [((P * PAIRS)(*ends[i]), (P * PAIRS)(*ends[i + 1])) for i in range(len(CHAIN))]
    lanes.append((patterns, sources, landings, steps))
spans, wrong = [], []


def lane(t):
    patterns, sources, landings, steps = lanes[t]
    for r in range(ROUNDS):
        key = np.uint8((r * 151 + 29) & 0xFF)  # the thread's bytes change every round: a stale copy shows
        for (source, _), pattern in zip(sources, patterns):
            source[:] = pattern ^ key
        for landing, _ in landings:
            landing.fill(0xA5)
        for direction, (src, dst) in zip(CHAIN, steps):
            status = timed(spans, t, copy_tensors, env, src, dst, None, PAIRS)
            if status:
                return wrong.append(f'thread {{t}}, round {{r}}: CopyTensors {{direction}} failed: {{error(status)}}')
        for p, ((landing, _), pattern) in enumerate(zip(landings, patterns)):
            bad = np.flatnonzero(landing != (pattern ^ key))
            if bad.size:
                return wrong.append(f'thread {{t}}, round {{r}}, pair {{p}}: {{bad.size}} of {{NBYTES}} bytes differ after {{", ".join(CHAIN)}}, '
                                    f'first at {{bad[0]}}: expected 0x{{pattern[bad[0]] ^ key:02x}}, got 0x{{landing[bad[0]]:02x}}')


at_once(lane, THREADS)
print(f'{{len(spans)}} CopyTensors calls ({{PAIRS}} pairs each) on {{THREADS}} threads; {{overlapping(spans)}} overlapped a call of another thread')
for raw, start, n in hosts:
    assert (raw[:start] == 0xC3).all() and (raw[start + n:] == 0xC3).all(), 'CopyTensors wrote outside a host tensor'
assert not wrong, f'{{len(wrong)}} threads saw a wrong copy; the first: {{wrong[0]}}'
print('every copy delivered its own bytes')
"""
    what = f"CopyTensors from {threads} threads at once ({', '.join(chain)}; {pairs} pair{'s' * (pairs > 1)} a call, {rounds} rounds)"
    return ctx.snippets.script(f"{what} on {ctx.target.provider} delivers each thread's own bytes", body)


def sessions(ctx: CheckContext, *, model_path, recipe: str, inputs: tuple[str, ...], shape: tuple[int, ...], threads: int, runs: int,
             intra_op_threads: int, shared: bool) -> str:
    """`threads` threads create a session each at once (one session, made first, when `shared`)
    and run it `runs` times at once, each thread with inputs of its own; every output compared with numpy's."""
    indented = "\n".join("    " + line for line in ctx.session_snippet(model_path, intra_op_threads).splitlines())
    reference = REFERENCES[recipe].format(*(f"feeds[{name!r}]" for name in inputs))
    make = "sessions = [make_session()] * THREADS  # one session, run by every thread" if shared else (
        "sessions = [None] * THREADS\nat_once(lambda t: sessions.__setitem__(t, make_session()), THREADS)  # created at once")
    body = THREADED + f"""

def make_session():
{indented}
    return s


THREADS, RUNS, SHAPE = {threads}, {runs}, {list(shape)!r}
{make}
spans, wrong = [], []


def lane(t):
    rng = np.random.default_rng(1000 + t)  # each thread's own inputs, three sets taken in turn
    sets = [{{name: rng.integers(-8, 9, size=SHAPE).astype(np.float32) for name in {list(inputs)!r}}} for _ in range(3)]
    for r in range(RUNS):
        feeds = sets[r % 3]
        (output,) = timed(spans, t, sessions[t].run, None, feeds)
        expected = ({reference}).astype(np.float32)
        if not np.array_equal(np.asarray(output), expected):
            bad = np.flatnonzero(np.asarray(output).reshape(-1) != expected.reshape(-1))
            return wrong.append(f'thread {{t}}, run {{r}}: {{bad.size}} of {{expected.size}} values differ from numpy\\'s')


at_once(lane, THREADS)
print(f'{{len(spans)}} runs on {{THREADS}} threads; {{overlapping(spans)}} overlapped a run of another thread')
assert not wrong, f'{{len(wrong)}} threads got wrong outputs; the first: {{wrong[0]}}'
print('every run gave numpy\\'s result for its own inputs')
"""
    what = (f"one session of model '{recipe}' run from {threads} threads at once" if shared
            else f"{threads} sessions of model '{recipe}' created and run at once, one a thread")
    return ctx.snippets.script(f"{what} ({intra_op_threads} intra-op threads, float32 {list(shape)}) on {ctx.target.provider}", body)


def any_thread(ctx: CheckContext, names: list[str], session: tuple | None = None) -> str:
    """Each call named (as concurrency.any-thread names them) made on the main thread, which
    registered the EP library and created the session, then on a new thread: both must deliver
    the right bytes. `session`: (model path, recipe, input names) of the session run."""
    shape, f32 = [16, 64], 1
    lines = [THREADED, f"SHAPE = {shape!r}", "",
             "def on_another_thread(what, call, *args):  # the call made on a new thread; what it raised, raised here",
             "    box = {}", "", "    def run():", "        try:", "            box['value'] = call(*args)",
             "        except BaseException as error:", "            box['error'] = error", "",
             "    thread = threading.Thread(target=run)", "    thread.start()", "    thread.join()",
             "    if 'error' in box:",
             "        raise AssertionError(f\"{what} on a thread other than the one that registered the library: expected it to work, \"",
             "                             f\"got {type(box['error']).__name__}: {box['error']}\")", "    return box['value']", ""]
    functions = []
    for index, name in enumerate(names):
        function = f"call_{index}"
        functions.append((name, function))
        body = [f"def {function}(seed):  # {name}", "    values = filled(SHAPE, np.float32, seed)"]
        if name.startswith("copy_tensors"):
            source_kind, destination_kind = name.split()[1].split(">")
            body += [f"    source = place(values, {ctx.memory_expr(source_kind)}, {f32})",
                     f"    destination = place(sentinel(SHAPE, np.float32, 0x5a), {ctx.memory_expr(destination_kind)}, {f32})",
                     f"    works({name!r}, ort.copy_tensors, [source], [destination], None)"]
        elif name.startswith("update_inplace"):
            source = "values" if "numpy" in name else f"place(values, {ctx.memory_expr(name.split()[1].split('>')[0])}, {f32})"
            body += [f"    destination = place(sentinel(SHAPE, np.float32, 0x5a), {ctx.memory_expr('default')}, {f32})",
                     f"    works({name!r}, destination.update_inplace, {source})"]
        else:
            path, recipe, inputs = session or (None, "add", ("a", "b"))
            lines += [ctx.session_snippet(path), ""]
            reference = REFERENCES[recipe].format(*(f"feeds[{n!r}]" for n in inputs))
            body = [f"def {function}(seed):  # {name}", "    rng = np.random.default_rng(seed)",
                    f"    feeds = {{name: rng.integers(-8, 9, size=[3, 5]).astype(np.float32) for name in {list(inputs)!r}}}",
                    "    (output,) = works('running the session', s.run, None, feeds)",
                    f"    return ({reference}).astype(np.float32), np.asarray(output)"]
            lines += body + ["", ""]
            continue
        lines += body + [f"    return values, read(destination, values, {f32})", "", ""]
    for name, function in functions:
        lines += [f"same_bytes({name + ' on the thread that registered the library'!r}, *{function}(21))",
                  f"same_bytes({name + ' on another thread'!r}, *on_another_thread({name!r}, {function}, 22))"]
    return ctx.snippets.script(f"{', '.join(names)} from a thread other than the one that registered the library on {ctx.target.provider}",
                               "\n".join(lines))
