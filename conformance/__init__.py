"""ort-ep-conformance: the memory and copy contract of ONNX Runtime execution providers, executable."""

from __future__ import annotations

from typing import TYPE_CHECKING


from conformance.version import __version__  # noqa: F401  (conformance.__version__, as users expect)

if TYPE_CHECKING:
    from conformance.matrix import CapabilityMatrix


def probe(ep: str | None = None, *, library: str | None = None, options: dict[str, str] | None = None, timeout: float = 60.0,
          throughput: bool = True, wrapper: str | None = None) -> CapabilityMatrix:
    """The copy-capability matrix of every device of an EP (default: every EP present).

    `ep` is an alias (`cpu`) or a provider name; `library` a plugin EP library to register
    first; `options` its provider options; `timeout` the seconds one device's probe may take;
    `throughput` False skips the GB/s figures; `wrapper` a command the child processes run under
    (`"qemu-x86_64 -cpu Skylake-Client-v4"`; ValueError when its program is not here). Runs in a child process, so an EP that aborts or
    hangs cannot take the caller down: a device lost that way has `error` set and no pairs.
    Raises conformance.isolation.controller.WorkerRefused (an EP that is not here, onnxruntime missing) or
    WorkerLost (the EP's worker died while it started). Loads neither pytest, onnx, jsonschema
    nor onnxruntime into the caller's process.

        matrix = conformance.probe("cuda", throughput=False)
        if matrix.supports("cpu", "default"): ...
    """
    from conformance.options import wrapper_command
    from conformance.run.probing import probe_eps

    return probe_eps(ep, library=library, options=options or {}, timeout=timeout, throughput=throughput, wrapper=wrapper_command(wrapper))
