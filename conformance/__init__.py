"""ort-ep-conformance: the memory and copy contract of ONNX Runtime execution providers, executable."""


# The one place the version is written: pyproject.toml reads it from here (without importing
# the package), and reports carry it without asking the installed distribution, which costs
# 3 ms and knows nothing in a source tree that was never installed.
__version__ = "0.1.0"


def probe(ep: str | None = None, *, library: str | None = None, options: dict[str, str] | None = None, timeout: float = 60.0):
    """The copy-capability matrix of every device of an EP (default: every EP present), as data.

    Runs in a child process, so an EP that aborts or hangs cannot take the caller down.
    """
    from conformance.probing import probe_eps

    return probe_eps(ep, library=library, options=options or {}, timeout=timeout)
