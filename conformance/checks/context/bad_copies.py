"""Bad copy_tensors requests and the valid copy beside them: each request's sources and
destinations (`BAD_REQUESTS`), those onnxruntime passes to the EP unchecked (`PASSED_THROUGH`),
and the same direction asked right (`valid_copy`). Shared by the checks that make them:
copy.bad-requests and copy.c-api-bad-requests (refused, nothing written) and errors (the
refusal's message).
"""

from __future__ import annotations

from conformance.checks.context import CheckContext
from conformance.findings import ImpossibleResult, NotApplicable, NotRun, message_line
from conformance.testbed import tensors

DESTINATION_SENTINEL = 0x5A  # what a destination holds before the copy writes it


# Each bad request: the sources and destinations it passes to copy_tensors, as
# (memory end, element type, shape). "src" and "dst" stand for the two ends of the case's
# direction. `valid` is the same call made right (what must work for the refusal to mean
# anything); `request` is the bad call; `watched` are the destination indexes of `request` that
# must come out of the refusal unchanged.
_F32, _I32 = "float32", "int32"
BAD_REQUESTS: dict[str, dict[str, list[tuple[str, str, tuple[int, ...]]]]] = {
    "size-mismatch": {"sources": [("src", _F32, (7,))], "destinations": [("dst", _F32, (2, 3))]},
    "type-mismatch": {"sources": [("src", _I32, (2, 3))], "destinations": [("dst", _F32, (2, 3))]},
    # a copy sized by the destination reads past the source
    "fewer-elements": {"sources": [("src", _F32, (5,))], "destinations": [("dst", _F32, (2, 3))]},
    # the same element count, another element size: 48 bytes into 24
    "other-element-size": {"sources": [("src", "float64", (2, 3))], "destinations": [("dst", _F32, (2, 3))]},
    # pair 0 goes src→dst, pair 1 dst→src: one call, two memory infos on each side
    "mixed-memory": {"sources": [("src", _F32, (2, 3)), ("dst", _F32, (2, 3))], "destinations": [("dst", _F32, (2, 3)), ("src", _F32, (2, 3))]},
    "unequal-lists": {"sources": [("src", _F32, (2, 3)), ("src", _F32, (2, 3))], "destinations": [("dst", _F32, (2, 3))]},
    "empty-lists": {"sources": [], "destinations": []},
}
# The bad requests onnxruntime hands to the EP's data transfer unchecked and the EP must refuse
# all the same: each pair of a list of equal lengths and one memory info per side goes to the
# EP's CopyTensors as it is, and a pair of unequal sizes makes the copy read or write past a
# buffer of the EP's memory. Where the EP accepts one (WebGPU copies a 7-float source into a
# 6-float destination), the defect is both onnxruntime's and the EP's (subject "both"). An
# element type of the same size is onnxruntime's alone to check: a data transfer copies bytes.
PASSED_THROUGH = ("size-mismatch", "fewer-elements", "other-element-size")


def ends(spec: list[tuple[str, str, tuple[int, ...]]], source_kind: str, destination_kind: str):
    return [({"src": source_kind, "dst": destination_kind}[end], tensors.DTYPES[dtype], shape) for end, dtype, shape in spec]


def valid_copy(ctx: CheckContext, source_kind: str, destination_kind: str) -> None:
    """The same direction, asked right: if this fails, a refused bad request proves nothing.
    Between two CPU memories (an EP whose DEFAULT memory is CPU memory) the valid copy may
    lawfully be refused (copy.cpu-default-optional), so there is nothing to judge: the case is
    not_applicable. Elsewhere the failure is the EP's, held by the contract that requires the
    direction; the case is not_run and its reason names that contract."""
    float32 = tensors.DTYPES["float32"]
    direction = f"{source_kind}>{destination_kind}"
    failed = f"a valid copy_tensors {direction} of the same values failed, so the contract could not be tried"
    held_by = f"that failure is {_direction_contract(source_kind, destination_kind)}'s"
    try:  # placing values in device memory is itself a copy from the CPU
        source = ctx.place(tensors.sample(float32, (2, 3), seed=8), source_kind, float32)
        destination = ctx.place(tensors.sentinel(float32, (2, 3), DESTINATION_SENTINEL), destination_kind, float32)
    except (NotApplicable, NotRun, ImpossibleResult):
        raise
    except Exception as exc:
        raise NotRun(f"{failed} (placing the values; {held_by}): {type(exc).__name__}: {message_line(exc)[:200]}") from None
    try:
        ctx.copy([source], [destination], direction)
    except (NotApplicable, NotRun, ImpossibleResult):
        raise
    except Exception as exc:
        if ctx.is_cpu_memory(source_kind) and ctx.is_cpu_memory(destination_kind):
            raise NotApplicable(f"a valid copy_tensors {direction} is refused, which copy.cpu-default-optional allows between CPU memories "
                                f"({message_line(exc)[:160]}): no refusal of a bad request to judge") from None
        raise NotRun(f"{failed} ({held_by}): {type(exc).__name__}: {message_line(exc)[:200]}") from None


def _direction_contract(source_kind: str, destination_kind: str) -> str:
    """The contract that requires copies between these two memories, where a failed valid copy counts."""
    kinds = {source_kind, destination_kind}
    if "host_accessible" in kinds:
        return "copy.host-accessible-directions"
    return "copy.device-to-device" if kinds == {"default"} else "copy.required-directions"
