"""Strict (certification) runs: nothing required may be left unshown.

In a normal run a required case that could not run here is `not_run` (a skip), and the verdict
is `incomplete` only when no case of that contract ran. A certification run is a yes/no
answer, as in Kubernetes conformance, where nothing may be skipped: every required EP case that
could not run, and every required contract the vendor declared not applicable in its own EP spec
(a self-exemption, not a fact derived from what the EP advertises), fails the run. The reason is
recorded on the result (`details["strict"]`), so the verdict and the reports see it too.
"""

from __future__ import annotations

import dataclasses

from conformance.contracts import Contract, EpSpec
from conformance.outcomes import Outcome, Result


def violation(result: Result, contract: Contract, spec: EpSpec | None) -> str:
    """Why this result fails a strict run, or '' when it does not."""
    if contract.severity != "required" or result.subject != "ep":
        return ""
    if result.outcome is Outcome.NOT_RUN:
        return f"a required case could not run ({result.message})"
    if result.outcome is Outcome.NOT_APPLICABLE and spec is not None and contract.id in spec.not_applicable:
        return f"a required contract was declared not applicable by the EP spec ({spec.location})"
    return ""


def mark(result: Result, contract: Contract, spec: EpSpec | None) -> Result:
    reason = violation(result, contract, spec)
    if not reason:
        return result
    return dataclasses.replace(result, details=dict(result.details, strict=reason))
