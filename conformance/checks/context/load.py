"""How hard the stress tier pushes: the bounded form every certification run has, or stretched to
a duration by `--conformance-soak`.

A stress check always makes its bounded count of calls (the same on every machine, so that a
fault that strikes at call 8,000 is reached by every run); under a soak it goes on in rounds
until `deadline()`, with `threads()` doubled.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Load:
    soak_s: float = 0.0  # 0: the bounded form; otherwise about how long each stress case runs

    @property
    def soaking(self) -> bool:
        return self.soak_s > 0

    def threads(self, least: int = 4) -> int:
        """At least `least`, or the core count if higher; twice that under a soak."""
        count = max(least, os.cpu_count() or 1)
        return count * 2 if self.soaking else count

    def deadline(self) -> float:
        """The time.monotonic() at which a soaking check stops starting new rounds (now, when not soaking)."""
        return time.monotonic() + self.soak_s

    def describe(self) -> str:
        return f"soak {self.soak_s:g} s" if self.soaking else "bounded (no soak)"
