"""Strict (certification) runs: nothing required may be left unshown.

In a normal run a required contract that could not run on any of its cases makes the verdict
`incomplete`, and the run still exits 0. A certification run is a yes/no answer, as in
Kubernetes conformance: such a contract (on any EP device) makes the verdict `non_conformant`
and the run fail (`outcomes.verdict(strict=True)`). Single cases that are `not_run` because the
EP does not take that model stay skips, as long as the contract was shown on the device: an EP
need not run every dtype to keep the memory contract for those it runs.

The one thing decided per case, here, is a self-exemption: a required contract the vendor
declared not applicable in its own EP spec, rather than one that does not apply to what the
EP advertises. The reason is recorded on the result (`Details.strict`), so that the case
fails in pytest and JUnit and the verdict and the reports see it.

A strict run of a subset of the catalogue (conformance.plugin.selection) certifies nothing: its
verdict is `incomplete` and the run fails, unless what it ran already makes it non_conformant.
Nor does a strict run whose EP spec is still a draft (`draft_reason`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from conformance.catalogue.contracts import Contract, EpSpec
from conformance.outcomes import Outcome, Result


def violation(result: Result, contract: Contract, spec: EpSpec | None) -> str:
    """Why this result fails a strict run, or '' when it does not."""
    if contract.severity != "required" or not result.against_ep:
        return ""
    if result.outcome is Outcome.NOT_APPLICABLE and spec is not None and contract.id in spec.not_applicable:
        return f"a required contract was declared not applicable by the EP spec ({spec.location})"
    return ""


def mark(result: Result, contract: Contract, spec: EpSpec | None) -> Result:
    reason = violation(result, contract, spec)
    if not reason:
        return result
    return dataclasses.replace(result, details=dataclasses.replace(result.details, strict=reason))


def draft_reason(drafts: list[dict[str, Any]]) -> str:
    """Why a strict run certifies nothing while an EP spec is a draft ('' when none is): each
    draft's file and the claims left to confirm (`drafts`: report.json's `ep.draft` of each EP
    that has one, catalogue.claims.draft_of)."""
    return "; ".join(f"the EP spec {draft['spec']} is a draft (ort-conformance init): claims left to confirm: "
                     f"{', '.join(draft['unconfirmed']) or 'none'}; confirm each in its `verification`, then delete its `draft` line"
                     for draft in drafts)
