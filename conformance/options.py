"""Command-line values shared by `ort-conformance` and the pytest plugin, parsed one way.

Each refuses a bad value with the message a user should read: `ep_options` with ValueError,
`seconds` with argparse.ArgumentTypeError, which argparse (and pytest's option parser) shows as
"argument --X: MESSAGE" since it is the option's `type`. `reason_of` words why a file named on
the command line (or in a spec) cannot be read or written.
"""

from __future__ import annotations

import argparse
import math


def ep_options(pairs: list[str]) -> dict[str, str]:
    """`--ep-option KEY=VALUE` values as a dict; a pair without `=` or without a key is refused."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--ep-option expects KEY=VALUE, got {pair!r}")
        options[key] = value
    return options


def reason_of(exc: Exception) -> str:
    """An OSError in a few words ("No such file or directory"), without repeating the path."""
    return getattr(exc, "strerror", None) or str(exc)


# The longest timeout taken: a check or probe that may hang for longer than a day is a typo
# (`1e9`) rather than a plan, and a far larger value overflows the waits it is handed to.
MAX_SECONDS = 86400.0


def seconds(text: str) -> float:
    """A timeout (`--conformance-timeout`, `probe --timeout`): a finite number of seconds above
    zero and at most a day (MAX_SECONDS)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expects a number of seconds above 0, got {text!r}")
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"expects a number of seconds up to {MAX_SECONDS:.0f} (a day), got {text!r}")
    return value
