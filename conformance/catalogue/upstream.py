"""onnxruntime's own EP conformance invariants (PR 28968), mapped onto the contracts: which
contracts carry each one over through the public API, and why the others cannot be reached.
Read from `upstream_invariants.yaml` beside this module; rendered into docs/contracts.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from conformance import data


@dataclass(frozen=True)
class Invariant:
    name: str
    says: str
    reached_by: tuple[str, ...] = ()
    not_reached: str = ""
    note: str = ""


@dataclass(frozen=True)
class Invariants:
    source: str
    items: tuple[Invariant, ...]


def load(path: Path | None = None) -> Invariants:
    import yaml

    raw = yaml.safe_load((path or data.upstream_invariants_file()).read_text(encoding="utf-8"))
    items = tuple(Invariant(entry["name"], entry["says"], tuple(entry.get("reached_by", ())), " ".join(entry.get("not_reached", "").split()),
                            " ".join(entry.get("note", "").split())) for entry in raw["invariants"])
    return Invariants(raw["source"], items)


def render(invariants: Invariants) -> list[str]:
    """The catalogue's section: one table of every invariant, reached or not, and why."""
    out = ["## onnxruntime's own EP conformance invariants", "",
           f"Each invariant of {invariants.source}, and the contracts that carry it over through the public API. "
           "Those marked **not reached** have no public call that shows them; the reason is given.", "",
           "| invariant | what it says | here |", "| --- | --- | --- |"]
    for item in invariants.items:
        if item.reached_by:
            here = ", ".join(f"[`{c}`](#{c.replace('.', '')})" for c in item.reached_by) + (f" ({item.note})" if item.note else "")
        else:
            here = f"**not reached**: {item.not_reached}"
        out.append(f"| `{item.name}` | {item.says} | {here} |")
    return out + [""]
