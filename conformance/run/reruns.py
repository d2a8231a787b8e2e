"""Tries again: a failure told from a flake, a crash quarantined only when it comes back, and a
worker lost to the machine told from one lost to the EP.

A case that failed, crashed or timed out is tried again in a fresh worker (a process of its own,
`WorkerPool.own`): up to `--conformance-rerun` N times, and once in any case after a crash or a
hang (deqp-runner and Android CTS rerun failures the same way). The tries stop at the first
whose outcome differs from the first try's. A case whose tries all agree keeps its outcome (a
crash twice is a crash, and its call is quarantined as before); one whose tries differ is
`flaky`: counted against the verdict as a failure is, never certified, with every try's outcome
and message in its details.

A try whose worker the machine may have ended (the loss's `machine`: killed by a SIGKILL the kit
had not sent, as the OOM killer and CI runners do, or stopped by a signal or kept waiting for a
CPU by other processes when its time ran out; see conformance.outcomes.MachineEvent) is not weighed yet: the case is tried once more at once.
Where that try is not lost to such an event too, the first was the machine's: it is not counted
(the case is settled on the tries that follow it, as if they were its first), and it is kept
in `Details.tries` marked not counted, and in `Details.machine_events` with its
evidence and a sentence for the reports. An EP can send itself SIGKILL or SIGSTOP, or spin, as well; one
that does so again on the next try is the EP's crash or timeout, both tries counted. Plain data
in and out: knows nothing of workers or pytest.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Callable, Iterator

from conformance.outcomes import RERUN, CaseReply, Details, ExcusedTry, MachineEvent, Outcome, Tried

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
    made: list[CaseReply] = []  # every try, in order
    excused: list[int] = []  # the indexes in `made` of the tries lost to the machine, not counted
    counted = _counted(first, again, made, excused)
    tries = [next(counted)]  # (index in `made`, try) of each try that counts
    head = tries[0][1]
    for _ in range(tries_wanted(head, reruns)):
        tries.append(next(counted))
        if tries[-1][1].outcome is not head.outcome:
            break
    if len(made) == 1:
        return first
    record = tuple(Tried(t.outcome, t.message, counted=index not in excused) for index, t in enumerate(made))
    events = tuple(_event_entry(made, index) for index in excused)
    if all(t.outcome is head.outcome for _, t in tries):
        return CaseReply(head.outcome, head.message, _weighed(head, record, events), head.duration)
    broken = next(t for _, t in tries if t.outcome in RERUN)  # what a failing try showed: its violations, its call
    message = flaky_message([(index + 1, t) for index, t in tries])
    return CaseReply(Outcome.FLAKY, message, _weighed(broken, record, events), head.duration)


def _counted(first: CaseReply, again: Callable[[], CaseReply], made: list[CaseReply], excused: list[int]) -> Iterator[tuple[int, CaseReply]]:
    """The tries that count, with their indexes in `made`, each made when it is asked for
    (`again()`), every try appended to `made`: a try lost to the machine is followed by the next
    at once, and is excused (its index in `excused`) unless that one is lost to the machine too,
    when both count."""
    reply = first
    while True:
        made.append(reply)
        if machine_event(reply) is None:
            yield len(made) - 1, reply
            reply = again()
            continue
        following = again()
        if machine_event(following) is None:
            excused.append(len(made) - 1)
            reply = following
            continue
        made.append(following)  # the event came back: the EP's, as any loss that comes back is
        yield len(made) - 2, reply
        yield len(made) - 1, following
        reply = again()


def machine_event(reply: CaseReply) -> MachineEvent | None:
    """The machine's event a try was lost to, as its details name it (attribution.details_of)."""
    return reply.details.machine if reply.outcome in LOST else None


def _weighed(reply: CaseReply, tries: tuple[Tried, ...], events: tuple[ExcusedTry, ...]) -> Details:
    """A try's details as the settled case keeps them: the suspicion of a machine's event was
    weighed against the next try, and what came of it is said by `tries` and `machine_events`."""
    return dataclasses.replace(reply.details, machine=None, tries=tries, machine_events=events)


# How the try after one lost to the machine ended, said after 'try N'.
_ENDED = {Outcome.PASS: "passed", Outcome.FAIL: "failed", Outcome.CRASH: "crashed", Outcome.TIMEOUT: "timed out",
          Outcome.ERROR: "could not be checked", Outcome.NOT_RUN: "was not run", Outcome.NOT_APPLICABLE: "was not applicable"}


def _event_entry(made: list[CaseReply], index: int) -> ExcusedTry:
    """Details.machine_events' entry for try `index`, lost to the machine: its number, the
    event with its evidence, and the sentence the reports show."""
    event = machine_event(made[index])
    assert event is not None, "only a try lost to the machine is excused"
    following = made[index + 1]
    ended = _ENDED.get(following.outcome, f"gave {following.outcome.value}")
    text = f"the worker was {event.said()} on try {index + 1}; try {index + 2} {ended}: not counted against the EP"
    return ExcusedTry(index + 1, event, text)


def flaky_message(tries: list[tuple[int, CaseReply]]) -> str:
    """'its 2 tries gave different outcomes: try 1 fail: <first line>; try 2 pass', each try by
    its number among all that were made (one lost to the machine is not among these)."""
    said = []
    for number, attempt in tries:
        line = " ".join((attempt.message.strip().splitlines() or [""])[0].split())[:240]
        said.append(f"try {number} {attempt.outcome.value}" + (f": {line}" if line else ""))
    return f"its {len(tries)} tries gave different outcomes: " + "; ".join(said)
