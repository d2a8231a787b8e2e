"""What is not tried again on an EP device after a check was lost there to a crash or a hang.

A check lost to a crash or hang names the onnxruntime call it was making (the worker announces
each risky call before making it, as a `conformance.calls.Call`): that call is not made again on
that EP device after its first loss, and later checks stop before it as not_run, naming the call
and the lost check; every other check still runs. After one loss, not several: the same call on
the same device with the same kind of request fails the same way in practice, and each loss
costs a worker restart and, for a hang, the whole timeout. A loss with no call announced (the
kit lost in its own code, or an EP crashing outside any announced call) quarantines the check's
own call pattern (`LostPattern`), and after `LOST_CHECKS_PER_DEVICE` such losses the device's
remaining checks.

Must not know: pytest, workers. The plugin asks before each check (`reason`), tells each loss
(`record`), and each request to a worker carries the calls quarantined so far (`wire`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.calls import Call
from conformance.outcomes import Result

LOST_CHECKS_PER_DEVICE = 3


@dataclass(frozen=True)
class LostPattern:
    """Checks that make the same call on the same EP device share one crash: those of one
    check function, on one device, in one copy direction (None where the check has none)."""

    check: str
    device: int
    direction: str | None = None


class Quarantine:
    """The quarantine of one EP device (`device`: its index among its EP's devices)."""

    def __init__(self, device: int):
        self.device = device
        self.calls: dict[Call, str] = {}  # call -> why it is not made again (a check lost while making it)
        self.patterns: dict[LostPattern, str] = {}  # a check's call pattern lost with no call announced -> why
        self.unannounced = 0  # checks of the EP lost here with no call announced

    def reason(self, check: str, direction: str | None) -> str:
        """Why a check of `check` in `direction` is not run here at all; '' when it runs (it may
        still stop before a quarantined call, which its worker decides)."""
        pattern = LostPattern(check, self.device, direction)
        if pattern in self.patterns:
            return self.patterns[pattern]
        if self.unannounced >= LOST_CHECKS_PER_DEVICE:
            return f"the EP device crashed or hung outside any announced call in {self.unannounced} checks; its remaining checks are not run"
        return ""

    def record(self, lost: Result, check: str, direction: str | None, name: str) -> None:
        """A check (`name`, of `check` in `direction`) was lost: its result is `lost`, whose
        details name the call it had in flight, if any."""
        call = lost.details.call
        if call:
            self.calls[call] = (f"that call ended in {lost.outcome.value} in the earlier check {name}, "
                                           "so it is not made again on this EP device")
            return
        self.patterns[LostPattern(check, self.device, direction)] = f"an earlier check making the same call ({name}) ended in {lost.outcome.value}"
        if lost.subject == "ep":  # onnxruntime's own crash says nothing about the EP device
            self.unannounced += 1

    def wire(self) -> list[dict[str, Any]]:
        """The calls quarantined so far, as a request carries them."""
        return [{"call": call.to_wire(), "reason": reason} for call, reason in self.calls.items()]
