"""What a finished run hands the report: `RunRecord`, plain frozen data.

The report (conformance.report.build) reads a record, never the plugin: the plugin makes one
when the last check and the probe are done, and anything else (a test, a tool rebuilding a
report) can make one without pytest. Must not know: pytest, workers, how checks run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.facts import EpFacts
from conformance.outcomes import Result


@dataclass(frozen=True)
class EpRecord:
    """An EP of the run: its facts (as its worker or runner described it), its declaration in
    the catalogue (contracts.EpSpec, None when it has none) and its copy matrices, one per
    device."""

    facts: EpFacts
    spec: Any = None
    capabilities: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class RunRecord:
    """`results` in the order they were decided; `collected`: the checks pytest collected
    (fewer results make an incomplete run); `started`/`finished`: seconds since the epoch;
    `isolation`: 'worker' or 'none'; `contracts`: the catalogue's, in its order; `selection`:
    which part of the catalogue ran (conformance.plugin.selection.Selection.to_dict), None when not known;
    `wrapper`: the command the EP's processes ran under ('' for none); `emulated`: that command
    where it is a CPU emulator (options.emulator_of), else ''; `cpu`: the machine's CPU vendor
    as /proc/cpuinfo names it ('' where not known);
    `shard`: which shard of a run this is ({"index", "count", "text"}, --conformance-shard), None for a whole run."""

    results: tuple[Result, ...]
    eps: tuple[EpRecord, ...]
    contracts: tuple[Any, ...]
    spec_digest: str
    collected: int
    started: float
    finished: float
    interrupted: bool = False
    strict: bool = False
    isolation: str = "worker"
    python: str = ""
    platform: str = ""
    command: str = ""
    selection: dict[str, Any] | None = None
    wrapper: str = ""
    emulated: str = ""
    cpu: str = ""
    shard: dict[str, Any] | None = None
