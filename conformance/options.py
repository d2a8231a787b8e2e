"""Command-line values shared by `ort-conformance` and the pytest plugin, parsed one way.

Each refuses a bad value with the message a user should read: `ep_options` with ValueError,
`seconds` with argparse.ArgumentTypeError, which argparse (and pytest's option parser) shows as
"argument --X: MESSAGE" since it is the option's `type`. `reason_of` words why a file named on
the command line (or in a spec) cannot be read or written. `unknown_options` words the
warning for an option key the EP does not report.
"""

from __future__ import annotations

import argparse
import math
import re


def ep_options(pairs: list[str]) -> dict[str, str]:
    """`--ep-option KEY=VALUE` values as a dict; a pair without `=` or without a key is refused."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--ep-option expects KEY=VALUE, got {pair!r}")
        options[key] = value
    return options


def unknown_options(options: dict[str, str], provider: str, devices_options: list[dict[str, str]]) -> list[str]:
    """A warning for each provider option (`--ep-option`, not a `session.` entry) that the EP
    does not report: the keys an EP reports are those of its devices' `ep_options` (OrtEpDevice,
    the EP's defaults as the EP device lists them; `devices_options`: each device's); an EP that reports none cannot be checked
    against, and the warning says so. The option is passed on either way: onnxruntime's
    providers take options they do not list, and some ignore ones they do not know."""
    reported = sorted({key for device_options in devices_options for key in device_options})
    warnings = []
    for key in (k for k in options if not k.startswith("session.") and k not in reported):
        if reported:
            warnings.append(f"--ep-option {key}: {provider} reports no option '{key}'; the options it reports are: {', '.join(reported)}")
        else:
            warnings.append(f"--ep-option {key}: {provider} reports no options at all (its EP devices list no ep_options), "
                            f"so '{key}' cannot be checked; it is passed on as given")
    return warnings


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


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """How long the stress tier soaks (`--conformance-soak`): `0` (the bounded form every
    certification run has), or seconds with an optional unit, `90`, `90s`, `10m`, `2h`, at most a day."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([smh]?)\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"expects a duration such as 0, 90, 90s, 10m or 2h, got {text!r}")
    value = float(match.group(1)) * _UNITS[match.group(2)]
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"expects a duration up to {MAX_SECONDS:.0f} s (a day), got {text!r}")
    return value


# The command every process the kit starts that loads an EP runs under (`--conformance-wrapper`,
# `ort-conformance probe --wrapper`), from this variable where no option gives one.
WRAPPER_VARIABLE = "ORT_CONFORMANCE_WRAPPER"


def wrapper_command(text: str | None) -> tuple[str, ...]:
    """A wrapper's words (`qemu-x86_64 -cpu Skylake-Client-v4`, `taskset -c 0`, `valgrind -q`),
    split as a shell splits them; () for none. Its program must exist and be executable here:
    a wrapper that does not is refused with ValueError before any process starts."""
    import shlex
    import shutil

    if not text or not text.strip():
        return ()
    try:
        words = tuple(shlex.split(text))
    except ValueError as exc:
        raise ValueError(f"wrapper {text!r} cannot be split into words: {exc}") from None
    if shutil.which(words[0]) is None:
        raise ValueError(f"wrapper {text!r}: {words[0]} is not an executable program here (not found, or not executable)")
    return words


def emulator_of(wrapper: tuple[str, ...]) -> str | None:
    """The wrapper as said of an emulated CPU (`qemu-x86_64 -cpu Skylake-Client-v4`) when its
    program is a qemu user-mode emulator, else None: the EP then saw the CPU the emulator
    models, not the machine's, and its copies ran at the emulator's speed."""
    import os

    return " ".join(wrapper) if wrapper and os.path.basename(wrapper[0]).startswith("qemu-") else None
