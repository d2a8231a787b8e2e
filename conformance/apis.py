"""The onnxruntime Python APIs the checks need: for each, its name (as contracts write it in
`requires_api` and checks in `@check(apis=...)`), the first onnxruntime version that has it, and
how to tell whether an imported onnxruntime module has it.

The one table: applicability reads it to decide `not_run` before a check, the check context and
the checks read it where they guard a call, `eps.describe` records what the build has, and the
contracts schema's `api` enum is kept equal to it by a test. A leaf module: it imports nothing of
the kit, and onnxruntime only as the module it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Api:
    name: str
    since: str  # the first onnxruntime version that has it
    present: Callable[[Any], bool]  # whether an imported onnxruntime module has it


def _update_inplace_takes_ortvalue(ort) -> bool:
    """Called, not read: a one-byte CPU value updated from another OrtValue holds its byte. Its
    docstring names OrtValue in every version, and its code may be a wrapper that hides what
    the function it wraps takes; only a call tells."""
    import numpy  # here: a leaf module imports what it calls with only where it calls it

    try:
        destination = ort.OrtValue.ortvalue_from_numpy(numpy.zeros(1, numpy.uint8))
        destination.update_inplace(ort.OrtValue.ortvalue_from_numpy(numpy.full(1, 7, numpy.uint8)))
        return int(destination.numpy()[0]) == 7
    except Exception:  # an older build refuses an OrtValue (TypeError, or its own error types)
        return False


def _allocates_from_memory_info(ort) -> bool:
    """Called, not read: allocating a one-byte CPU value with `memory_info=None` (the CPU path
    of a build that takes the keyword; a build without it, wrapped or not, refuses the keyword)."""
    import numpy

    try:
        value = ort.OrtValue.ortvalue_from_shape_and_type([1], numpy.uint8, memory_info=None)
    except Exception:
        return False
    return value is not None


APIS: tuple[Api, ...] = (
    Api("ep_devices", "1.22", lambda ort: hasattr(ort, "get_ep_devices")),
    Api("copy_tensors", "1.23", lambda ort: hasattr(ort, "copy_tensors")),
    Api("memory_info_alloc", "1.30", _allocates_from_memory_info),
    Api("update_inplace_ortvalue", "1.26", _update_inplace_takes_ortvalue),
    Api("graph_assignment_info", "1.24", lambda ort: hasattr(ort.InferenceSession, "get_provider_graph_assignment_info")),
    Api("session_memory_infos", "1.23", lambda ort: hasattr(ort.InferenceSession, "get_input_memory_infos")),
    Api("sync_stream", "1.23", lambda ort: hasattr(ort, "OrtEpDevice") and hasattr(ort.OrtEpDevice, "create_sync_stream")),
    Api("plugin_libraries", "1.22", lambda ort: hasattr(ort, "register_execution_provider_library")),
)
BY_NAME: dict[str, Api] = {api.name: api for api in APIS}


def support(ort) -> dict[str, bool]:
    """Which of the APIs this onnxruntime build has; checks that need a missing one are not_run."""
    return {api.name: api.present(ort) for api in APIS}


def since(name: str) -> str:
    """The first onnxruntime version with API `name`."""
    return BY_NAME[name].since
