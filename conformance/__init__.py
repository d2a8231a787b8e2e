"""ort-ep-conformance: the memory and copy contract of ONNX Runtime execution providers, executable."""


def __getattr__(name: str):
    # The version is read from the installed distribution when asked for, not at import:
    # importing importlib.metadata is about 20 ms of a worker's start-up, and a worker never asks.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import metadata

    try:
        version = metadata.version("ort-ep-conformance")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        version = "0+unknown"
    globals()["__version__"] = version
    return version


def probe(ep: str | None = None, *, library: str | None = None, options: dict[str, str] | None = None, timeout: float = 60.0):
    """The copy-capability matrix of every device of an EP (default: every EP present), as data.

    Runs in a child process, so an EP that aborts or hangs cannot take the caller down.
    """
    from conformance.capabilities import probe_eps

    return probe_eps(ep, library=library, options=options or {}, timeout=timeout)
