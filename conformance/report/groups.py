"""Failing cases grouped by contract, as report.md and report.html show them: the contract once
(its statement, spec line and message pattern), then one row per case (its parameters, its own
detail and its reproducer's file). A report then grows by a row per failing case, not by a
page: 300 cases of one broken copy read as one entry.

The message pattern is each case's first message with the case's parameter values written as
`{name}` and every number as `#`: the cases of one defect share one pattern, and a contract
that broke in two ways shows two. A leaf of the report package: the renderers import it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from conformance.findings import Violation
from conformance.outcomes import Details
from conformance.report.repro_files import FOLDER, file_names
from conformance.testbed.eps import memory_label

PATTERNS_SHOWN = 3
DETAIL_CHARS = 200
_NUMBER = re.compile(r"(?<![A-Za-z_\d])(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?)")  # not the digits of a name (float32, int4)


@dataclass(frozen=True)
class Row:
    """One failing case: its result, its own detail (the first violation's actual value, or its
    first message) and its reproducer's path relative to the report folder ('' for none)."""

    result: dict[str, Any]
    detail: str
    reproducer: str


@dataclass(frozen=True)
class Group:
    """A contract's failing cases."""

    contract: str
    rows: list[Row]
    params: list[str]  # the parameters' names, as the table's columns
    patterns: list[tuple[str, int]]  # (pattern, cases), the most common first
    expected: str  # what every case expected, when they all say the same ('' otherwise)
    memory: list[tuple[str, int]]  # the memories the first violations name ('memory of the source: ...; memory of the destination: ...'), and in how many cases


def first_message(result: dict[str, Any]) -> str:
    """The case's first violation's message (what pytest's FAILED line ends with), else its message's first line."""
    violations = Details.from_wire(result.get("details")).violations
    text = violations[0].message or result["message"] if violations else result["message"]
    return " ".join((str(text).strip().splitlines() or [""])[0].split())


def pattern(result: dict[str, Any]) -> str:
    """`first_message` with the parameter values as `{name}` (the longest first) and numbers as `#`."""
    text = first_message(result)
    values = sorted(((str(v), k) for k, v in result.get("params", {}).items() if len(str(v)) >= 3), key=lambda pair: -len(pair[0]))
    for value, name in values:
        text = text.replace(value, "\0" + name + "\1")
    return _NUMBER.sub("#", text).replace("\0", "{").replace("\1", "}")


def reproducers(results: list[dict[str, Any]]) -> dict[int, str]:
    """{id(result): 'repro/<name>.py'} of every result of the run with a standalone script, by the
    names repro_files writes (it numbers two cases that would share one)."""
    return {id(r): f"{FOLDER}/{name}" for r, name in zip(results, file_names(results), strict=True) if name}


def grouped(cases: list[dict[str, Any]], scripts: dict[int, str]) -> list[Group]:
    """`cases` by contract, in the order each contract first fails; `scripts` from `reproducers`."""
    by_contract: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        by_contract.setdefault(case["contract"], []).append(case)
    groups = []
    for contract, results in by_contract.items():
        params = list(dict.fromkeys(name for r in results for name in r.get("params", {})))
        firsts = [(Details.from_wire(r.get("details")).violations or (NO_VIOLATION,))[0] for r in results]
        expected = {str(v.expected or "") for v in firsts}
        memories = Counter("; ".join(f"memory of the {role}: {memory_label(m)}" for role, m in (v.memory or {}).items()) for v in firsts)
        rows = [Row(r, _detail(r, v), scripts.get(id(r), "")) for r, v in zip(results, firsts, strict=True)]
        groups.append(Group(contract, rows, params, Counter(pattern(r) for r in results).most_common(), expected.pop() if len(expected) == 1 else "",
                            [(text, n) for text, n in memories.most_common() if text]))
    return groups


NO_VIOLATION = Violation("")  # what a case that names none (a crash, a timeout) shows of one


def _detail(result: dict[str, Any], violation: Violation) -> str:
    text = str(violation.actual or first_message(result))
    text = " ".join(text.split())
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS - 1] + "…"
