"""The quarantine of an EP device (conformance/run/quarantine.py) and what the scheduler sends of it:
keyed by the typed Call a lost result names, with the texts checks and reports show."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conformance.calls import Call
from conformance.facts import EpFacts
from conformance.outcomes import Details, Outcome, Result
from conformance.run.pool import EpUnderTest
from conformance.run.quarantine import LOST_CHECKS_PER_DEVICE, LostPattern, Quarantine
from conformance.run.scheduler import Planned, Scheduler

COPY = Call("copy_tensors", "cpu>default")


def lost(outcome: Outcome = Outcome.CRASH, call: dict | str | None = None, subject: str = "ep") -> Result:
    return Result(contract="copy.roundtrip-exact", ep="RefDevExecutionProvider", device="refdev", params={}, outcome=outcome,
                  message="the process running it was killed by SIGABRT", spec="copy.yaml:1", severity="required",
                  subject=subject, details=Details.from_wire({"call": call} if call is not None else {}))


def test_a_lost_call_is_kept_as_the_call_its_wire_dict_names():
    quarantine = Quarantine(0)
    quarantine.record(lost(Outcome.TIMEOUT, COPY.to_wire()), "copy_roundtrip", "cpu>default", "copy.roundtrip-exact[refdev-float32]")
    assert quarantine.calls == {COPY: "that call ended in timeout in the earlier check copy.roundtrip-exact[refdev-float32], "
                                      "so it is not made again on this EP device"}
    # The check still runs: it stops before the call in its worker, which the request tells.
    assert quarantine.reason("copy_roundtrip", "cpu>default") == ""
    assert quarantine.wire() == [{"call": {"kind": "copy_tensors", "direction": "cpu>default", "note": ""},
                                  "reason": quarantine.calls[COPY]}]


def test_a_loss_with_no_call_quarantines_the_checks_pattern_on_its_device():
    quarantine = Quarantine(1)
    quarantine.record(lost(), "copy_roundtrip", "cpu>default", "copy.roundtrip-exact[refdev-1-float32]")
    assert list(quarantine.patterns) == [LostPattern("copy_roundtrip", 1, "cpu>default")]
    assert quarantine.reason("copy_roundtrip", "cpu>default") == ("an earlier check making the same call "
                                                                 "(copy.roundtrip-exact[refdev-1-float32]) ended in crash")
    assert quarantine.reason("copy_roundtrip", "default>cpu") == "" and quarantine.wire() == []


def test_after_so_many_losses_with_no_call_the_devices_remaining_checks_stop():
    quarantine = Quarantine(0)
    for n in range(LOST_CHECKS_PER_DEVICE):
        assert quarantine.reason("other", None) == ""
        quarantine.record(lost(), f"check{n}", None, f"c{n}")
    assert quarantine.reason("other", None) == (f"the EP device crashed or hung outside any announced call in {LOST_CHECKS_PER_DEVICE} "
                                                "checks; its remaining checks are not run")


def test_onnxruntimes_own_losses_do_not_count_against_the_device():
    quarantine = Quarantine(0)
    for n in range(LOST_CHECKS_PER_DEVICE):
        quarantine.record(lost(subject="runtime"), f"check{n}", None, f"c{n}")
    assert quarantine.reason("other", None) == ""


def test_each_ep_device_has_its_own_quarantine():
    ep = EpUnderTest("refdev", EpFacts("refdev", "RefDevExecutionProvider", "refdev"), None)
    ep.quarantine(0).record(lost(call=COPY.to_wire()), "copy_roundtrip", None, "x")
    assert ep.quarantine(0) is ep.quarantine(0) and COPY in ep.quarantine(0).calls
    assert ep.quarantine(1).calls == {}


@pytest.mark.parametrize("losses, carried", [(0, False), (1, True)])
def test_a_request_carries_its_devices_quarantined_calls_and_no_key_without_them(losses, carried):
    ep = EpUnderTest("refdev", EpFacts("refdev", "RefDevExecutionProvider", "refdev"), None, init={"ep": "refdev"})
    for _ in range(losses):
        ep.quarantine(0).record(lost(call=COPY.to_wire()), "copy_roundtrip", None, "x")
    scheduler = Scheduler([ep], pool=None, lookahead=True)
    planned = Planned("id", {"op": "run", "contract": "c", "device": 0, "params": {}}, "c on refdev")
    request = scheduler._request(SimpleNamespace(init={"ep": "refdev"}), planned)
    assert ("quarantined" in request) is carried
    if carried:
        assert request["quarantined"] == ep.quarantine(0).wire()
        assert [Call.from_wire(entry["call"]) for entry in request["quarantined"]] == [COPY]
    other_device = dict(planned.request, device=1)
    assert "quarantined" not in scheduler._request(SimpleNamespace(init={"ep": "refdev"}), Planned("id", other_device, ""))
