"""onnxruntime (and EP) version numbers: comparing them, selecting them, and the API level of one.

Specs name versions as text ("1.27", "1.24.1", ">=1.30, <1.33"): waivers select builds by them,
a contract's `since` names the API level it needs, and a contested rule the builds it holds for.
Missing parts count as 0, so that 1.32 == 1.32.0; letters in a part (1.24.1rc1, 1.25.0.dev) are
dropped with the part's digits kept.
"""

from __future__ import annotations

import re
from typing import Callable

from conformance import apis

_COMPARE: dict[str, Callable[[tuple[int, ...], tuple[int, ...]], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, "<": lambda a, b: a < b,
}


def parse(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def padded(a: str, b: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Both versions as tuples of one length, so that 1.32 == 1.32.0."""
    x, y = parse(a), parse(b)
    width = max(len(x), len(y))
    return x + (0,) * (width - len(x)), y + (0,) * (width - len(y))


def at_least(version: str, floor: str) -> bool:
    return _COMPARE[">="](*padded(version, floor))


def selects(selector: str | None, version: str | None) -> bool:
    """Whether `version` matches a selector like '>=1.30, <1.33' (None selects everything;
    an unknown version matches no selector)."""
    if not selector:
        return True
    if not version:
        return False
    for clause in selector.split(","):
        match = re.fullmatch(r"\s*(==|!=|>=|<=|>|<)\s*(\S+)\s*", clause)
        if match is None or not _COMPARE[match.group(1)](*padded(version, match.group(2))):
            return False
    return True


def api_level(version: str | None) -> str | None:
    """The API level of an onnxruntime build: its major.minor ('1.24' for 1.24.1); None when
    the version is unknown."""
    if not version:
        return None
    major, minor = (parse(version) + (0, 0))[:2]
    return f"{major}.{minor}"


def below_api_level(since: str, version: str, needed: tuple[str, ...] = ()) -> str:
    """Why a contract (or a case) is not_applicable on a build older than the API it needs;
    `needed`: the names (conformance.apis) of the APIs it needs, of which the newer are named."""
    newer = [api for api in needed if not at_least(version, apis.since(api))]
    what = f" ({', '.join(newer)})" if newer else ""
    return (f"needs onnxruntime {since}'s API{what}; onnxruntime {version} is at API level {api_level(version)}, "
            f"the level this run certifies")
