"""CopyTensors from several threads at once, through the C API.

onnxruntime's Python `copy_tensors` holds the GIL for the whole call (two Python threads never
overlap in it), so threads around it show nothing. ctypes releases the GIL for the length of a
native call: here each thread calls the C API's CopyTensors itself (`native_copy`), with tensors
and bytes of its own, and every call is timed (`conformance.testbed.spans`), so that how many
calls really ran at once is measured, not assumed.

A thread's tensors form chains (`Lane`): a host source between canaries (`GuardedArray`), one
tensor in the EP device's DEFAULT memory per step that ends there (from the C environment's
shared allocator; a host buffer where the device advertises no DEFAULT memory), and a host
landing between canaries. A round writes new bytes into every source (the thread's own pattern,
changed each round, so that a stale or misdirected copy shows), fills the landings with a
sentinel, copies along the chain (`cpu>default`, `default>default` where the EP does it,
`default>cpu`) with one CopyTensors call per step for all the lane's chains (a batched call when
there are several), and compares every landing with what its source was given. Wrong bytes that
hold another thread's pattern are said to be that thread's.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

import numpy as np

from conformance.testbed.guard import GuardedArray
from conformance.testbed.interop import capi as C
from conformance.testbed.spans import Span, at_once, on_another_thread

SENTINEL = 0xA5  # what a landing holds before the copy that should fill it
FIRST_SEED = 0x5EED  # thread t's patterns come from seed FIRST_SEED + t
FLOAT32 = C.ELEMENT_TYPES["float32"]
WHOSE_BYTES = 8  # wrong bytes needed to say whose pattern they hold (8 random bytes match by chance once in 2^56)


def round_key(round_: int) -> int:
    """The byte a thread's pattern is XORed with in round `round_`: a different one each round."""
    return (round_ * 151 + 29) & 0xFF


def native_copy(function: Any, env: Any, sources: Any, destinations: Any, count: int) -> Any:
    """One CopyTensors call (the GIL released while it runs): its OrtStatus, None when OK. Every
    copy goes through here, so that a test's stand-in can take its place."""
    return function(env, sources, destinations, None, count)


