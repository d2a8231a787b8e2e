"""What a run showed of each claim of an EP spec: a claim is "verified" in a report only where
this run's own results back it, or where this run did not check it and the spec says a run did.

The spec's `verification` is the vendor's word about an earlier run ("lane refdev: the copy
matrix"). A run that checks the claim and sees it broken overrides that word: a report beside a
broken pair of the copy matrix never says the copy directions are verified. Each claim gets
`this_run`: `passed` (with the results that show it), `contradicted` (with the results that
break it) or `not_shown` (nothing of this run bears on it, or none of it ran); `verified` is then
true for `passed`, false for `contradicted`, and the spec's word for `not_shown`.

A leaf of the report package: report/__init__ (`build`) calls it; it imports neither the report
package nor a renderer.
"""

from __future__ import annotations

from typing import Any

from conformance.outcomes import BROKEN as BROKEN_OUTCOMES

# The contracts whose results bear on each claim. `copy_directions` is read from the copy
# matrix instead (its claimed pairs); `packages` from no result at all (a run installs nothing).
CLAIM_CONTRACTS = {
    "device_type": ("memory-info.declaration",),
    "memory": ("memory-info.declaration",),
    "session_memory": ("memory-info.session-inputs", "memory-info.session-outputs"),
}
SHOWN = ("pass", "waived")
BROKEN = tuple(outcome.value for outcome in BROKEN_OUTCOMES)  # a flaky case contradicts a claim as a failure does
# Statuses of the copy matrix (engine/capabilities.py) that show a claimed direction works, or not.
PAIR_WORKS = ("supported", "not_required")
PAIR_BROKEN = ("broken", "required_but_missing", "unsupported")


def in_this_run(claims: list[dict[str, Any]], ep: str, results: list[dict[str, Any]], matrices: list[dict[str, Any]],
                ep_device: bool = True) -> list[dict[str, Any]]:
    """`claims` (catalogue.claims.spec_claims) with what this run showed of each, for EP `ep`
    (its provider name). Without an EP device (`ep_device` false) the copy matrix is of plain
    CPU memory, the host's, and shows nothing of the EP's copies."""
    mine = [r for r in results if r.get("ep") == ep]
    pairs = [p for m in matrices if m.get("ep") == ep and not m.get("error") for p in m.get("pairs", ())] if ep_device else []
    out = []
    imports = [m["imports"] for m in matrices if m.get("ep") == ep and not m.get("error") and m.get("imports")] if ep_device else []
    for claim in claims:
        if claim["claim"] == "copy_directions":
            status, evidence = _copy_directions(claim["value"], pairs)
        elif claim["claim"] == "importer":
            status, evidence = _importer(claim["value"], imports)
        else:
            status, evidence = _contracts(CLAIM_CONTRACTS.get(claim["claim"], ()), mine)
        verified = {"passed": True, "contradicted": False}.get(status, claim["verified"])
        out.append(dict(claim, verified=verified, this_run={"status": status, "evidence": evidence}))
    return out


def _contracts(contracts: tuple[str, ...], results: list[dict[str, Any]]) -> tuple[str, str]:
    if not contracts:
        return "not_shown", "no check of a run bears on this claim"
    of_them = [r for r in results if r["contract"] in contracts]
    broken = sorted({r["contract"] for r in of_them if r["outcome"] in BROKEN})
    if broken:
        return "contradicted", ", ".join(broken) + " broke"
    shown = [c for c in contracts if any(r["contract"] == c and r["outcome"] in SHOWN for r in of_them)]
    if len(shown) == len(contracts):
        return "passed", ", ".join(shown) + " passed"
    return "not_shown", ", ".join(c for c in contracts if c not in shown) + " passed on no case here"


def _copy_directions(value: str, pairs: list[dict[str, Any]]) -> tuple[str, str]:
    """The claimed directions ('cpu>default, default>cpu') against this run's copy matrix."""
    claimed = [part.strip() for part in value.split(",") if ">" in part]
    status = {f"{p['source']}>{p['destination']}": p["status"] for p in pairs}
    if not pairs:
        return "not_shown", "this run has no copy matrix of the EP's memory"
    if not claimed:
        # Claiming none says the EP needs none: a pair that a contract requires and the EP refused says otherwise.
        required = [d for d, s in status.items() if s == "required_but_missing"]
        return ("contradicted", "the copy matrix requires " + ", ".join(required)) if required else (
            "passed", "the copy matrix: no direction is claimed, and none is required")
    broken = [f"{d} {status[d]}" for d in claimed if status.get(d) in PAIR_BROKEN]
    if broken:
        return "contradicted", "the copy matrix: " + ", ".join(broken)
    if all(status.get(d) in PAIR_WORKS for d in claimed):
        return "passed", "the copy matrix: every claimed direction delivered the bytes"
    return "not_shown", "the copy matrix does not show " + ", ".join(d for d in claimed if status.get(d) not in PAIR_WORKS)


def _importer(value: str, imports: list[dict[str, Any]]) -> tuple[str, str]:
    """The claimed importer ('none (...)' or 'handle types A, B; ...', catalogue.claims) against
    the import answers of this run's copy matrices."""
    if not imports:
        return "not_shown", "this run has no import answer of the EP device"
    unknown = [i.get("reason", "") for i in imports if i.get("status") not in ("importer", "none")]
    if unknown:
        return "not_shown", f"the import probe did not answer: {unknown[0]}"
    has_one = [i for i in imports if i["status"] == "importer"]
    if value.startswith("none"):
        return ("contradicted", "the EP device gives an importer") if has_one else ("passed", "the EP device gives no importer")
    if len(has_one) < len(imports):
        return "contradicted", "the EP device gives no importer"
    claimed = [t.strip() for t in value.removeprefix("handle types ").split(";")[0].split(",") if t.strip() and t.strip() != "none"]
    missing = sorted({t for t in claimed for i in has_one if t not in i.get("handle_types", ())})
    if missing:
        return "contradicted", "CanImportMemory refuses " + ", ".join(missing)
    return "passed", "the importer takes every claimed handle type"


def claim_evidence(claim: dict[str, Any]) -> str:
    """What this run showed of a claim, in words, or '-' for a report from before it was recorded."""
    shown = claim.get("this_run")
    return f"{WORDS.get(shown['status'], shown['status'])}: {shown['evidence']}" if shown else "-"


WORDS = {"passed": "shown by this run", "contradicted": "contradicted by this run", "not_shown": "not shown by this run"}
