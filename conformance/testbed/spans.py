"""Calls made at once: which thread made each call and when, and how many of them overlapped in
time a call of another thread.

A stress check that runs calls on several threads proves nothing about concurrency unless calls
really ran at the same time: Python's GIL, or a lock in the API, may serialise them. Each call is
timed with `time.monotonic_ns()` just before and just after it (`Span`); `overlap(spans)` counts
the calls whose interval shares time with a call of another thread. Two calls that overlap were
both in flight at once: at most one of them held the GIL, so the other was in native code.
`at_once` runs work on threads released together; `on_another_thread` runs it on a new thread alone.

Only the standard library is imported.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class Span:
    """One call: the thread that made it (an index of the check's own), its start and end (ns)."""

    thread: int
    start: int
    end: int


@dataclass(frozen=True)
class Overlap:
    """`calls`: how many were timed; `overlapping`: how many of them overlapped in time a call of
    another thread; `most_at_once`: the most calls in flight at one instant."""

    calls: int
    overlapping: int
    most_at_once: int

    def to_dict(self) -> dict[str, int]:
        return {"calls": self.calls, "overlapping": self.overlapping, "most_at_once": self.most_at_once}


def overlap(spans: Sequence[Span]) -> Overlap:
    """One sweep over the calls' starts and ends in time order; an end sorts before a start at the
    same instant, so calls that only touch do not count."""
    events = sorted([(span.start, 1, index) for index, span in enumerate(spans)] + [(span.end, 0, index) for index, span in enumerate(spans)])
    in_flight: dict[int, set[int]] = {}  # thread -> its calls in flight (one, unless a thread nests them)
    overlapping: set[int] = set()
    most = 0
    for _, starts, index in events:
        thread = spans[index].thread
        if not starts:
            in_flight[thread].discard(index)
            continue
        others = [other for owner, calls in in_flight.items() if owner != thread for other in calls]
        if others:
            overlapping.add(index)
            overlapping.update(others)
        in_flight.setdefault(thread, set()).add(index)
        most = max(most, sum(len(calls) for calls in in_flight.values()))
    return Overlap(len(spans), len(overlapping), most)


def at_once(work: Sequence[Callable[[threading.Barrier], None]], announce: Callable[[], None], every: float = 1.0) -> float:
    """Runs each of `work` on a thread of its own; each is handed one barrier, to wait on where it
    starts what must run at once. Waits for them all, calling `announce` about every `every`
    seconds meanwhile (to say what was done: a caller whose work hangs says nothing new, so that
    a timeout counted from its last word runs out). Returns the seconds taken."""
    start = threading.Barrier(len(work))
    threads = [threading.Thread(target=job, args=(start,), name=f"at-once-{index}", daemon=True) for index, job in enumerate(work)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        for thread in threads:
            thread.join(timeout=every / len(threads))
        announce()
    return time.perf_counter() - began


def on_another_thread(work: Callable[[], Any]) -> tuple[Any, BaseException | None, int]:
    """`work()` on a new thread, alone: what it returned, what it raised (for the caller to
    judge), and that thread's native id."""
    box: dict[str, Any] = {}

    def run() -> None:
        box["thread"] = threading.get_native_id()
        try:
            box["value"] = work()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, name="another-thread")
    thread.start()
    thread.join()
    return box.get("value"), box.get("error"), box["thread"]
