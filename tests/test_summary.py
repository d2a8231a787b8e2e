"""summary.md: written with the report set, under its size limit for any number of results,
its links landing on ids report.html has, the EP's counts apart from onnxruntime's, and
appended to $GITHUB_STEP_SUMMARY when that is set."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import headless
from conftest import conformance_run
from conformance.report import html, summary

LINK = re.compile(r"\]\(report\.html#([^)]+)\)")


def cpu_data(cpu_reports: Path) -> dict:
    return json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))


def ids_of(page: str) -> set[str]:
    return {e.attrs["id"] for e in headless.parse_dom(page).iter() if "id" in e.attrs}


def many_failures(data: dict, count: int) -> dict:
    """The CPU run's report with `count` failing EP cases of one contract added, and its verdict."""
    data = copy.deepcopy(data)
    template = next(r for r in data["results"] if r["subject"] == "ep")
    for index in range(count):
        data["results"].append(dict(template, params={"case": index}, outcome="fail", message=f"case {index} failed: " + "x" * 300,
                                    details={"violations": [{"message": "bytes differ", "expected": "a", "actual": "b"}]}))
    data["verdict"], data["verdict_reasons"] = "non_conformant", [f"required contract broken: {template['contract']}", "no check ran"]
    return data


def test_summary_md_is_written_with_the_report_set_and_links_into_report_html(cpu_reports):
    text = (cpu_reports / "summary.md").read_text(encoding="utf-8")
    data = cpu_data(cpu_reports)
    assert text == summary.render(data)
    assert text.startswith(f"## ✅ ort-ep-conformance: CPUExecutionProvider is **{data['verdict']}**")
    links = LINK.findall(text)
    assert len(links) == len(data["findings"]), "each finding links to its case"
    assert set(links) <= ids_of((cpu_reports / "report.html").read_text(encoding="utf-8"))
    assert "| cpu | not needed |" in text


def test_the_eps_counts_stand_apart_from_onnxruntimes_findings(cpu_reports):
    data = cpu_data(cpu_reports)
    assert data["findings"], "the CPU run has findings against onnxruntime"
    lines = (cpu_reports / "summary.md").read_text(encoding="utf-8").splitlines()
    (ep_line,) = [line for line in lines if line.startswith("**CPUExecutionProvider**:")]
    (runtime_line,) = [line for line in lines if line.startswith("onnxruntime's own contracts")]
    assert "fail" not in ep_line and "crash" not in ep_line
    ep_results = [r for r in data["results"] if r["subject"] == "ep"]
    assert f"{sum(r['outcome'] == 'pass' for r in ep_results)} pass" in ep_line
    assert f"{sum(r['outcome'] == 'fail' for r in data['findings'])} fail" in runtime_line


def test_thousands_of_failures_stay_under_the_limit_with_every_reason_linked(cpu_reports):
    data = many_failures(cpu_data(cpu_reports), 5000)
    text = summary.render(data)
    assert len(text.encode()) <= summary.LIMIT
    assert "**non_conformant**" in text
    contract = data["results"][-1]["contract"]
    assert f"- [required contract broken: {contract}](report.html#failure-{contract})" in text
    assert "- [no check ran](report.html#verdict)" in text
    shown = len(re.findall(r"^\| \[", text, re.M))
    failing = sum(r["outcome"] in ("fail", "crash", "timeout") and r["subject"] == "ep" for r in data["results"])
    assert 20 < shown < failing
    assert f"… and {failing - shown} more: [report.html](report.html#failures)" in text
    assert set(LINK.findall(text)) <= ids_of(html.render(data))


def test_report_html_of_thousands_of_results_gives_each_case_one_unique_anchor(cpu_reports):
    # How long it takes is benchmarks/'s to measure, not a test's to assert.
    data = many_failures(cpu_data(cpu_reports), 5000)
    page = html.render(data)
    ids = [e.attrs["id"] for e in headless.parse_dom(page).iter() if "id" in e.attrs]
    assert len(ids) == len(set(ids)), "every anchor is unique"
    assert sum(i.startswith("case-") for i in ids) == len(data["results"])


def test_the_step_summary_is_appended_to_and_a_failure_to_write_it_is_a_reason(tmp_path):
    target = tmp_path / "step_summary"
    target.write_text("earlier step\n", encoding="utf-8")
    assert summary.append_step_summary("## ours", {"GITHUB_STEP_SUMMARY": str(target)}) is None
    assert target.read_text(encoding="utf-8") == "earlier step\n## ours\n"
    assert summary.append_step_summary("## ours", {}) is None
    why = summary.append_step_summary("x", {"GITHUB_STEP_SUMMARY": str(tmp_path / "no" / "such")})
    assert why and "could not be appended to" in why


def test_a_run_appends_its_summary_to_github_step_summary(tmp_path):
    target = tmp_path / "step_summary"
    run = conformance_run(tmp_path, "--ep=cpu", "-k", "memory-info", env={"GITHUB_STEP_SUMMARY": str(target)})
    assert target.read_text(encoding="utf-8") == (run.reports / "summary.md").read_text(encoding="utf-8")


def test_a_report_says_on_which_cpu_the_ep_ran_natively_or_under_an_emulator():
    # An EP decides which nodes it takes by the hardware it sees (the OpenVINO plugin runs empty
    # tensors natively on one CPU and declines them under an emulated one): every report says which.
    from conformance.report.common import run_conditions

    native = run_conditions({"run": {"cpu": "AuthenticAMD", "emulated": None, "wrapper": None}})
    assert native == ["Ran natively on this machine's AuthenticAMD CPU: which nodes the EP took was decided on this hardware."]
    emulated = run_conditions({"run": {"cpu": "AuthenticAMD", "emulated": "the EP's processes ran under qemu-x86_64", "wrapper": "qemu-x86_64"}})
    assert emulated == ["CPU emulated: the EP's processes ran under qemu-x86_64; which nodes the EP took was decided on that CPU."]
    assert run_conditions({"run": {}}) == []
