"""The child process that runs checks: `python -m conformance.worker`.

Requests and replies are JSON lines. The protocol uses a private copy of the original stdout;
fd 1 is pointed at stderr, so whatever an EP library prints cannot corrupt a reply. This module
imports no plugin or report code.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any


def serve(requests, replies) -> None:
    from conformance.eps import EpUnavailable
    from conformance.runner import Runner
    from conformance.spec import SpecErrors

    runner = None
    for line in requests:
        request = json.loads(line)
        op = request["op"]
        try:
            if op == "init":
                runner = Runner(request["ep"], specs=request.get("specs"), library=request.get("library"),
                                options=request.get("options"), models_dir=request.get("models_dir"))
                reply: dict[str, Any] = {"ok": True, "facts": runner.facts}
            elif op == "run":
                reply = {"ok": True, "result": runner.run(request["contract"], request["device"], request["params"])}
            elif op == "probe":
                from conformance.capabilities import capability_matrix

                reply = {"ok": True, "capabilities": capability_matrix(runner.context(request["device"]), request.get("sizes"))}
            elif op == "exit":
                return
            else:
                reply = {"ok": False, "error": f"unknown request {op!r}"}
        except (EpUnavailable, SpecErrors) as exc:
            reply = {"ok": False, "error": str(exc), "kind": type(exc).__name__}
        except Exception as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "kind": "internal", "traceback": traceback.format_exc()}
        replies.write(json.dumps(reply, default=str) + "\n")
        replies.flush()


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin, replies)


if __name__ == "__main__":
    main()
