"""summary.md: the run in a CI job's summary page, under LIMIT bytes.

The verdict and its reasons, the EP's counts apart from onnxruntime's findings, each device's
copy matrix as a grid, and the first failures, each linking to its place in report.html (the
anchors of report/common.py). A page of thousands of failures stays under the limit: rows stop
where the budget ends and a line says how many more report.html has. `append_step_summary`
adds the same text to the file GitHub Actions names in $GITHUB_STEP_SUMMARY.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from conformance.report.common import (case_anchor, code_span, contract_anchor, counts_text, failure_anchor, failures_of_the_ep, findings_apart,
                                       machine_lines, params_label, reason_contract, run_conditions, shared_with_the_ep, tally)

LIMIT = 20_000  # bytes of UTF-8; GitHub shows up to 1 MiB per step, but a summary is read at a glance
REASONS_SHOWN = 12
MESSAGE_CHARS = 120
MARK = {"conformant": "✅", "non_conformant": "❌", "incomplete": "⚠️"}
SHORT = {"supported": "ok", "unverified": "unverified", "broken": "**broken**", "required_but_missing": "**missing (required)**",
         "not_required": "not needed", "unsupported": "no"}


def cell(text: Any, limit: int | None = None) -> str:
    text = " ".join(str(text).split())
    if limit is not None and len(text) > limit:
        text = text[:limit - 1] + "…"
    return text.replace("|", "\\|")


def render(data: dict[str, Any], html: str = "report.html") -> str:
    """summary.md of report.json's `data`; `html` is where report.html is, relative to where
    the summary is read (its folder by default)."""
    head = _head(data, html)
    tail = ["", f"Full report: [report.html]({html}), with report.json and report.md beside it"]
    budget = LIMIT - _size(head) - _size(tail) - 400  # what the matrix and the failures' rows may take
    body = _matrices(data["capabilities"])
    if _size(body) > budget // 2:
        body = ["", f"Copy capabilities: [{len(data['capabilities'])} device matrices in report.html]({html}#capabilities)"]
    body += _cases("Failures of the EP", failures_of_the_ep(data["results"]), html, "failures", budget - _size(body))
    body += _cases("Findings against onnxruntime (not the EP's)", findings_apart(data["results"]), html, "findings", budget - _size(body))
    shared = shared_with_the_ep(data["results"])
    if shared:
        body += ["", SHARED.format(count=len(shared))]
    return "\n".join(head + body + tail) + "\n"


def _size(lines: list[str]) -> int:
    return sum(len(line.encode()) + 1 for line in lines)


def _head(data: dict[str, Any], html: str) -> list[str]:
    verdict, ep = data["verdict"], data.get("ep") or {}
    mark = f"{MARK[verdict]} " if verdict in MARK else ""
    level = f" at onnxruntime {data['api_level']}'s API" if data.get("api_level") else ""
    out = [f"## {mark}ort-ep-conformance: {cell(ep.get('name', '?'))} is **{verdict}**{level}"]
    found = reasons(data)
    out += [""] if found else []
    for reason in found[:REASONS_SHOWN]:
        target = (failure_anchor(reason.contract) if reason.cases else contract_anchor(reason.contract)) if reason.contract else "verdict"
        out.append(f"- [{cell(reason.text, 200)}]({html}#{target})" + (f" ({reason.cases})" if reason.cases else ""))
    if len(found) > REASONS_SHOWN:
        out.append(f"- … and {len(found) - REASONS_SHOWN} more reasons: [report.html]({html}#verdict)")
    ep_counts, runtime_counts = tally(data["results"])
    out += ["", f"**{cell(ep.get('name', 'EP'))}**: {counts_text(ep_counts)}"]
    if runtime_counts:  # a paragraph of its own: Markdown joins adjacent lines into one
        out += ["", f"{RUNTIME_COUNTS.format(subject='`runtime`')}: {counts_text(runtime_counts)}"]
    ort = data.get("onnxruntime") or {}
    devices = ", ".join(code_span(d["label"]) for d in data.get("devices", [])) or "none"
    out += [f"\n**{cell(line)}**" for line in run_conditions(data)]
    out += [f"\n{cell(line)}" for line in machine_lines(data)]
    out += ["", f"kit {cell(data.get('kit_version'))} · onnxruntime {cell(ort.get('version'))} ({cell(ort.get('package'))}) · devices {devices}"
            + (" · strict" if data.get("strict") else "")]
    return out


RUNTIME_COUNTS = "onnxruntime's own contracts (subject {subject}; they do not decide the verdict; pytest counts their failures xfailed)"
SHARED = ("Failing cases of subject `both` (onnxruntime passed a bad request on, and the EP accepted it): {count}, "
          "counted with the EP's failures, and listed in report.json's findings too.")


@dataclass(frozen=True)
class Reason:
    """A verdict reason, the contract it names (None for the run as a whole) and, where that
    contract broke, how many of its cases did against the EP, as pytest counts them ('3 of 12
    cases'), and how many more are onnxruntime's findings ('3 of 12 cases, and 7 findings
    against onnxruntime')."""

    text: str
    contract: str | None
    cases: str


def reasons(data: dict[str, Any]) -> list[Reason]:
    """The verdict's reasons as summary.md and the terminal both show them."""
    contracts = data.get("contracts") or {}
    out = []
    for text in data.get("verdict_reasons") or []:
        named = reason_contract(text, contracts)
        of_it = [r for r in data["results"] if r["contract"] == named]
        broken, apart = len(failures_of_the_ep(of_it)), len(findings_apart(of_it))
        cases = f"{broken} of {len(of_it)} case{'s' if len(of_it) != 1 else ''}" if broken else ""
        out.append(Reason(text, named, cases + (f", and {apart} finding{'s' if apart != 1 else ''} against onnxruntime" if cases and apart else "")))
    return out


def terminal(data: dict[str, Any]) -> list[str]:
    """What the terminal summary says under the verdict: each reason, as summary.md has them,
    then the EP's counts apart from onnxruntime's findings, an emulated CPU (run_conditions), and
    the tries lost to the machine, not counted against the EP (machine_lines)."""
    ep_counts, runtime_counts = tally(data["results"])
    lines = [f"  {reason.text}" + (f" ({reason.cases})" if reason.cases else "") for reason in reasons(data)]
    lines.append(f"{(data.get('ep') or {}).get('name', 'EP')}: {counts_text(ep_counts) if ep_counts else 'no check of its own ran'}")
    if runtime_counts:
        lines.append(f"{RUNTIME_COUNTS.format(subject='runtime')}: {counts_text(runtime_counts)}")
    return lines + run_conditions(data) + machine_lines(data)


def _matrices(matrices: list[dict[str, Any]]) -> list[str]:
    out = ["", "### Copy capabilities"]
    for matrix in matrices:
        out += ["", f"{code_span(matrix['ep'])} — {code_span(matrix['device'])}"]
        if matrix.get("error"):
            out += ["", f"probe lost: {cell(matrix['error'], 200)}"]
            continue
        names = list(dict.fromkeys([p["source"] for p in matrix["pairs"]] + [p["destination"] for p in matrix["pairs"]]))
        status = {(p["source"], p["destination"]): p["status"] for p in matrix["pairs"]}
        out += ["", "| source \\ destination | " + " | ".join(cell(n) for n in names) + " |", "| --- |" + " --- |" * len(names)]
        out += [f"| {cell(s)} | " + " | ".join(SHORT.get(status.get((s, d), ""), status.get((s, d), "")) for d in names) + " |" for s in names]
    return out


def _cases(title: str, results: list[dict[str, Any]], html: str, section: str, budget: int) -> list[str]:
    """A row per case, while the budget lasts; then how many more report.html lists."""
    if not results:
        return []
    out = ["", f"### {title}: {len(results)}", "", "| case | outcome | message |", "| --- | --- | --- |"]
    shown = 0
    for result in results:
        row = (f"| [{cell(result['contract'])} [{cell(result['device'])}-{cell(params_label(result['params']))}]]"
               f"({html}#{case_anchor(result)}) | {result['outcome']} | {cell(result['message'], MESSAGE_CHARS)} |")
        if _size(out) + len(row.encode()) + 1 > budget:
            break
        out.append(row)
        shown += 1
    if shown < len(results):
        out += ["", f"… and {len(results) - shown} more: [report.html]({html}#{section})"]
    return out


def append_step_summary(text: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """Appends `text` to $GITHUB_STEP_SUMMARY when it is set (a GitHub Actions step); returns
    why it could not, or None. A summary that cannot be written costs the summary, not the run."""
    target = environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    try:
        with Path(target).open("a", encoding="utf-8") as out:
            out.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        return f"$GITHUB_STEP_SUMMARY ({target}) could not be appended to: {exc.strerror or exc}"
    return None
