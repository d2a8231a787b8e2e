"""Bad update_inplace requests: each mismatch between a source and a float32 2x3 destination
(`MISMATCHES`), and what an update_inplace of a source kind needs (`require_source`). Shared by
the families that make them: update-inplace (refused, destination unchanged) and errors (the
refusal's message).
"""

from __future__ import annotations

from conformance.checks.context import CheckContext

MISMATCHES = {
    # request: (source element type, source shape) for a float32 2x3 destination
    "element-count": ("float32", (7,)),
    "element-type": ("int32", (2, 3)),  # same byte size, different element type
    "same-bytes-other-type": ("float64", (3,)),  # 24 bytes, like the destination, but 3 float64
    "fewer-elements": ("float32", (5,)),  # a copy sized by the destination reads past the source
    "other-element-size": ("float64", (2, 3)),  # the same element count, twice the bytes
}


def require_source(ctx: CheckContext, source: str, memory: str) -> None:
    """What an update_inplace(`source`) into `memory` needs: that memory, and the overload."""
    ctx.require_memory(memory)
    if source == "ortvalue":
        ctx.require_api("update_inplace_ortvalue", "has no update_inplace(OrtValue)")
