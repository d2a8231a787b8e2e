"""One failing run, one count: the terminal, summary.md, report.md, report.html and JUnit say the
same numbers, the EP's apart from onnxruntime's, a `both` case counted with the EP's everywhere;
and that run reads at a glance: a few lines per failing case in the terminal, a row per case
in the reports, each reproducer named by its file and none inlined.

The run is the reference EP's `corrupt` fault mode (refdev/), whose failures span every kind
the counts have to agree on: the EP's, onnxruntime's (runtime subject, xfailed by pytest) and
one `both` case of copy.bad-requests.
"""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

import headless
from conftest import RunOutcome, conformance_run
from conformance.report import html, markdown

BROKEN = ("fail", "crash", "timeout", "flaky")
FAILED = ("fail", "flaky")  # pytest's failed: a flaky case is a failure, with its tries
ERRORS = ("crash", "timeout", "error")
APART = ("runtime", "package")  # onnxruntime's own: findings, counted apart from the EP's
LINES_PER_CASE = 20


@pytest.fixture(scope="module")
def corrupt(refdev_library, tmp_path_factory) -> RunOutcome:
    return conformance_run(tmp_path_factory.mktemp("corrupt"), "--ep-library", str(refdev_library), "--ep", "refdev",
                           env={"ORT_REFDEV_FAULT": "corrupt", "CI": "true"})


def tallies(results: list[dict]) -> tuple[Counter, Counter]:
    """The EP's outcomes (subject ep or both) and onnxruntime's (runtime or package), counted here
    without the kit's own helpers."""
    ep = Counter(r["outcome"] for r in results if r["subject"] not in APART)
    runtime = Counter(r["outcome"] for r in results if r["subject"] in APART)
    return ep, runtime


def said(text: str) -> Counter:
    """'288 fail, 77 pass' as a Counter."""
    return Counter({name: int(n) for n, name in re.findall(r"(\d+) ([a-z_]+)", text)})


def test_the_run_has_failures_of_each_kind(corrupt):
    subjects = {(r["subject"], r["outcome"]) for r in corrupt.report["results"]}
    assert {("ep", "fail"), ("runtime", "fail"), ("both", "fail")} <= subjects, subjects


def test_pytest_and_junit_count_what_the_report_counts(corrupt):
    results = corrupt.report["results"]
    ep, runtime = tallies(results)
    tail = corrupt.output.strip().splitlines()[-1]
    pytest_counts = Counter({name: int(n) for n, name in re.findall(r"(\d+) (failed|passed|skipped|xfailed|errors?)", tail)})
    assert pytest_counts["failed"] == sum(ep[o] for o in FAILED), tail
    assert pytest_counts["xfailed"] == sum(runtime[o] for o in BROKEN), tail
    assert pytest_counts["passed"] == ep["pass"] + runtime["pass"], tail
    assert pytest_counts["errors"] + pytest_counts["error"] == sum(ep[o] for o in ERRORS) + runtime["error"], tail
    suite = ET.parse(corrupt.reports / "junit.xml").getroot().find("testsuite")
    assert int(suite.get("failures")) == sum(ep[o] for o in FAILED) and int(suite.get("tests")) == len(results)
    assert int(suite.get("errors")) == sum(ep[o] for o in ERRORS) + runtime["error"]
    failed = {case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None}
    assert failed == {r["nodeid"].rpartition("::")[2] for r in results if r["outcome"] in FAILED and r["subject"] not in APART}


def test_every_output_says_the_same_counts(corrupt):
    results = corrupt.report["results"]
    ep, runtime = tallies(results)
    failing = sum(ep[o] for o in BROKEN)
    apart = sum(runtime[o] for o in BROKEN)
    name = corrupt.report["ep"]["name"]

    section = corrupt.output[corrupt.output.index("== conformance =="):]
    (terminal_ep,) = re.findall(rf"^{name}: (.*)$", section, re.M)
    (terminal_runtime,) = re.findall(r"^onnxruntime's own contracts \(.*?\): (.*)$", section, re.M)
    assert said(terminal_ep) == ep and said(terminal_runtime) == runtime

    summary = (corrupt.reports / "summary.md").read_text(encoding="utf-8")
    (summary_ep,) = re.findall(rf"^\*\*{name}\*\*: (.*)$", summary, re.M)
    (summary_runtime,) = re.findall(r"^onnxruntime's own contracts \(.*?\): (.*)$", summary, re.M)
    assert said(summary_ep) == ep and said(summary_runtime) == runtime
    assert f"### Failures of the EP: {failing}\n" in summary and f"### Findings against onnxruntime (not the EP's): {apart}\n" in summary

    md = (corrupt.reports / "report.md").read_text(encoding="utf-8")
    (md_ep,) = re.findall(r"^Results of the EP: (.*)\.$", md, re.M)
    (md_runtime,) = re.findall(r"^onnxruntime's own contracts \(.*?\): (.*)\.$", md, re.M)
    assert said(md_ep) == ep and said(md_runtime) == runtime
    assert re.search(rf"^## Failures of the EP: {failing} cases in \d+ contracts$", md, re.M)
    assert re.search(rf"^## Findings against onnxruntime: {apart} cases in \d+ contracts$", md, re.M)

    dom = headless.parse_dom((corrupt.reports / "report.html").read_text(encoding="utf-8"))
    assert said(dom.by_id("ep-counts").text().partition(":")[2]) == ep
    assert said(dom.by_id("runtime-counts").text().rpartition("):")[2]) == runtime
    assert f"({failing} cases in" in dom.by_id("failures").text() and f"({apart} cases in" in dom.by_id("findings").text()
    rows = sum(len(div.find_all("tr")) - 1 for div in dom.find_all("div", "failure"))  # each table's header row aside
    assert rows == failing


