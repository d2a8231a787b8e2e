"""`python -m conformance.worker`: the public path of the worker process, kept where the README and
vendors' scripts name it. The process itself lives in conformance.engine.serve."""

from __future__ import annotations

if __name__ == "__main__":
    from conformance.engine.serve import main

    main()
