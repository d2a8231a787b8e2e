"""`--conformance-shard=K/N`: one run spread over N machines, each running a deterministic Kth.

The engine is the CI system's own matrix (N jobs, then `ort-conformance merge` of their report
folders), not a scheduler of ours. Which shard a case belongs to depends on its node id alone
(`ort-conformance/<family>::<contract>[<device>-<params>]`, the same wherever the kit is installed
and pytest runs): the first 8 bytes of its SHA-256, modulo N. So the split is the same on every
machine for the same catalogue, needs no coordination, and a case keeps its shard when others are
added. A shard alone never certifies (conformance.outcomes.verdict); its report says "shard K of N".
"""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import dataclass
from typing import Any

import pytest

MAX_SHARDS = 1000


@dataclass(frozen=True)
class Shard:
    index: int  # 1..count
    count: int

    @property
    def text(self) -> str:
        return f"shard {self.index} of {self.count}"

    def holds(self, nodeid: str) -> bool:
        return shard_of(nodeid, self.count) == self.index

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "count": self.count, "text": self.text}


def shard_of(nodeid: str, count: int) -> int:
    """The shard (1..count) the case `nodeid` belongs to."""
    return int.from_bytes(hashlib.sha256(nodeid.encode("utf-8")).digest()[:8], "big") % count + 1


def shard_option(text: str) -> Shard:
    """--conformance-shard's value: K/N with 1 <= K <= N <= MAX_SHARDS."""
    index, slash, count = text.partition("/")
    try:
        shard = Shard(int(index), int(count)) if slash else None
    except ValueError:
        shard = None
    if shard is None:
        raise argparse.ArgumentTypeError(f"expects K/N (shard K of N, e.g. 1/4), got {text!r}")
    if not 1 <= shard.count <= MAX_SHARDS or not 1 <= shard.index <= shard.count:
        raise argparse.ArgumentTypeError(f"expects K/N with 1 <= K <= N <= {MAX_SHARDS}, got {text!r}")
    return shard


def select(config: pytest.Config, items: list[pytest.Item], shard: Shard) -> None:
    """Keeps in `items` those of `shard`; the others are deselected as pytest's -k deselects
    (pytest_deselected: counted by the run's selection and shown by pytest)."""
    kept = [item for item in items if shard.holds(item.nodeid)]
    dropped = [item for item in items if not shard.holds(item.nodeid)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def of(config: pytest.Config) -> Shard | None:
    return config.getoption("conformance_shard", None)


def as_dict(config: pytest.Config) -> dict[str, Any] | None:
    """The run's shard as report.json and the journal give it; None for a whole run."""
    shard = of(config)
    return shard.to_dict() if shard else None


def named(config: pytest.Config) -> list[str]:
    """What names the run's subset when it is a shard: ["shard K of N"], else []."""
    shard = of(config)
    return [shard.text] if shard else []


class ShardSelection:
    """Registered beside the run when --conformance-shard is given: keeps the shard's items."""

    def __init__(self, shard: Shard):
        self.shard = shard

    @pytest.hookimpl(tryfirst=True)  # before the run orders what is left (ConformanceRun's own hook)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        select(config, items, self.shard)


def register(config: pytest.Config) -> None:
    shard = of(config)
    if shard:
        config.pluginmanager.register(ShardSelection(shard), "conformance-shard")
