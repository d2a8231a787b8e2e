"""Waivers from EP specs: a failing or unrunnable check covered by one becomes `waived`.

A waiver names a contract, optionally a device, a reason, an upstream URL and the onnxruntime
version from which it no longer holds. An expired waiver does not apply; a waived check that
passes is reported as not needing its waiver any more.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from conformance.contracts import EpSpec, Waiver
from conformance.outcomes import BROKEN, Outcome, Result


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def expired(waiver: Waiver, onnxruntime_version: str) -> bool:
    return waiver.until is not None and _version(onnxruntime_version) >= _version(waiver.until)


def matching(result: Result, spec: EpSpec | None) -> Waiver | None:
    if spec is None:
        return None
    for waiver in spec.waivers:
        if waiver.contract == result.contract and waiver.device in (None, result.device):
            return waiver
    return None


def apply(result: Result, spec: EpSpec | None, facts: dict[str, Any]) -> Result:
    waiver = matching(result, spec)
    if waiver is None:
        return result
    version = facts["onnxruntime"]["version"]
    if expired(waiver, version):
        details = dict(result.details, waiver=f"expired: held until onnxruntime {waiver.until}, this is {version} ({waiver.location})")
        return dataclasses.replace(result, details=details)
    if result.outcome is Outcome.PASS:
        details = dict(result.details, waiver=f"waiver no longer needed: {waiver.location} ({waiver.url})")
        return dataclasses.replace(result, details=details, message="passed; the waiver for it is no longer needed")
    if result.outcome in BROKEN or result.outcome is Outcome.NOT_RUN:
        details = dict(result.details, waived_outcome=result.outcome.value, waived_message=result.message)
        return dataclasses.replace(result, outcome=Outcome.WAIVED, message=f"waived ({waiver.url}): {waiver.reason}; was {result.outcome.value}: {result.message}", details=details)
    return result
