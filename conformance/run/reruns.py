"""Tries again: a failure told from a flake, and a crash quarantined only when it comes back.

A case that failed, crashed or timed out is tried again in a fresh worker (a process of its own,
`WorkerPool.own`): up to `--conformance-rerun` N times, and once in any case after a crash or a
hang, so that a worker killed from outside or stopped for a while is not blamed on the call it
was in (deqp-runner and Android CTS rerun failures the same way). The tries stop at the first
whose outcome differs from the first try's. A case whose tries all agree keeps its outcome (a
crash twice is a crash, and its call is quarantined as before); one whose tries differ is
`flaky`: counted against the verdict as a failure is, never certified, with every try's outcome
and message in its details. Plain data in and out: knows nothing of workers or pytest.
"""

from __future__ import annotations

import argparse
from typing import Callable

from conformance.outcomes import RERUN, CaseReply, Outcome

LOST = (Outcome.CRASH, Outcome.TIMEOUT)
MAX_RERUNS = 10


def reruns_option(text: str) -> int:
    """--conformance-rerun's value: a whole number of tries, 0 to MAX_RERUNS."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_RERUNS:
        raise argparse.ArgumentTypeError(f"expects a number of tries from 0 to {MAX_RERUNS}, got {text!r}")
    return value


def tries_wanted(first: CaseReply, reruns: int) -> int:
    """How many more tries `first` calls for: `reruns` after a failure, crash or timeout, and at
    least one after a crash or timeout."""
    if first.outcome not in RERUN:
        return 0
    return max(reruns, 1) if first.outcome in LOST else reruns


def settle(first: CaseReply, again: Callable[[], CaseReply], reruns: int) -> CaseReply:
    """The case's reply after its tries: `again()` tries it once more in a fresh worker."""
    tries = [first]
    for _ in range(tries_wanted(first, reruns)):
        tries.append(again())
        if tries[-1].outcome is not first.outcome:
            break
    if len(tries) == 1:
        return first
    record = [{"outcome": t.outcome.value, "message": t.message} for t in tries]
    if all(t.outcome is first.outcome for t in tries):
        return CaseReply(first.outcome, first.message, {**first.details, "tries": record}, first.duration)
    broken = next(t for t in tries if t.outcome in RERUN)  # what a failing try showed: its violations, its call
    return CaseReply(Outcome.FLAKY, flaky_message(tries), {**broken.details, "tries": record}, first.duration)


def flaky_message(tries: list[CaseReply]) -> str:
    """'its 2 tries gave different outcomes: try 1 fail: <first line>; try 2 pass'."""
    said = []
    for number, attempt in enumerate(tries, start=1):
        line = " ".join((attempt.message.strip().splitlines() or [""])[0].split())[:240]
        said.append(f"try {number} {attempt.outcome.value}" + (f": {line}" if line else ""))
    return f"its {len(tries)} tries gave different outcomes: " + "; ".join(said)
