"""The memory curves of a result, drawn small: each gauge a check sampled over its calls (its
evidence's `growth`: calls, values, slope, threshold) as an inline SVG polyline of a few hundred
bytes, beside a dashed line of what the threshold's slope would have grown from the first
sample. The box is at least as tall as that growth, so a flat curve with a page of noise stays
flat to the eye, and a curve above the dashed line is one that grows.

A leaf of the report: nothing of the report package is imported, and a curve that is not as
expected (a hand-edited or older report.json) is drawn as nothing.
"""

from __future__ import annotations

from html import escape
from typing import Any

from conformance.outcomes import Details
from conformance.proofs import GROWTH, GrowthCurve

WIDTH, HEIGHT = 120, 28
GROWS, FLAT, LIMIT = "#c0392b", "#2c7be5", "#999"


def curves(result: dict[str, Any]) -> dict[str, GrowthCurve]:
    """The result's curves by gauge key ({} where it has none; a curve of fewer than two samples
    is no line)."""
    details = result.get("details")
    evidence = details.get("evidence") if isinstance(details, dict) else None
    if not isinstance(evidence, dict) or GROWTH.name not in evidence:
        return {}  # most results: no curve, and no need to read their details (a tenth of a 10 000-case report.html)
    growth = Details.from_wire(details).evidence.get(GROWTH) or {}
    return {key: curve for key, curve in growth.items() if len(curve.calls) >= 2}


def caption(curve: GrowthCurve) -> str:
    """'process RSS: 16.1 KiB per copy (15.7 MiB per 1,000), threshold 4.0 KiB; 25 samples over copies 1,000 to 10,000'."""
    per, calls, slope = curve.per, curve.calls, curve.slope_per_call
    return (f"{curve.gauge}: {_size(slope)} per {per} ({_size(slope * 1000)} per 1,000), "
            f"threshold {_size(curve.threshold_per_call)}; {len(calls)} samples over {_plural(per)} {calls[0]:,} to {calls[-1]:,}")


def svg(curve: GrowthCurve) -> str:
    calls, values = curve.calls, curve.values
    first, last = calls[0], calls[-1]
    rise = float(curve.threshold_per_call) * (last - first)  # what the threshold's slope grows over the samples
    low, high = min(values), max(max(values), values[0] + rise)
    span_x, span_y = (last - first) or 1, (high - low) or 1

    def point(call: float, value: float) -> str:
        return f"{round(1 + (call - first) / span_x * (WIDTH - 2))},{round(HEIGHT - 1 - (value - low) / span_y * (HEIGHT - 2))}"

    colour = GROWS if curve.grows else FLAT
    limit = f'<polyline points="{point(first, values[0])} {point(last, values[0] + rise)}" stroke="{LIMIT}" stroke-dasharray="3"/>' if rise else ""
    return (f'<svg class="curve" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" fill="none" aria-hidden="true">{limit}'
            f'<polyline points="{" ".join(point(c, v) for c, v in zip(calls, values, strict=True))}" stroke="{colour}"/></svg>')


def figures(result: dict[str, Any]) -> str:
    """The result's curves as HTML ('' where it has none): each an SVG and its figures in words
    (the words are what a screen reader reads: the drawing is hidden from it)."""
    drawn = []
    for curve in curves(result).values():
        try:
            drawn.append(f'<br>{svg(curve)} <small>{escape(caption(curve))}</small>')
        except (TypeError, ValueError, OverflowError):
            continue
    return "".join(drawn)


def _plural(word: str) -> str:
    return word[:-1] + "ies" if word.endswith("y") else word + "s"


def _size(amount: float) -> str:
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(amount) >= factor:
            return f"{amount / factor:.1f} {unit}"
    return f"{amount:.0f} bytes"
