"""Which part of the catalogue a run ran: the whole of it, or a subset that must never certify.

A run's checks are the catalogue's contracts × the EP devices × each contract's parameters. A
run that ends with a result for every one of them ran the catalogue; one that does not ran a
subset, whatever made it so: `-k`, `-m`, `--deselect`, node ids or single spec files named on
the command line, `--lf`/`--sw`, `-x`/`--maxfail`, an interrupt. The subset is found by
comparing those cases with the results the run recorded, not by reading the options: an option
this module has never heard of (a plugin's own deselection) cannot make a subset look whole.
The options only name it, for the reader.

Must not know: how checks run, the report's files. `Selection` is plain data (report.json's
`selection`); `SelectionWatch` is the pytest side, which counts what pytest deselected and
how the session stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import pytest

from conformance.plugin.ids import STRESS

# The options whose values deselect items, as pytest spells them on the command line.
_NAMED_OPTIONS = (("keyword", "-k"), ("markexpr", "-m"))


def case_key(ep: str, contract: str, device: str, params: dict[str, Any]) -> tuple:
    """One check of the catalogue, as a result names it: the EP's provider, the contract, the
    device label and the parameters (by their text: a result's went through JSON)."""
    return ep, contract, device, tuple(sorted((name, repr(value)) for name, value in params.items()))


@dataclass(frozen=True)
class Selection:
    """`catalogue`: checks the catalogue holds for the EP devices of the run; `ran`: those with a
    result; `how`: what the command line and the session say made it a subset (may be empty when
    nothing names it: the count still tells)."""

    catalogue: int
    ran: int
    how: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return self.ran >= self.catalogue

    def describe(self) -> str:
        """'61 of 503 checks ran (-k from-numpy)'."""
        named = f" ({'; '.join(self.how)})" if self.how else ""
        return f"{self.ran} of {self.catalogue} checks ran{named}"

    def to_dict(self) -> dict[str, Any]:
        return {"complete": self.complete, "catalogue": self.catalogue, "ran": self.ran, "how": list(self.how), "text": self.describe()}


def compare(expected: Iterable[tuple], ran: Iterable[tuple], how: Iterable[str] = ()) -> Selection:
    """The selection of a run that should have run `expected` cases and has results for `ran`."""
    wanted = set(expected)
    done = wanted & set(ran)
    if len(done) == len(wanted):
        return Selection(len(wanted), len(done))  # -x with nothing failed, --ff: every check ran
    # What names it, or at least how many are missing: a subset is never left unexplained.
    return Selection(len(wanted), len(done), tuple(how) or (f"{len(wanted) - len(done)} checks of the catalogue have no result",))


# How many of the stress contracts a run left out are named: the line stays readable in a
# verdict's reasons; the rest are counted.
NAMED_STRESS = 6


def stress_left_out(contracts: list[str]) -> str:
    """'the stress tier left out (2 contracts: a.b, c.d)', at most NAMED_STRESS of them by name."""
    named = ", ".join(contracts[:NAMED_STRESS]) + (f" and {len(contracts) - NAMED_STRESS} more" if len(contracts) > NAMED_STRESS else "")
    return f"the stress tier left out ({len(contracts)} contracts: {named})"


class SelectionWatch:
    """Registered as a plugin beside the run: counts what pytest deselects (-k, -m, --deselect,
    --lf, --sw all go through pytest_deselected) and records how the session stopped, before the
    run's own pytest_sessionfinish reads it."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.collect_only = bool(config.option.collectonly)  # nothing is to run: no worker, no device, no report
        self.deselected = 0
        self.stress_left_out: set[str] = set()  # contracts of the stress tier with a case deselected
        self.stopped = ""

    @classmethod
    def register(cls, config: pytest.Config) -> "SelectionWatch":
        watch = cls(config)
        config.pluginmanager.register(watch, "conformance-selection")
        return watch

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)
        self.stress_left_out |= {item.contract.id for item in items if item.get_closest_marker(STRESS) is not None and hasattr(item, "contract")}

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        why = session.shouldfail or session.shouldstop
        if why:
            self.stopped = f"stopped early: {why}" if isinstance(why, str) else "stopped early"
        elif exitstatus == pytest.ExitCode.INTERRUPTED:
            self.stopped = "stopped early: interrupted"

    def how(self, chosen: list[str]) -> list[str]:
        """What the command line and the session name as the reasons for a subset; `chosen`: the
        items and shipped contract files named on the command line."""
        options = self.config.option
        named = [f"{flag} {getattr(options, name)}" for name, flag in _NAMED_OPTIONS if getattr(options, name, "")]
        named += [f"--deselect {item}" for item in getattr(options, "deselect", None) or ()]
        named += [f"{flag}" for name, flag in (("lf", "--lf"), ("stepwise", "--sw")) if getattr(options, name, False)]
        named += [f"named on the command line: {arg}" for arg in chosen]
        if self.deselected:
            named.append(f"{self.deselected} deselected")
        if self.stress_left_out:  # a run without its stress tier proves nothing under load: said by name
            named.append(stress_left_out(sorted(self.stress_left_out)))
        if getattr(options, "maxfail", 0):
            named.append(f"--maxfail {options.maxfail}" if options.maxfail != 1 else "-x")
        if self.stopped:
            named.append(self.stopped)
        return named
