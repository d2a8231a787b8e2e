"""ort-ep-conformance: the memory and copy contract of ONNX Runtime execution providers, executable."""

from __future__ import annotations

from typing import TYPE_CHECKING


# The one place the version is written: pyproject.toml reads it from here (without importing
# the package), and reports carry it without asking the installed distribution, which costs
# 3 ms and knows nothing in a source tree that was never installed.
__version__ = "0.1.0"

if TYPE_CHECKING:
    from conformance.matrix import CapabilityMatrix


def probe(ep: str | None = None, *, library: str | None = None, options: dict[str, str] | None = None, timeout: float = 60.0,
          throughput: bool = True) -> CapabilityMatrix:
    """The copy-capability matrix of every device of an EP (default: every EP present).

    `ep` is an alias (`cpu`) or a provider name; `library` a plugin EP library to register
    first; `options` its provider options; `timeout` the seconds one device's probe may take;
    `throughput` False skips the GB/s figures. Runs in a child process, so an EP that aborts or
    hangs cannot take the caller down: a device lost that way has `error` set and no pairs.
    Raises conformance.isolation.WorkerRefused (an EP that is not here, onnxruntime missing) or
    WorkerLost (the EP's worker died while it started). Loads neither pytest, onnx, jsonschema
    nor onnxruntime into the caller's process.

        matrix = conformance.probe("cuda", throughput=False)
        if matrix.supports("cpu", "default"): ...
    """
    from conformance.probing import probe_eps

    return probe_eps(ep, library=library, options=options or {}, timeout=timeout, throughput=throughput)
