"""The copy matrix's throughput figures as rows for people: GB/s per direction, copy method and
size class, each beside its ratio to the host memcpy of the same size measured in the same run.

The figures are measured, not checked: best of a few short trials within a small time budget,
on a machine that may be busy. Reports show them as information, never as pass or fail, and
`ort-conformance diff` leaves them out. report.md, report.html and `ort-conformance found`
render these rows; nothing here formats for one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

METHODS = ("copy_tensors", "update_inplace")
NOTE = ("Measured in this run, not checked: the best of a few short trials within a small time budget, on a machine "
        "that may be busy, so the figures are noisy and for information only; no contract passes or fails on them. "
        "GB/s is 10^9 bytes per second; the ratio is to the host's memcpy (a numpy copy of the same size, measured "
        "in the same run), so a ratio above 1 is noise in one figure or the other; '-' is a size left unmeasured when the "
        "time budget was spent.")


@dataclass(frozen=True)
class Figure:
    gbps: float | None
    ratio: float | None  # to host memcpy of the same size, in the same run

    def text(self) -> str:
        if self.gbps is None:
            return "-"
        return f"{gbps_text(self.gbps)} GB/s" + ("" if self.ratio is None else f" ({self.ratio:.2f}× memcpy)")


@dataclass(frozen=True)
class Row:
    source: str
    destination: str
    method: str
    figures: tuple[Figure, ...]


@dataclass(frozen=True)
class Table:
    sizes: tuple[str, ...]
    host_memcpy: tuple[float | None, ...]
    rows: tuple[Row, ...]


def gbps_text(value: float) -> str:
    return f"{value:.3g}"


def table(matrix: dict[str, Any]) -> Table | None:
    """The figures of one device's matrix, or None when it carries none (a lost probe, or a
    report from before the matrix measured throughput)."""
    pairs = [p for p in matrix.get("pairs", ()) if p.get("throughput")]
    if not pairs:
        return None
    host = matrix.get("host_memcpy") or {}
    sizes = list(host)
    for pair in pairs:
        for figures in pair["throughput"].values():
            sizes += [size for size in figures if size not in sizes]
    rows = []
    for pair in pairs:
        for method in sorted(pair["throughput"], key=lambda m: (METHODS.index(m) if m in METHODS else len(METHODS), m)):
            figures = pair["throughput"][method]
            rows.append(Row(pair["source"], pair["destination"], method, tuple(_figure(figures.get(size), host.get(size)) for size in sizes)))
    return Table(tuple(sizes), tuple(host.get(size) for size in sizes), tuple(rows))


def _figure(gbps: float | None, host: float | None) -> Figure:
    ratio = gbps / host if gbps is not None and host else None
    return Figure(gbps, ratio)
