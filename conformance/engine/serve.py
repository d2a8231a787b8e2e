"""The child process that runs checks: `python -m conformance.engine.serve [--fork-server FD]`.

Requests and replies are JSON lines. The protocol uses a private copy of the original stdout;
fd 1 is pointed at stderr, so whatever an EP library prints cannot corrupt a reply. This module
imports no plugin or report code.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import traceback
from typing import Any, Callable, Iterator


def serve(requests, replies, arrived: Callable[[], bool] = lambda: False) -> None:
    """Answers the JSON lines of `requests` (text) on `replies` (binary, written unbuffered).
    `arrived`: whether more of `requests` waits to be read (see Handler._handover)."""
    requests = iter(requests)
    handler = Handler(lambda note: _write(replies, note), requests)
    handler.arrived = arrived
    for line in requests:
        request = json.loads(line)
        if request["op"] == "exit":
            return
        if request["op"] == "batch":
            # Requests sent ahead: each is answered (with its id) as soon as it has run.
            for item in request["requests"]:
                _write(replies, dict(handler.handle(item), id=item["id"]))
        else:
            reply = handler.handle(request)
            _write(replies, reply)
            if request["op"] == "init" and request.get("warm_up") and reply["ok"]:
                # Nothing to do until the parent has collected its items: import what building
                # the checks' models needs meanwhile (see models.warm_up), unless done already
                # while waiting for the handover (Handler._handover).
                from conformance.testbed.models import warm_up

                warm_up()


# A progress line's stand-in for the reproducer the last one on the channel carried (see
# Handler._progress_of; isolation.ledger reads it, by this value, without importing this module).
SAME_REPRODUCER = "same_reproducer"

# One encoder for every line: json.dumps with an argument builds a new one each call (3.3 µs a
# line against 1.4 µs, over 1500 lines a CPU run).
_encode = json.JSONEncoder(default=str).encode


def _write(replies, reply: dict[str, Any]) -> None:
    # One unbuffered write per line (a third of the time of a text stream's write and flush,
    # over 1500 lines a CPU run), repeated for what a signal may leave unwritten.
    data = (_encode(reply) + "\n").encode()
    while data:
        data = data[replies.write(data):]


class Handler:
    """Answers one request at a time; holds the Runner once `init` has created it. `notify`
    sends a line ahead of the answer: what a check is about to do, in case it never answers."""

    def __init__(self, notify: Callable[[dict[str, Any]], None] = lambda note: None, incoming: Iterator[str] = iter(()),  # noqa: B008  (empty: nothing to share)
                 handed: Callable[[], tuple[Any, dict[str, Any]]] | None = None):
        self.runner: Any = None  # the Runner, once init has made it
        self.notify = notify
        self.incoming = incoming  # the request lines still to come: a handover is read from them
        # What an init with "handover" is given: the catalogue and recipes read from `incoming`
        # (a worker process), or `handed` itself where the handler runs in the parent's process.
        self.handed = handed or self._handover
        self._reproducer_sent = ""  # the reproducer last sent ahead on this channel (see _progress_of)
        self._warm_up_before_handover = False  # see _handover
        self.arrived: Callable[[], bool] = lambda: False  # whether more of `incoming` waits to be read

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        from conformance.findings import CallQuarantined
        from conformance.testbed.eps import EpUnavailable
        from conformance.errors import SpecErrors

        try:
            return self._handle(request)
        except CallQuarantined as stop:  # a probe reached a call that crashed or hung earlier
            return {"ok": False, "error": f"stopped before {stop}", "kind": "CallQuarantined"}
        except SpecErrors as exc:  # each error as data: the parent shows them, it does not parse them
            return {"ok": False, "error": str(exc), "kind": "SpecErrors", "errors": [error.to_wire() for error in exc.errors]}
        except EpUnavailable as exc:
            return {"ok": False, "error": str(exc), "kind": "EpUnavailable"}
        except Exception as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "kind": "internal", "traceback": traceback.format_exc()}

    def _handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request["op"]
        if op == "init":
            from conformance.engine.runner import Runner

            self._warm_up_before_handover = bool(request.get("warm_up") and request.get("handover"))
            self.runner = Runner(request["ep"], specs=request.get("specs"), library=request.get("library"),
                                 options=request.get("options"), models_dir=request.get("models_dir"),
                                 models_record=request.get("models_record"), soak=request.get("soak") or 0.0,
                                 handed=self.handed if request.get("handover") else None)
            return {"ok": True, "facts": self.runner.facts.to_wire()}
        if op == "run":
            return {"ok": True, "result": self.runner.run(request["contract"], request["device"], request["params"],
                                                          self._progress_of(request), quarantined=request.get("quarantined"))}
        if op == "probe":
            from conformance.engine.capabilities import capability_matrix

            context = self.runner.context(request["device"])
            context.begin(self._progress_of(request), request.get("quarantined"))
            return {"ok": True, "capabilities": capability_matrix(context, request.get("sizes"))}
        if op == "observe":  # what sessions of the kit's models show of the EP (ort-conformance init)
            from conformance.engine.observe import sessions_seen

            context = self.runner.context(request["device"])
            context.begin(self._progress_of(request), request.get("quarantined"))
            return {"ok": True, "sessions": sessions_seen(context, request.get("dtypes"), request.get("runs"))}
        return {"ok": False, "error": f"unknown request {op!r}"}

    def _handover(self) -> tuple[Any, dict[str, Any]]:
        """The catalogue and recipes the parent hands over after init (isolation.handover). A
        worker told to warm up makes its imports first (models.warm_up) where the handover has
        not arrived: the parent is still reading and validating the catalogue (2 s for a vendor's
        10 000 contracts). Where it has arrived (the shipped catalogue is read before a worker
        has imported onnxruntime), the facts go first and the imports overlap pytest's
        collection, as in serve."""
        if self._warm_up_before_handover and not self.arrived():
            from conformance.testbed.models import warm_up

            warm_up()
        line = next(self.incoming, None)
        if line is None:
            raise RuntimeError("the parent ended before it handed over the catalogue")
        request = json.loads(line)
        if request.get("op") != "handover":
            raise RuntimeError(f"expected the catalogue's handover after init, got {request.get('op')!r}")
        import base64
        import gc
        import pickle

        # The cyclic collector off while the catalogue is unpickled: the objects it makes hold
        # no garbage cycle, and each collection their allocation triggers would traverse all
        # of them again (a 10 000-contract catalogue: 0.4 s with it, 0.12 s without).
        enabled = gc.isenabled()
        gc.disable()
        try:
            handed = pickle.loads(base64.b64decode(request["data"]))
            # It lives as long as the worker: frozen before the collector runs again, it is
            # not traversed by the first collection (every object of it young) nor later ones.
            gc.freeze()
        finally:
            if enabled:
                gc.enable()
        return handed["catalogue"], handed["recipes"]

    def _progress_of(self, request: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        """Sends what `request` does next ahead of its answer, in a line of its own. A
        reproducer the line before already carried on this channel is sent as `SAME_REPRODUCER`
        (the parent's ledger puts it back): the cases of a contract share theirs, a script of
        kilobytes, which each case sent again (100 MB of lines for 10 000 contracts)."""
        def send(note: dict[str, Any]) -> None:
            reproducer = note.get("reproducer")
            if reproducer is not None:
                if reproducer and reproducer == self._reproducer_sent:
                    note = {**{key: value for key, value in note.items() if key != "reproducer"}, SAME_REPRODUCER: True}
                self._reproducer_sent = reproducer
            self.notify({"id": request.get("id"), "progress": note})

        return send


def main() -> None:
    # A terminal's Ctrl-C reaches the whole process group; the parent decides what an interrupt
    # ends (it writes the report and closes its workers), so the worker does not die mid-check
    # with a traceback in its log. The same for SIGTERM and SIGHUP, which CI and a closed
    # terminal send to the whole group: the parent takes them as Ctrl-C (conformance.plugin.signals).
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)
    from conformance import orphans

    # Dies with the process that spawned it, even hung in an EP call (see orphans.py).
    orphans.die_with_parent(orphans.spawned_parent())
    if sys.argv[1:2] == ["--fork-server"]:
        from conformance.engine import fork_server as forkhost

        forkhost.start_beside(int(sys.argv[2]), preload, run, warm_forks)
    run()


def preload() -> None:
    """What a worker imports before onnxruntime, made once in the fork server's host so that the
    workers it forks have it (see conformance.isolation.fork_client): numpy and the kit's modules, the
    checks too. Not PyYAML: a worker of a pytest run is handed the catalogue already read
    (isolation.handover)."""
    import numpy  # noqa: F401

    from conformance.engine import capabilities, runner  # noqa: F401
    from conformance.checks import load_all

    load_all()


def warm_forks() -> None:
    """What the fork server imports once it serves, for every worker it forks: what building a
    model needs (models.warm_up; onnx no more, whose 0.9 s with ml_dtypes 0.7 each forked worker
    paid before, and the server beside the first worker's start)."""
    from conformance.testbed.models import warm_up

    warm_up()


def run() -> None:
    """Serves the requests on stdin until exit or their end, then ends the process (also in a
    worker forked by the fork server)."""
    from conformance import orphans

    # A forked worker dies with the fork server that forked it (a spawned one was set up in
    # main); either ends shortly after its parent's end of the requests' pipe is gone. Here,
    # not before: the host of the fork server must run one thread when it forks the server.
    orphans.die_with_parent()
    orphans.watch_stdin()
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin, replies, arrived=lambda: bool(select.select([sys.stdin], [], [], 0)[0]))
    # Every reply is written and flushed: end now, without the interpreter's teardown of
    # onnxruntime and the EP library, which the parent would otherwise wait for.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