def test_a_verdict_reason_counts_the_cases_pytest_failed(corrupt):
    failed = Counter(re.findall(r"^FAILED \S*::([^\[\s]+)\[", corrupt.output, re.M))
    reasons = dict(re.findall(r"^  required contract broken: (\S+) \((\d+) of \d+ cases?", corrupt.output, re.M))
    assert reasons and {contract: int(n) for contract, n in reasons.items()} == {c: failed[c] for c in reasons}
    # A contract broken against the EP and against onnxruntime: its reason counts the EP's cases, then onnxruntime's apart.
    of_it = [r for r in corrupt.report["results"] if r["contract"] == "copy.bad-requests"]
    ep = sum(r["outcome"] in BROKEN and r["subject"] not in APART for r in of_it)
    runtime = sum(r["outcome"] in BROKEN and r["subject"] in APART for r in of_it)
    assert ep and runtime and any(r["subject"] == "both" and r["outcome"] in BROKEN for r in of_it)
    assert f"copy.bad-requests ({ep} of {len(of_it)} cases, and {runtime} findings against onnxruntime)" in corrupt.output


def test_a_failing_case_is_a_few_lines_naming_its_reproducers_file(corrupt):
    out = corrupt.output
    failures = out[out.index("== FAILURES =="):out.index("== conformance ==")]
    cases = corrupt.report["results"]
    failing = [r for r in cases if r["outcome"] in BROKEN and r["subject"] not in APART]
    assert len(failures.splitlines()) <= LINES_PER_CASE * len(failing)
    assert "import onnxruntime" not in out, "no reproducer is inlined by default"
    named = re.findall(r"^  reproduce: python (\S+)$", failures, re.M)
    assert named and all(Path(path).is_file() for path in named)
    assert re.search(r"^_+ copy\.required-directions\[refdev-cpu>default-float32-3x5\] \[required\] _+$", failures, re.M), "headlines carry parameters"
    assert not re.search(r"^report: .*repro", out, re.M) and len(re.findall(r"^reproducers: ", out, re.M)) == 1


def test_the_reports_group_failures_by_contract_and_link_every_script(corrupt):
    md = (corrupt.reports / "report.md").read_text(encoding="utf-8")
    assert md.index("## Copy capabilities") < md.index("## Failures of the EP")
    links = re.findall(r"\]\((repro/[^)]+\.py)\)", md)
    assert links and all((corrupt.reports / link).is_file() for link in links)
    assert len(set(links)) == len(list((corrupt.reports / "repro").glob("*.py")))
    page = (corrupt.reports / "report.html").read_text(encoding="utf-8")
    assert "import onnxruntime" not in page and "Reproduce with" not in page
    assert set(re.findall(r'href="(repro/[^"]+\.py)"', page)) == set(links)
    claims = {c["claim"]: c for c in corrupt.report["ep"]["claims"]}
    assert not claims["copy_directions"]["verified"] and claims["copy_directions"]["this_run"]["status"] == "contradicted"
    assert re.search(r"^\| copy_directions \| .* \| \*\*no\*\* \| contradicted by this run: the copy matrix: cpu>default broken", md, re.M)


@pytest.mark.parametrize("render", [markdown.render, html.render], ids=["report.md", "report.html"])
def test_a_report_grows_by_a_row_per_failing_case(corrupt, render):
    data = corrupt.report
    more = copy.deepcopy(data)
    template = next(r for r in data["results"] if r["outcome"] == "fail" and r["subject"] == "ep")
    added = 200
    for index in range(added):
        more["results"].append(dict(copy.deepcopy(template), params=dict(template["params"], shape=f"{index}x9"), nodeid=f"{template['nodeid']}-{index}"))
    grown = len(render(more).encode()) - len(render(data).encode())
    assert grown / added < 1500, f"{grown / added:.0f} bytes per failing case"


def test_report_html_keeps_its_budget_of_5_kb_per_failing_case_plus_120_kb(corrupt):
    # issue 38 item 6: what a vendor opens must stay readable on a run that breaks hundreds of cases
    failing = sum(1 for r in corrupt.report["results"] if r["outcome"] in ("fail", "crash", "error", "flaky"))
    size = (corrupt.reports / "report.html").stat().st_size
    assert failing > 100 and size <= 5_000 * failing + 120_000, f"{size} bytes for {failing} failing cases"


def test_tb_line_prints_each_failing_case_once(refdev_library, tmp_path):
    run = conformance_run(tmp_path, "--ep-library", str(refdev_library), "--ep", "refdev", "-k", "required-directions and float32-1", "--tb=line",
                          env={"ORT_REFDEV_FAULT": "corrupt"})
    message = "did not deliver the source bytes: 1 of 4 bytes differ; first: @2: expected 0xc0 got 0xc3"
    # pytest's own short summary (FAILED ...) ends with the message too where it is printed whole (CI=true, -vv)
    lines = [line for line in run.output.splitlines() if line.endswith(message) and not line.startswith("FAILED ")]
    assert len(lines) == 2 and len(set(lines)) == 2, run.output[-3000:]
