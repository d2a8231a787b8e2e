"""Memory that does not grow over thousands of calls: gauges (the process's resident memory, an
allocator's statistics) read at regular calls after a warm-up, and judged by the slope of the
samples, never by one of them.

The judgement (`judge`) is a pure function of the samples. Its slope is the median of the slopes
between every two samples (Theil-Sen), after a one-off step each way is discounted: the largest
rise, and the largest fall, between two neighbouring samples counts as the median rise where it
stands alone. A one-off jump (an arena extended once, a cache filled once, a page of the
interpreter's heap) is one step, not a rate; a leak rises between every pair of samples, so
discounting one rise leaves its slope as it was.

`slope_per_call` uses nothing but Python, so that a reproducer carries its very source
(`inspect.getsource`) and judges its samples as the kit judged them.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from conformance.proofs import GrowthCurve

# Bytes per call above which memory grows. A leak of 16 KiB per call (issue 36's EP) has a slope
# of 16,384 and crosses it fourfold; what a healthy process shows lies far under it: resident
# memory moves by whole pages (4 KiB) now and then, and a sample is taken every few hundred
# copies, so noise of a few pages between samples is a slope of tens of bytes per call, and a
# one-off jump is discounted. Measured on the CPU EP and refdev (2 cores, 15 runs of each case in
# a worker, and the reproducers in fresh processes): at most 40 bytes per copy, allocation or
# run, and about 300 bytes per session created, run and released.
THRESHOLD_PER_CALL = 4096
WARMUP_FRACTION = 0.1  # the first tenth of the calls fills caches and pools: not sampled
SAMPLES = 24  # samples after the warm-up: a slope, never one reading
KEPT = 96  # at most this many (a soak's hours): past it every other sample goes, and the interval doubles
MIN_SAMPLES = 8  # fewer than this is no slope: the growth is not judged


def slope_per_call(calls, values):
    """The slope of `values` over `calls` (units per call): the median of the slopes between
    every two samples (Theil and Sen's estimator), after a one-off step is discounted: the
    largest rise between neighbouring samples counts as the median rise where it stands alone
    (more than four times as far above the median as the next largest), and so does the largest
    fall; and the rise discounted (0 when none was). Fewer than 3 samples: (0.0, 0).

    The median, not a least-squares fit: a process whose resident memory swings between two
    levels as buffers are mapped and unmapped (ggml's sessions: 0 or -15 MiB from one sample to
    the next) gives least squares a slope of that noise over the span (14 KiB per session over
    300 sessions); pairs of samples at one level, and the swings between levels, balance in the
    median. Such swings are many, so none stands alone to be discounted. A leak rises between
    every pair of samples, so its median slope is its rate."""
    n = len(calls)
    if n < 3:
        return 0.0, 0
    rises = [values[i + 1] - values[i] for i in range(n - 1)]
    ordered = sorted(rises)
    median = ordered[(n - 1) // 2]

    def alone(extreme, runner_up):  # how far the extreme rise stands out beyond the median, where it stands alone
        beyond, next_beyond = abs(extreme - median), abs(runner_up - median)
        return beyond if beyond > 4 * next_beyond else 0

    discounted = alone(ordered[-1], ordered[-2])
    fallen = alone(ordered[0], ordered[1])
    largest, smallest = rises.index(ordered[-1]), rises.index(ordered[0])
    adjusted = [values[i] - (discounted if i > largest else 0) + (fallen if i > smallest else 0) for i in range(n)]
    slopes = sorted((adjusted[j] - adjusted[i]) / (calls[j] - calls[i]) for i in range(n) for j in range(i + 1, n) if calls[j] != calls[i])
    if not slopes:
        return 0.0, discounted
    middle = len(slopes) // 2
    return (slopes[middle] if len(slopes) % 2 else (slopes[middle - 1] + slopes[middle]) / 2), discounted


@dataclass(frozen=True)
class Growth:
    """One gauge's samples after the warm-up and what they come to. `key`: its name in
    report.json and JUnit ('rss'); `gauge`: in words ('process RSS'); `per`: what a call is (a
    copy, an allocation, a run, a session)."""

    key: str
    gauge: str
    per: str
    calls: tuple[int, ...]
    values: tuple[int, ...]
    threshold: float
    slope: float
    discounted: int

    @property
    def judged(self) -> bool:
        return len(self.calls) >= MIN_SAMPLES

    @property
    def grows(self) -> bool:
        return self.judged and self.slope > self.threshold

    @property
    def per_1000_calls(self) -> float:
        return self.slope * 1000

    def describe(self) -> str:
        """'process RSS grew 16.0 KiB per copy (15.6 MiB per 1,000 copies) over copies 1,000 to 10,000 (24 samples)'."""
        verb = "grew" if self.slope >= 0 else "shrank"
        span = f"over {plural(self.per)} {self.calls[0]:,} to {self.calls[-1]:,} ({len(self.calls)} samples)" if self.calls else "(no samples)"
        jump = f"; a one-off rise of {size_text(self.discounted)} discounted" if self.discounted else ""
        return (f"{self.gauge} {verb} {size_text(abs(self.slope))} per {self.per} ({size_text(abs(self.per_1000_calls))} per 1,000 "
                f"{plural(self.per)}) {span}{jump}")

    def curve(self) -> GrowthCurve:
        """The curve as the evidence holds it (report/curve.py draws it; JUnit has its figures)."""
        return GrowthCurve(self.calls, self.values, round(self.slope, 1), self.gauge, "bytes", self.per, round(self.per_1000_calls), self.threshold,
                           self.discounted, self.grows)

    def evidence(self) -> dict:
        """The curve as report.json carries it."""
        return self.curve().to_wire()


def judge(key: str, gauge: str, per: str, calls: Sequence[int], values: Sequence[int], threshold: float = THRESHOLD_PER_CALL) -> Growth:
    """The growth of one gauge's samples (taken after `calls`): its slope per call, judged
    against `threshold` bytes per call."""
    slope, discounted = slope_per_call(list(calls), list(values))
    return Growth(key, gauge, per, tuple(calls), tuple(values), threshold, slope, discounted)


def plural(word: str) -> str:
    return word[:-1] + "ies" if word.endswith("y") else word + "s"


def size_text(amount: float) -> str:
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if amount >= factor:
            return f"{amount / factor:.1f} {unit}"
    return f"{amount:.0f} bytes"


STATM = "/proc/self/statm"


def rss_bytes() -> int | None:
    """The process's resident memory now (Linux: /proc/self/statm); None where it cannot be read."""
    try:
        with open(STATM, encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Gauge:
    """What is sampled: `key` and `label` as in `Growth`; `read` gives bytes (None: it cannot be read)."""

    key: str
    label: str
    read: Callable[[], "int | None"]


RSS = Gauge("rss", "process RSS", rss_bytes)


class Sampler:
    """Reads each gauge after calls `warmup`, `warmup + every`, ... of a loop of `count` calls
    (on past `count` under a soak): `after(call)` after each call is one comparison until a
    sample is due. A gauge that reads None is dropped from then on, and says why in `dropped`."""

    def __init__(self, count: int, gauges: list[Gauge], per: str, threshold: float = THRESHOLD_PER_CALL):
        self.warmup = max(1, int(count * WARMUP_FRACTION))
        self.every = max(1, (count - self.warmup) // SAMPLES)
        self.due = self.warmup
        self.per, self.threshold = per, threshold
        self.gauges = {gauge.key: gauge for gauge in gauges}
        self.samples: dict[str, list[tuple[int, int]]] = {gauge.key: [] for gauge in gauges}
        self.dropped: dict[str, str] = {}

    def is_due(self, call: int) -> bool:
        """Whether a sample is due after `call` (the loop checks its bytes at the same calls:
        the regular points between the first and the last)."""
        return call >= self.due

    def after(self, call: int) -> bool:
        """Samples the gauges where a sample is due after `call`; whether it was (the loop checks
        its bytes at the same calls: the regular points between the first and the last)."""
        if call < self.due:
            return False
        self.due += self.every
        for key, gauge in list(self.gauges.items()):
            value = gauge.read()
            if value is None:
                del self.gauges[key]
                self.dropped[key] = f"{gauge.label} could not be read after call {call:,}"
                continue
            self.samples[key].append((call, value))
        if max(map(len, self.samples.values()), default=0) > KEPT:
            # A curve of bounded size in report.json and report.html, however long a soak runs.
            self.samples = {key: points[::2] for key, points in self.samples.items()}
            self.every *= 2
            self.due = max(points[-1][0] for points in self.samples.values() if points) + self.every
        return True

    def growths(self) -> list[Growth]:
        """Each gauge still read, judged over its samples."""
        return [judge(key, gauge.label, self.per, [c for c, _ in self.samples[key]], [v for _, v in self.samples[key]], self.threshold)
                for key, gauge in self.gauges.items()]


class Heartbeat:
    """Whether a second has passed since the loop last said where it is: a long loop announces
    its step about once a second (the worker's timeout counts from the last announcement), never
    once per call (that floods the pipe to the parent)."""

    def __init__(self, period_s: float = 1.0):
        self.period_s, self.last = period_s, time.monotonic()

    def due(self) -> bool:
        now = time.monotonic()
        if now - self.last < self.period_s:
            return False
        self.last = now
        return True
