"""Waivers from EP specs: a failing or unrunnable check covered by one becomes `waived`.

A waiver names a contract, and optionally a device and version selectors (`onnxruntime`,
`ep_version`: it holds only for those builds), a reason, an upstream URL and the version from
which it no longer holds (`until`: an onnxruntime version, or `{ep: ...}` for the EP's own
version). An expired waiver does not apply; a waived check that passes is reported as not
needing its waiver any more. Each decision is recorded on the result as data
(`Details.waiver_status`), from which `summary()` builds the report's waiver table.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from conformance.catalogue.contracts import EpSpec, Waiver
from conformance.catalogue.versions import at_least, selects
from conformance.facts import EpFacts
from conformance.outcomes import BROKEN, Outcome, Result, WaiverStatus

NO_LONGER_NEEDED = "waiver no longer needed"


def expiry(waiver: Waiver, onnxruntime_version: str, ep_version: str | None) -> str:
    """Why the waiver no longer holds, or '' while it does."""
    if waiver.until is not None and at_least(onnxruntime_version, waiver.until):
        return f"held until onnxruntime {waiver.until}, this is {onnxruntime_version}"
    if waiver.until_ep is not None and ep_version and at_least(ep_version, waiver.until_ep):
        return f"held until EP version {waiver.until_ep}, this is {ep_version}"
    return ""


def ep_version_of(facts: EpFacts | None, device_label: str) -> str | None:
    """The version EP device `device_label`'s metadata gives, where it gives one."""
    device = next((d for d in facts.devices if d.label == device_label), None) if facts else None
    return device.ep_version if device else None


def matching(result: Result, spec: EpSpec | None, facts: EpFacts | None = None) -> Waiver | None:
    if spec is None:
        return None
    ort_version = facts.onnxruntime_version if facts else None
    ep_version = ep_version_of(facts, result.device)
    for waiver in spec.waivers:
        if waiver.contract != result.contract or waiver.device not in (None, result.device):
            continue
        if selects(waiver.onnxruntime, ort_version) and selects(waiver.ep_version, ep_version):
            return waiver
    return None


def _status(waiver: Waiver, status: str) -> WaiverStatus:
    until = " / ".join(filter(None, [waiver.until and f"onnxruntime {waiver.until}", waiver.until_ep and f"EP {waiver.until_ep}"]))
    return WaiverStatus(waiver.contract, status, waiver.reason, waiver.url, until or None, waiver.device,
                        str(waiver.location) if waiver.location else None)


def apply(result: Result, spec: EpSpec | None, facts: EpFacts) -> Result:
    waiver = matching(result, spec, facts)
    if waiver is None:
        return result
    version = facts.onnxruntime_version or ""
    why_expired = expiry(waiver, version, ep_version_of(facts, result.device))
    if why_expired:
        details = dataclasses.replace(result.details, waiver=f"expired: {why_expired} ({waiver.location})", waiver_status=_status(waiver, "expired"))
        return dataclasses.replace(result, details=details)
    if result.outcome is Outcome.PASS:
        details = dataclasses.replace(result.details, waiver=f"{NO_LONGER_NEEDED}: {waiver.location} ({waiver.url})",
                       waiver_status=_status(waiver, NO_LONGER_NEEDED))
        return dataclasses.replace(result, details=details, message=f"passed; {NO_LONGER_NEEDED}")
    if result.outcome is Outcome.FLAKY:
        # A waiver covers a known defect's failure; a case that passes one try and fails another
        # is unstable, which no waiver makes certifiable (Kubernetes conformance takes no flake).
        details = dataclasses.replace(result.details, waiver=f"not applied: a flaky case is never waived ({waiver.location})",
                       waiver_status=_status(waiver, "not applied: flaky"))
        return dataclasses.replace(result, details=details)
    if result.outcome in BROKEN or result.outcome is Outcome.NOT_RUN:
        details = dataclasses.replace(result.details, waived_outcome=result.outcome.value, waived_message=result.message,
                       waiver_status=_status(waiver, "applied"))
        message = f"waived ({waiver.url}): {waiver.reason}; was {result.outcome.value}: {result.message}"
        return dataclasses.replace(result, outcome=Outcome.WAIVED, message=message, details=details)
    return result


def summary(results: list[Result]) -> list[dict[str, Any]]:
    """One row per waiver and status, with the number of cases: the report's waiver table."""
    tally: Counter = Counter()
    rows: dict[tuple, WaiverStatus] = {}
    for result in results:
        status = result.details.waiver_status
        if status:
            key = (status.spec, status.contract, status.status)
            rows.setdefault(key, status)
            tally[key] += 1
    return [dict(rows[key].to_wire(), cases=tally[key]) for key in rows]
