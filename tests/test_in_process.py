"""The in-process worker (--conformance-isolation none) behind the real worker's interface, and the
scheduler driving it with plain data: a planned case in, a CaseReply out, no pytest item."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from conformance.facts import EpFacts
from conformance.isolation.controller import WorkerRefused
from conformance.isolation.in_process import InProcessWorker
from conformance.outcomes import CaseReply, Details, Outcome
from conformance.proofs import BYTES_COMPARED, Proven
from conformance.run.pool import EpUnderTest
from conformance.run.scheduler import Planned, Scheduler

FACTS = {"label": "x", "provider": "XExecutionProvider", "devices": [{"index": 0, "label": "x"}]}
PASSED = {"outcome": "pass", "message": "", "details": {"evidence": {"bytes_compared": 4}}, "duration": 0.5}


def handler(seen: list):
    def handle(request):
        seen.append(request)
        return {"ok": True, "facts": FACTS} if request["op"] == "init" else {"ok": True, "result": dict(PASSED, message=request["id"])}
    return handle


def test_an_in_process_worker_runs_a_submitted_request_when_it_is_collected_and_only_then():
    seen: list = []
    worker = InProcessWorker({"ep": "x"}, handler(seen))
    assert worker.ready() == EpFacts.from_wire(FACTS) and seen == [{"ep": "x", "op": "init"}]
    worker.submit([("a", {"op": "run"}, "a on x"), ("b", {"op": "run"}, "b on x")])
    assert worker.outstanding("a") and worker.outstanding("b") and len(seen) == 1
    assert worker.collect("b")["result"]["message"] == "b"
    assert [request.get("id") for request in seen] == [None, "b"]
    assert not worker.outstanding("b") and worker.collect("b") is None  # collected once, as the real worker's


def test_an_in_process_worker_refuses_as_the_real_one_does():
    worker = InProcessWorker({"ep": "nosuch"}, lambda request: {"ok": False, "error": "unknown EP 'nosuch'", "kind": "EpUnavailable"})
    with pytest.raises(WorkerRefused, match="unknown EP 'nosuch'"):
        worker.ready()


def test_the_scheduler_runs_a_planned_case_on_the_eps_worker_and_an_isolated_one_in_a_process_of_its_own():
    seen: list = []
    worker = InProcessWorker({"ep": "x"}, handler(seen))
    ep = EpUnderTest("x", worker.ready(), worker, init={"ep": "x"})
    pool = SimpleNamespace(isolated=lambda ep: "the EP's worker of isolated contracts")
    scheduler = Scheduler([ep], pool, lookahead=True)  # type: ignore[arg-type]
    planned = Planned("c[x]", {"op": "run", "contract": "c", "device": 0, "params": {}}, "c on x", ep="x", check="c")
    assert scheduler.run_case(planned) == CaseReply(Outcome.PASS, "c[x]", Details(evidence=Proven({BYTES_COMPARED: 4})), 0.5)
    # A bad request never runs in pytest's process, even planned ahead.
    assert scheduler.worker_for(dataclasses.replace(planned, isolated=True)) == "the EP's worker of isolated contracts"
    assert scheduler.worker_for(planned) is worker
