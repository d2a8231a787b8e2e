"""The copy-capability matrix as `ort-conformance probe` prints it for a person: each EP device's
pairs with their status and detail, the GB/s figures beside host memcpy, and what it imports.

Must not know: how the matrix is probed.
"""

from __future__ import annotations

from typing import Any, Iterator


def lines(matrix: dict[str, Any]) -> Iterator[str]:
    """The lines `ort-conformance probe` prints for `matrix` (conformance.probe()'s, as a dict)."""
    from conformance.report import NO_EP_DEVICE, imports_lines

    for ep in matrix["eps"]:
        for device in ep["devices"]:
            yield f"{ep['ep']} — device {device['device']} (onnxruntime {ep['onnxruntime']})"
            if not ep.get("ep_device", True):
                # Never asked is not "plain CPU memory": what the EP's memory is, the probe cannot know.
                yield (f"  {NO_EP_DEVICE}: its DEFAULT and HOST_ACCESSIBLE memory are not known (it was never asked for memory info); "
                       "the pairs below are of plain CPU memory only, not of memory the EP owns")
            if ep.get("unusable"):
                yield f"  {ep['unusable']}"
            if device.get("error"):
                yield f"  probe lost: {device['error']}"
                continue
            width = max((len(p["source"]) for p in device["pairs"]), default=6)
            for pair in device["pairs"]:
                required = " (required)" if pair["required"] else ""
                yield f"  {pair['source']:>{width}} -> {pair['destination']:<{width}}  {pair['status']}{required}: {pair['detail']}"
                for method, figures in pair.get("throughput", {}).items():
                    yield f"  {'':>{width}}    {method} GB/s: {gbps_by_size(figures)}"
            if device.get("host_memcpy"):
                yield f"  host memcpy GB/s: {gbps_by_size(device['host_memcpy'])}"
            for line in imports_lines(device.get("imports")):
                yield f"  {line}"


def gbps_by_size(figures: dict[str, Any]) -> str:
    """GB/s by size, '-' where a size was not timed."""
    return ", ".join(f"{size} {'-' if gbps is None else gbps}" for size, gbps in figures.items())
