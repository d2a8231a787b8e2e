"""A reproducer for a case whose check said nothing more precise: the case run by the kit itself.

Light on purpose (no onnxruntime, numpy or onnx): the parent process builds it too, for a worker
that was lost before its check said how to reproduce what it was doing.
"""

from __future__ import annotations

from typing import Any


def kit_snippet(init: dict[str, Any], contract: str, device: int, params: dict[str, Any]) -> str:
    """Python that runs one case of `contract` with the EP set up as `init` (a worker's init
    request: ep, specs, library, options) and prints its result."""
    arguments = [repr(init["ep"])]
    arguments += [f"{key}={init[key]!r}" for key in ("specs", "library", "options") if init.get(key)]
    return ("# the case, run by the kit (pip install -e <this repository>)\n"
            "from conformance.engine.runner import Runner\n"
            f"print(Runner({', '.join(arguments)}).run({contract!r}, {device}, {params!r}))")