class Ends:
    """Makes a chain's tensors and releases them: host arrays between canaries, tensors in the
    EP device's DEFAULT memory (host arrays too where it advertises none)."""

    def __init__(self, api: C.CApi, env: C.Environment, device: int, default_memory: bool):
        self.api, self.env, self.device, self.default_memory = api, env, device, default_memory
        self.values: list[Any] = []
        self.guarded: list[tuple[str, GuardedArray]] = []  # (role, buffer), for the check to watch

    def host(self, nbytes: int, role: str) -> tuple[np.ndarray, Any]:
        """A host tensor of `nbytes` (float32) between canaries: its bytes, as a uint8 view, and its OrtValue."""
        guarded = GuardedArray(np.float32, (nbytes // 4,))
        self.guarded.append((role, guarded))
        value = C.cpu_tensor_at(self.api, guarded.address, guarded.array.nbytes, (nbytes // 4,), FLOAT32)
        self.values.append(value)
        return guarded.array.view(np.uint8), value

    def default(self, nbytes: int, role: str) -> Any:
        if not self.default_memory:
            return self.host(nbytes, role)[1]
        value = C.device_tensor(self.api, self.env, self.device, "default", (nbytes // 4,), FLOAT32)
        self.values.append(value)
        return value

    def copy(self, sources: list[Any], destinations: list[Any]) -> None:
        """One CopyTensors call on this thread, through `native_copy`; OrtError when refused."""
        count = len(sources)
        status = native_copy(self.api.function("CopyTensors"), self.env.env, (ctypes.c_void_p * count)(*sources),
                             (ctypes.c_void_p * count)(*destinations), count)
        self.api.check("CopyTensors", status)

    def close(self) -> None:
        for value in self.values:
            self.api.call("ReleaseValue", value)
        self.values = []


@dataclass(frozen=True)
class WrongBytes:
    """A landing that did not hold its source's bytes after the chain: which thread, round and
    pair; how many bytes differ of `total`, the first (its offset, expected and got); whose
    pattern the wrong bytes hold (another thread's, where they all do)."""

    thread: int
    round: int
    pair: int
    chain: str
    differing: int
    total: int
    first: int
    expected: int
    got: int
    like_thread: int | None = None

    def describe(self) -> str:
        whose = f"; the wrong bytes hold thread {self.like_thread}'s pattern" if self.like_thread is not None else ""
        return (f"thread {self.thread}, round {self.round}, pair {self.pair} ({self.chain}): {self.differing} of {self.total} bytes differ, "
                f"first at {self.first}: expected 0x{self.expected:02x}, got 0x{self.got:02x}{whose}")


@dataclass(frozen=True)
class FailedCall:
    """A CopyTensors call that returned an error while other threads copied."""

    thread: int
    round: int
    direction: str
    message: str


@dataclass
class Lane:
    """One thread's chains: `pairs` sources, their DEFAULT tensors for each step that ends in
    DEFAULT memory, and landings; what the thread did and saw."""

    ends: Ends
    thread: int
    pairs: int
    nbytes: int
    chain: tuple[str, ...]  # the directions, in order: cpu>default [, default>default], default>cpu
    rounds: int = 0
    bytes_checked: int = 0
    spans: list[Span] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    wrong: list[tuple[int, int, np.ndarray, np.ndarray]] = field(default_factory=list)  # (round, pair, expected, got)
    failed: FailedCall | None = None
    error: str = ""  # the traceback of a Python error in the thread (the kit's)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(FIRST_SEED + self.thread)
        self.patterns = [rng.integers(0, 256, self.nbytes, dtype=np.uint8) for _ in range(self.pairs)]
        made = [self.ends.host(self.nbytes, f"host source of thread {self.thread}'s copies, pair {p}") for p in range(self.pairs)]
        self.sources = [bytes_ for bytes_, _ in made]
        ends: list[list[Any]] = [[value for _, value in made]]
        for step in range(len(self.chain) - 1):
            ends.append([self.ends.default(self.nbytes, f"DEFAULT tensor {step} of thread {self.thread}, pair {p}") for p in range(self.pairs)])
        landed = [self.ends.host(self.nbytes, f"host landing of thread {self.thread}'s copies, pair {p}") for p in range(self.pairs)]
        self.landings = [bytes_ for bytes_, _ in landed]
        ends.append([value for _, value in landed])
        self.steps = [(ends[i], ends[i + 1]) for i in range(len(self.chain))]
        self.expected = np.empty(self.nbytes, np.uint8)

    def run(self, rounds: int, deadline: float, start: threading.Barrier) -> None:
        """`rounds` rounds, then more until `deadline` (time.monotonic()); stops at the first wrong or failed round."""
        try:
            start.wait()
            while (self.rounds < rounds or time.monotonic() < deadline) and self._round(self.rounds):
                self.rounds += 1
        except Exception:
            self.error = traceback.format_exc()

    def _round(self, round_: int) -> bool:
        key = np.uint8(round_key(round_))
        for source, pattern, landing in zip(self.sources, self.patterns, self.landings, strict=True):
            np.bitwise_xor(pattern, key, out=source)
            landing.fill(SENTINEL)
        for direction, (sources, destinations) in zip(self.chain, self.steps, strict=True):
            start = time.monotonic_ns()
            try:
                self.ends.copy(sources, destinations)
            except C.OrtError as exc:
                self.failed = FailedCall(self.thread, round_, direction, exc.message)
                return False
            finally:
                self.spans.append(Span(self.thread, start, time.monotonic_ns()))
                self.calls[direction] = self.calls.get(direction, 0) + 1
        for pair, (pattern, landing) in enumerate(zip(self.patterns, self.landings, strict=True)):
            np.bitwise_xor(pattern, key, out=self.expected)
            if not np.array_equal(landing, self.expected):
                self.wrong.append((round_, pair, self.expected.copy(), landing.copy()))
            self.bytes_checked += self.nbytes
        return not self.wrong


@dataclass
class CopiesRun:
    """What the threads did: rounds per thread, calls per direction, bytes compared, every
    call's span, the wrong landings and failed calls, and how long it took."""

    threads: int
    pairs: int
    nbytes: int
    chain: tuple[str, ...]
    rounds: list[int]
    calls: dict[str, int]
    bytes_checked: int
    spans: list[Span]
    wrong: list[WrongBytes]
    failed: list[FailedCall]
    seconds: float


class ConcurrentCopies:
    """`threads` lanes of `pairs` chains of `nbytes` each, copied along `chain` at once."""

    def __init__(self, ends: Ends, *, threads: int, pairs: int, nbytes: int, chain: tuple[str, ...]):
        self.ends = ends
        self.lanes = [Lane(ends, thread, pairs, nbytes, chain) for thread in range(threads)]
        self.threads, self.pairs, self.nbytes, self.chain = threads, pairs, nbytes, chain

    def run(self, rounds: int, deadline: float, announce: Callable[[str], None]) -> CopiesRun:
        """Runs the lanes on threads of their own, released together, and waits for them, calling
        `announce` about every second while rounds get done (not while none does: a call that
        hangs must let the worker's timeout run out)."""
        seen = [-1]

        def progress() -> None:
            done = sum(lane.rounds for lane in self.lanes)
            if done != seen[0]:
                seen[0] = done
                announce(f"{done} rounds done on {len(self.lanes)} threads")

        seconds = at_once([functools.partial(lane.run, rounds, deadline) for lane in self.lanes], progress)
        errors = [lane.error for lane in self.lanes if lane.error]
        if errors:
            raise RuntimeError(f"a copying thread failed in the kit: {errors[0]}")
        calls: dict[str, int] = {}
        for lane in self.lanes:
            for direction, count in lane.calls.items():
                calls[direction] = calls.get(direction, 0) + count
        return CopiesRun(len(self.lanes), self.pairs, self.nbytes, self.chain, [lane.rounds for lane in self.lanes], calls,
                         sum(lane.bytes_checked for lane in self.lanes), [span for lane in self.lanes for span in lane.spans],
                         [self._wrong(lane, *found) for lane in self.lanes for found in lane.wrong],
                         [lane.failed for lane in self.lanes if lane.failed is not None], seconds)

    def run_alone(self, rounds: int) -> CopiesRun:
        """The first lane's rounds on a thread of its own, with no other call in flight: what the
        same copies give without threads at once."""
        lane = self.lanes[0]
        began = time.perf_counter()
        _, error, _ = on_another_thread(functools.partial(lane.run, rounds, 0.0, threading.Barrier(1)))
        if error is not None or lane.error:
            raise RuntimeError(f"the copying thread failed in the kit: {error or lane.error}")
        return CopiesRun(1, self.pairs, self.nbytes, self.chain, [lane.rounds], dict(lane.calls), lane.bytes_checked, list(lane.spans),
                         [self._wrong(lane, *found) for found in lane.wrong], [lane.failed] if lane.failed else [], time.perf_counter() - began)

    def _wrong(self, lane: Lane, round_: int, pair: int, expected: np.ndarray, got: np.ndarray) -> WrongBytes:
        differing = np.flatnonzero(expected != got)
        first = int(differing[0])
        return WrongBytes(lane.thread, round_, pair, ", ".join(self.chain), int(differing.size), self.nbytes, first, int(expected[first]),
                          int(got[first]), self._whose(lane.thread, got, differing))

    def _whose(self, thread: int, got: np.ndarray, differing: np.ndarray) -> int | None:
        """The other thread whose pattern (of some round) the wrong bytes all hold, if one does;
        a few wrong bytes match any pattern by chance, so it takes at least WHOSE_BYTES of them."""
        if differing.size < WHOSE_BYTES:
            return None
        for lane in self.lanes:
            if lane.thread == thread:
                continue
            for pattern in lane.patterns:
                keys = np.bitwise_xor(got[differing], pattern[differing])
                if (keys == keys[0]).all():
                    return lane.thread
        return None


def probe(ends: Ends, calling: Callable[[str], ContextManager[Any]], nbytes: int = 4096) -> dict[str, str]:
    """Which of cpu>default, default>cpu and default>default CopyTensors does, one call each on
    this thread, each made within `calling(direction)`: direction -> '' (done, and the bytes right
    where they could be read back) or why not (the EP's refusal, or the wrong bytes it delivered)."""
    pattern = np.random.default_rng(FIRST_SEED - 1).integers(0, 256, nbytes, dtype=np.uint8)
    source_bytes, source = ends.host(nbytes, "host source of the one-thread probe")
    source_bytes[...] = pattern
    first, second = ends.default(nbytes, "DEFAULT tensor of the probe"), ends.default(nbytes, "second DEFAULT tensor of the probe")
    found: dict[str, str] = {}

    def attempt(direction: str, src: Any, dst: Any) -> bool:
        try:
            with calling(direction):
                ends.copy([src], [dst])
        except C.OrtError as exc:
            found[direction] = f"refused: {exc.message}"
            return False
        found[direction] = ""
        return True

    def read_back(direction: str, src: Any, after: str) -> None:
        landing_bytes, landing = ends.host(nbytes, "host landing of the one-thread probe")
        landing_bytes.fill(SENTINEL)
        if attempt(direction, src, landing) and filled and not np.array_equal(landing_bytes, pattern):
            found[after] = f"delivered wrong bytes on one thread ({int(np.count_nonzero(landing_bytes != pattern))} of {nbytes} differ)"

    filled = attempt("cpu>default", source, first)
    read_back("default>cpu", first, "default>cpu")
    if attempt("default>default", first, second) and not found["default>cpu"]:
        read_back("default>cpu", second, "default>default")
    return found
