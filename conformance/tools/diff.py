"""What changed between two runs: regressions, fixes, new and removed contracts, copy matrix.

Either side is a report.json, a folder holding one, or a bundle. A case is the same case when
its EP, device, contract and parameters are the same; it is named by its pytest id (the node
id `pytest` prints and takes, plugin/ids.py). A regression is a case that did not break
before and breaks now (fail, crash, timeout, error), a copy direction that worked before and
is broken or missing now, or a worse verdict (conformant, incomplete, non_conformant); CI
gates on those (`ort-conformance diff` exits 1). A case that was checked before and is not
now (not_run, not_applicable) stopped being checked: its own section, never a fix. Broken
runtime-subject cases are findings against onnxruntime: listed apart, gating only with
--fail-on-findings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance import safe_io
from conformance.tools.bundle import MAX_MEMBER_BYTES, BundleError, read, require_report_shape
from conformance.outcomes import BROKEN, BROKEN_OR_ERROR, NOT_AGAINST_EP, Outcome
from conformance.report.schema import parse_json

# Copy statuses from better to worse; a step down from a working status is a regression.
MATRIX_RANK = {"supported": 0, "not_required": 0, "unsupported": 1, "unverified": 1, "required_but_missing": 2, "broken": 2}
# Verdicts from better to worse: a step down is a regression.
VERDICT_RANK = {"conformant": 0, "incomplete": 1, "non_conformant": 2}
# A case was checked when it ran to an answer; it stopped being checked when it now has none.
CHECKED = {o.value for o in (Outcome.PASS, *BROKEN)}
UNCHECKED = {o.value for o in (Outcome.NOT_RUN, Outcome.NOT_APPLICABLE)}


def load(path: Path) -> dict[str, Any]:
    """report.json's data from a report file, a folder holding one, or a bundle; BundleError
    when there is none, or when it is not a report this kit reads (report_schema.report_problems)."""
    if path.is_dir():
        path = path / "report.json"
    try:
        if path.suffix == ".json":
            text = safe_io.read_regular(path, MAX_MEMBER_BYTES, what="report")
        else:
            text = read(path)["report.json"]
        report = parse_json(text)
    except safe_io.UnsafeFile as exc:
        raise BundleError(path, exc.message) from None
    except KeyError:
        raise BundleError(path, "the bundle holds no report.json") from None
    except UnicodeDecodeError:
        raise BundleError(path, "not a report.json (not UTF-8 text)") from None
    except ValueError as exc:
        raise BundleError(path, f"not JSON: {exc}") from None
    require_report_shape(path, report)
    return report


def _key(result: dict[str, Any]) -> tuple:
    return (result["ep"], result["device"], result["contract"], json.dumps(result["params"], sort_keys=True))


def _label(key: tuple, result: dict[str, Any] | None = None) -> str:
    """The case's pytest id (its node id, as `pytest` prints it in a FAILED line and takes it
    on its command line); for a result without one, its contract, device and parameters."""
    if result is not None and result.get("nodeid"):
        return str(result["nodeid"])
    ep, device, contract, params = key
    values = "-".join(str(v) for v in json.loads(params).values())
    return f"{contract}[{device}{'-' + values if values else ''}] ({ep})"


@dataclass
class Diff:
    verdict: tuple[str, str]
    ep: tuple[str, str]  # the EP each run checked: cases of two different EPs are never the same case
    regressions: list[dict[str, str]] = field(default_factory=list)
    fixes: list[dict[str, str]] = field(default_factory=list)
    findings: list[dict[str, str]] = field(default_factory=list)
    other_changes: list[dict[str, str]] = field(default_factory=list)
    no_longer_checked: list[dict[str, str]] = field(default_factory=list)  # checked before, not now: never a fix
    new_contracts: list[str] = field(default_factory=list)
    removed_contracts: list[str] = field(default_factory=list)
    removed_cases: list[str] = field(default_factory=list)
    matrix: list[dict[str, Any]] = field(default_factory=list)

    @property
    def verdict_worse(self) -> bool:
        old, new = (VERDICT_RANK.get(v, len(VERDICT_RANK)) for v in self.verdict)
        return new > old

    @property
    def regressed(self) -> bool:
        return bool(self.regressions) or any(change["regression"] for change in self.matrix) or self.verdict_worse

    def failed(self, *, fail_on_findings: bool = False) -> bool:
        """Whether the new run is worse: a regression, or (with `fail_on_findings`) a new finding against onnxruntime."""
        return self.regressed or (fail_on_findings and bool(self.findings))

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "verdict": {"old": self.verdict[0], "new": self.verdict[1], "worse": self.verdict_worse},
                "ep": {"old": self.ep[0], "new": self.ep[1]}, "regressed": self.regressed}


def compare(old: dict[str, Any], new: dict[str, Any]) -> Diff:
    before = {_key(r): r for r in old["results"]}
    after = {_key(r): r for r in new["results"]}
    diff = Diff((old["verdict"], new["verdict"]), (old["ep"].get("name"), new["ep"].get("name")))
    for key in sorted(set(before) & set(after)):
        was, now = before[key], after[key]
        if was["outcome"] == now["outcome"]:
            continue
        change = {"case": _label(key, now), "contract": key[2], "old": was["outcome"], "new": now["outcome"], "message": now["message"]}
        # A case is bad when it broke (fail, crash, timeout) or the kit could not run it (error).
        if now["outcome"] in BROKEN_OR_ERROR and was["outcome"] not in BROKEN_OR_ERROR:
            (diff.findings if now["subject"] in NOT_AGAINST_EP else diff.regressions).append(change)  # "both" is the EP's regression too
        elif was["outcome"] in CHECKED and now["outcome"] in UNCHECKED:
            diff.no_longer_checked.append(change)  # fail -> not_run is not fixed: it is no longer looked at
        elif was["outcome"] in BROKEN_OR_ERROR and now["outcome"] not in BROKEN_OR_ERROR:
            diff.fixes.append(change)
        else:
            diff.other_changes.append(change)
    old_contracts = {r["contract"] for r in old["results"]}
    new_contracts = {r["contract"] for r in new["results"]}
    diff.new_contracts = sorted(new_contracts - old_contracts)
    diff.removed_contracts = sorted(old_contracts - new_contracts)
    diff.removed_cases = [_label(k, before[k]) for k in sorted(set(before) - set(after)) if k[2] in new_contracts]
    diff.matrix = _matrix_changes(old["capabilities"], new["capabilities"])
    return diff


def _pairs(matrices: list[dict[str, Any]]) -> dict[tuple, str]:
    return {(m["ep"], m["device"], p["source"], p["destination"]): p["status"] for m in matrices for p in m.get("pairs", [])}


def _matrix_changes(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    before, after = _pairs(old), _pairs(new)
    changes = []
    for key in sorted(set(before) | set(after)):
        was, now = before.get(key, "absent"), after.get(key, "absent")
        if was == now:
            continue
        ep, device, source, destination = key
        regression = MATRIX_RANK.get(was, 3) == 0 and MATRIX_RANK.get(now, 3) == 2
        changes.append({"ep": ep, "device": device, "pair": f"{source}>{destination}", "old": was, "new": now, "regression": regression})
    return changes


def render(diff: Diff) -> str:
    out = [f"verdict: {diff.verdict[0]} -> {diff.verdict[1]}" + (" (WORSE)" if diff.verdict_worse else "")]
    if diff.ep[0] != diff.ep[1]:
        out.append(f"note: these are runs of two EPs ({diff.ep[0]} -> {diff.ep[1]}), which share no case")

    def section(title: str, lines: list[str]) -> None:
        if lines:
            out.append(f"{title} ({len(lines)}):")
            out.extend(f"  {line}" for line in lines)

    by_contract: dict[str, int] = {}
    for change in diff.regressions:
        by_contract[change["contract"]] = by_contract.get(change["contract"], 0) + 1
    section("REGRESSED CONTRACTS", [f"{contract}: {count} case{'s' if count != 1 else ''}" for contract, count in by_contract.items()])
    section("REGRESSIONS", [f"{c['case']}: {c['old']} -> {c['new']}: {c['message'][:200]}" for c in diff.regressions])
    section("COPY MATRIX REGRESSIONS", [f"{c['ep']} {c['device']} {c['pair']}: {c['old']} -> {c['new']}" for c in diff.matrix if c["regression"]])
    section("NO LONGER CHECKED", [f"{c['case']}: {c['old']} -> {c['new']}: {c['message'][:200]}" for c in diff.no_longer_checked])
    section("fixes", [f"{c['case']}: {c['old']} -> {c['new']}" for c in diff.fixes])
    section("new findings against onnxruntime (not the EP's; --fail-on-findings makes them fail the diff)",
            [f"{c['case']}: {c['old']} -> {c['new']}: {c['message'][:200]}" for c in diff.findings])
    section("other outcome changes", [f"{c['case']}: {c['old']} -> {c['new']}" for c in diff.other_changes])
    section("new contracts", diff.new_contracts)
    section("removed contracts", diff.removed_contracts)
    section("cases no longer run", diff.removed_cases)
    section("other copy matrix changes", [f"{c['ep']} {c['device']} {c['pair']}: {c['old']} -> {c['new']}" for c in diff.matrix if not c["regression"]])
    if len(out) == 1:
        out.append("no changes in results or copy matrix")
    return "\n".join(out) + "\n"
