"""How a run takes the signals that end it: SIGTERM and SIGHUP as Ctrl-C, and none while the
report set is written.

CI sends SIGTERM when a job is cancelled or times out, a closed terminal sends SIGHUP; by
default either ends Python at once, and the run writes nothing. `install` makes both raise
KeyboardInterrupt as SIGINT does, so pytest ends the session as it does on Ctrl-C and the plugin
writes the report of what ran, marked interrupted. `held` keeps all three from interrupting the
writing of the report set: a second Ctrl-C there would otherwise leave a traceback and the old
report; it is noted, and the run ends once the set is written. Once a run is interrupted,
`note_from_now` does the same until its report is written. Must not know: pytest, reports.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

ENDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"{signal.Signals(signum).name} received")


def install() -> dict[int, Any]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt from now on (where this is the main thread:
    only it can set handlers); returns the handlers replaced, for `restore`."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    replaced: dict[int, Any] = {}
    for number in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(number) in (signal.SIG_DFL, None):  # a handler someone set on purpose is theirs
            replaced[number] = signal.signal(number, _interrupt)
    return replaced


def restore(replaced: dict[int, Any]) -> None:
    for number, handler in replaced.items():
        signal.signal(number, handler)


def note_from_now() -> tuple[list[int], dict[int, Any]]:
    """SIGINT, SIGTERM and SIGHUP noted from now on (in the list returned) rather than acted
    on, and the handlers replaced, for `restore`. A run interrupted once is ending already: a
    second Ctrl-C half a second later must not cut short the workers' end or its report."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        return received, {}
    return received, {number: signal.signal(number, lambda signum, frame: received.append(signum)) for number in ENDING}


@contextmanager
def held() -> Iterator[list[int]]:
    """While in it, SIGINT, SIGTERM and SIGHUP are noted (in the list it yields) rather than
    acted on; the handlers before are back afterwards."""
    received, before = note_from_now()
    try:
        yield received
    finally:
        restore(before)
