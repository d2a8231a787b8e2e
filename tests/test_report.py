"""report.md and report.json from report data: the copy throughput (measured, informational),
what the EP spec claims and whether a run verified it, an EP without an EP device, and
`ort-conformance diff` ignoring the throughput figures. The same data through Chromium is in
tests/test_report_html.py.
"""

from __future__ import annotations

import copy
import json

import pytest

from conformance.matrix import CapabilityMatrix
from conformance.outcomes import Details
from conformance import cli
from conformance.tools import diff
from conformance.checks import known_checks
from conformance.catalogue.claims import spec_claims
from conformance.catalogue.contracts import CLAIMS
from conformance.facts import EpFacts
from conformance.report import NO_EP_DEVICE, evidence, groups, html, markdown, throughput
from conformance.catalogue.spec import load_catalogue

import headless

HOST = {"4KiB": 10.0, "1MiB": 40.0, "64MiB": 8.0}


def pair(source, destination, status="supported", **methods):
    return {"source": source, "destination": destination, "status": status, "required": status != "not_required",
            "detail": "4096 bytes intact", "throughput": methods}


def report_data(*, ep_device=True, claims=None, declared=True, pairs=None, host=HOST) -> dict:
    device = {"label": "dev", "ep": "DevEP", "hardware": {"type": "gpu", "vendor": "ACME", "vendor_id": 0xACE, "device_id": 0},
              "memory": {"default": {"name": "DevMem", "device_type": "gpu", "vendor_id": 0xACE, "device_id": 0, "device_mem_type": "default"},
                         "host_accessible": None}}
    if not ep_device:
        device.update(hardware=None, memory={"default": None, "host_accessible": None})
    matrix = {"ep": "DevEP", "device": "dev", "pairs": pairs if pairs is not None else [
        pair("cpu", "default", copy_tensors={"4KiB": 2.5, "1MiB": 20.0, "64MiB": None}, update_inplace={"4KiB": 1.25, "1MiB": 10.0, "64MiB": 4.0}),
        pair("default", "cpu", copy_tensors={"4KiB": 5.0, "1MiB": 30.0, "64MiB": 6.0}),
        pair("cpu", "cpu", "not_required", update_inplace={"4KiB": 8.0, "1MiB": 44.0, "64MiB": 8.8})]}
    if host is not None:
        matrix["host_memcpy"] = host
    ep = {"name": "DevEP", "label": "dev", "requested": "dev", "declared": declared, "spec": "specs/eps/dev.yaml:3" if declared else None,
          "library": None, "library_sha256": None, "plugin_module": None, "ep_device": ep_device, "options": {}, "version": "1.0",
          "claims": claims if claims is not None else [], "unverified": []}
    return {
        "schema": "ort-ep-conformance/report/1", "kit_version": "0.1.0", "spec_digest": "0" * 64,
        "onnxruntime": {"version": "1.32.0", "package": "onnxruntime", "build": "build info"},
        "ep": ep, "eps": [ep], "devices": [device], "verdict": "conformant", "verdict_reasons": [], "summary": {"pass": 1},
        "findings": [], "results": [{"contract": "copy.roundtrip-exact", "ep": "DevEP", "device": "dev", "params": {}, "outcome": "pass",
                                     "message": "", "spec": "specs/contracts/copy.yaml:1", "severity": "required", "subject": "ep", "details": {}}],
        "capabilities": [matrix], "contracts": {}, "waivers": [], "strict": False,
        "run": {"started": "2026-11-30T00:00:00Z", "duration_s": 1.0, "collected": 1, "interrupted": False, "lost": [], "isolation": "worker",
                "python": "3.11", "platform": "Linux", "command": "pytest --ep=dev"},
    }


def claim(name, verified, how="lane x"):
    return {"claim": name, "value": f"value of {name}", "verified": verified, "how": how, "sources": [f"source of {name}"]}


def lines_under(text: str, heading: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    return lines[start:end]


# --- throughput --------------------------------------------------------------------------


def test_throughput_rows_carry_each_figure_and_its_ratio_to_host_memcpy_of_the_same_size():
    figures = throughput.table(report_data()["capabilities"][0])
    assert figures.sizes == ("4KiB", "1MiB", "64MiB") and figures.host_memcpy == (10.0, 40.0, 8.0)
    rows = {(r.source, r.destination, r.method): r.figures for r in figures.rows}
    assert rows[("cpu", "default", "copy_tensors")] == (throughput.Figure(2.5, 0.25), throughput.Figure(20.0, 0.5), throughput.Figure(None, None))
    assert rows[("cpu", "default", "update_inplace")][2] == throughput.Figure(4.0, 0.5)
    assert list(rows)[:2] == [("cpu", "default", "copy_tensors"), ("cpu", "default", "update_inplace")]


def test_a_matrix_without_figures_has_no_throughput_table():
    old = report_data(pairs=[{"source": "cpu", "destination": "cpu", "status": "not_required", "required": False, "detail": "x"}], host=None)
    assert throughput.table(old["capabilities"][0]) is None
    assert "Copy throughput" not in markdown.render(old)
    assert 'class="throughput"' not in html.render(old)


def test_a_figure_without_a_host_memcpy_of_its_size_has_no_ratio():
    data = report_data(host={"4KiB": 10.0})
    figures = throughput.table(data["capabilities"][0])
    assert figures.sizes == ("4KiB", "1MiB", "64MiB") and figures.host_memcpy == (10.0, None, None)
    assert figures.rows[0].figures[1] == throughput.Figure(20.0, None)
    assert figures.rows[0].figures[1].text() == "20 GB/s"


def test_report_md_shows_gbps_and_ratio_per_direction_method_and_size_labelled_as_measured():
    text = markdown.render(report_data())
    section = lines_under(text, "#### Copy throughput of `dev`")
    assert "(measured, informational)" in section[0]
    assert any("noisy" in line and "no contract passes or fails" in line for line in section)
    assert "| source | destination | method | 4KiB | 1MiB | 64MiB |" in section
    assert "| host memcpy (numpy) | | | 10 GB/s | 40 GB/s | 8 GB/s |" in section
    assert "| cpu | default | copy_tensors | 2.5 GB/s (0.25× memcpy) | 20 GB/s (0.50× memcpy) | - |" in section
    assert "| cpu | default | update_inplace | 1.25 GB/s (0.12× memcpy) | 10 GB/s (0.25× memcpy) | 4 GB/s (0.50× memcpy) |" in section
    assert "| default | cpu | copy_tensors | 5 GB/s (0.50× memcpy) | 30 GB/s (0.75× memcpy) | 6 GB/s (0.75× memcpy) |" in section
    table = [line for line in section if line.startswith("| cpu") or line.startswith("| default")]
    assert len(table) == 4 and not any(word in line for line in table for word in ("pass", "fail"))


# --- what the spec claims ----------------------------------------------------------------


def test_report_md_marks_the_unverified_claims():
    data = report_data(claims=[claim("memory", True), claim("copy_directions", False, "no run on the hardware yet")])
    data["ep"]["unverified"] = ["whether the EP lists an EP device"]
    section = lines_under(markdown.render(data), "## What the spec claims")
    assert "1 of 2 claims verified" in section[2] and "**1 unverified**" in section[2]
    assert "| memory | value of memory | yes | - | lane x |" in section  # a report without what the run showed of it
    assert "| copy_directions | value of copy_directions | **no** | - | no run on the hardware yet |" in section
    assert "- whether the EP lists an EP device" in section


def test_report_md_without_an_ep_spec_says_what_the_run_was_checked_against():
    section = lines_under(markdown.render(report_data(declared=False)), "## What the spec claims")
    assert "No EP spec: the run was checked against what the EP advertises." in section


def test_the_claims_of_an_ep_spec_are_every_claim_with_its_verification_and_sources():
    catalogue = load_catalogue(known_checks=known_checks())
    claims = spec_claims(catalogue.ep_spec("cuda"))
    assert [c["claim"] for c in claims] == list(CLAIMS)
    by_name = {c["claim"]: c for c in claims}
    assert by_name["packages"]["verified"] is True and by_name["memory"]["verified"] is False
    assert "Cuda" in by_name["memory"]["value"] and "CudaPinned" in by_name["memory"]["value"]
    assert any("29602" in source for source in by_name["memory"]["sources"])
    assert spec_claims(None) == []


# --- an EP without an EP device ----------------------------------------------------------


def test_an_ep_without_an_ep_device_advertised_no_memory_info_it_is_not_called_plain_cpu_memory():
    data = report_data(ep_device=False, pairs=[pair("cpu", "cpu", "not_required", update_inplace={"4KiB": 8.0})])
    text = markdown.render(data)
    device_line = next(line for line in text.splitlines() if line.startswith("- device `dev`"))
    assert f"{NO_EP_DEVICE}: no memory info was advertised" in device_line and "plain CPU memory" not in device_line
    assert any(line.startswith(NO_EP_DEVICE) and "only plain CPU memory could be probed" in line for line in lines_under(text, "### DevEP"))
    chain = headless.parse_dom(html.render(data)).by_id("version-chain").text()
    assert f"{NO_EP_DEVICE}: no memory info was advertised" in chain and "plain CPU memory" not in chain


def test_an_ep_device_with_cpu_memory_is_still_plain_cpu_memory():
    data = report_data()
    data["devices"][0]["memory"]["default"] = None
    device_line = next(line for line in markdown.render(data).splitlines() if line.startswith("- device `dev`"))
    assert "DEFAULT: plain CPU memory; HOST_ACCESSIBLE: none" in device_line


# --- diff: status only -------------------------------------------------------------------


def test_diff_ignores_throughput_figures_but_not_a_status_change(tmp_path, capsys):
    old = report_data()
    new = copy.deepcopy(old)
    matrix = new["capabilities"][0]
    matrix["host_memcpy"] = {"4KiB": 1.0, "1MiB": 2.0, "64MiB": 3.0}
    for entry in matrix["pairs"]:
        for figures in entry["throughput"].values():
            figures.update({size: (None if gbps is None else gbps / 10) for size, gbps in figures.items()})
    del matrix["pairs"][1]["throughput"]["copy_tensors"]
    result = diff.compare(old, new)
    assert result.matrix == [] and not result.regressed
    assert diff.render(result).splitlines()[-1] == "no changes in results or copy matrix"
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    assert cli.main(["diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--json"]) == 0
    assert "throughput" not in capsys.readouterr().out

    matrix["pairs"][0]["status"] = "broken"
    assert diff.compare(old, new).regressed


@pytest.mark.parametrize("kind", ["json", "text"])
def test_probe_of_an_ep_without_an_ep_device_says_its_memory_is_not_known_and_why(monkeypatch, capsys, kind):
    matrix = {"eps": [{"ep": "CUDAExecutionProvider", "label": "cuda", "onnxruntime": "1.31.1", "ep_device": False,
                       "unusable": "CUDAExecutionProvider is listed but is not functional here",
                       "devices": [{"ep": "CUDAExecutionProvider", "device": "cuda", "pairs": [pair("cpu", "cpu", "not_required")],
                                    "host_memcpy": {"4KiB": 10.0}}]}]}
    monkeypatch.setattr("conformance.run.probing.probe_eps", lambda *args, **kwargs: CapabilityMatrix.from_dict(matrix))
    assert cli.main(["probe", "--ep", "cuda"] + (["--json"] if kind == "json" else [])) == 0
    out = capsys.readouterr().out
    if kind == "json":
        assert json.loads(out)["eps"][0]["ep_device"] is False
        return
    lines = out.splitlines()
    assert lines[1] == (f"  {NO_EP_DEVICE}: its DEFAULT and HOST_ACCESSIBLE memory are not known (it was never asked for memory info); "
                        "the pairs below are of plain CPU memory only, not of memory the EP owns")
    assert lines[2] == "  CUDAExecutionProvider is listed but is not functional here"


def test_a_run_of_two_eps_shows_the_claims_of_each():
    data = report_data(claims=[claim("memory", True)])
    second = dict(data["ep"], name="OtherEP", label="other", claims=[claim("memory", False)])
    data["eps"].append(second)
    text = markdown.render(data)
    assert "| memory | value of memory | **no** | - | lane x |" in lines_under(text, "## What the spec claims: OtherEP")
    dom = headless.parse_dom(html.render(data))
    assert not dom.by_id("spec-claims-table").find_all("tr", "claim-unverified")
    assert len(dom.by_id("spec-claims-table-other").find_all("tr", "claim-unverified")) == 1


def test_report_json_has_a_line_per_result_and_reads_back_as_written(cpu_reports):
    text = (cpu_reports / "report.json").read_text(encoding="utf-8")
    data = json.loads(text)
    lines = text.splitlines()
    assert len(data["results"]) > 100
    for result in data["results"]:
        assert f"    {json.dumps(result)}," in lines or f"    {json.dumps(result)}" in lines
    assert lines[0] == "{" and lines[1] == f'  "schema": {json.dumps(data["schema"])},'


# --- the report from a run record, without the plugin ------------------------------------------


def run_record(**fields):
    from conformance.outcomes import Outcome, Result
    from conformance.record import EpRecord, RunRecord

    catalogue = load_catalogue()
    data = report_data()
    facts = EpFacts.from_wire(dict(data["ep"], provider="DevEP", onnxruntime=data["onnxruntime"], devices=data["devices"]))
    assert facts is not None
    contract = next(c for c in catalogue.contracts if c.id == "copy.roundtrip-exact")
    result = Result(contract=contract.id, ep="DevEP", device="dev", params={"dtype": "float32"}, outcome=Outcome.PASS, message="",
                    spec=str(contract.location), severity=contract.severity, subject=contract.subject, nodeid="copy.yaml::x")
    return RunRecord(**{"results": (result,), "eps": (EpRecord(facts, None, tuple(data["capabilities"])),), "contracts": (contract,),
                        "spec_digest": catalogue.digest, "collected": 1, "started": 0.0, "finished": 2.5, "python": "3.11",
                        "platform": "Linux-x", "command": "pytest --ep=dev", **fields})


def test_the_report_is_built_from_a_run_record():
    from conformance import report

    record = run_record()
    data = report.build(record)
    assert data["verdict"] == "conformant" and data["summary"]["pass"] == 1 and sum(data["summary"].values()) == 1
    assert [r["contract"] for r in data["results"]] == ["copy.roundtrip-exact"] and list(data["contracts"]) == ["copy.roundtrip-exact"]
    assert data["ep"]["name"] == "DevEP" and data["capabilities"] == list(record.eps[0].capabilities)
    assert data["spec_digest"] == record.spec_digest and data["strict"] is False
    assert data["run"] == {"started": "1970-01-01T00:00:00Z", "duration_s": 2.5, "collected": 1, "interrupted": False, "strict": False,
                           "lost": [], "machine_events": [], "isolation": "worker", "python": "3.11", "platform": "Linux-x", "command": "pytest --ep=dev",
                           "wrapper": None, "emulated": None, "cpu": None}
    assert markdown.render(data).startswith("# Conformance report: DevEP")


def test_a_try_lost_to_the_machine_is_shown_with_its_evidence_and_leaves_the_verdict_alone():
    import dataclasses
    from html import escape

    from conformance import report
    from conformance.report import summary
    from conformance.report.schema import report_problems

    killed = "the worker was killed from outside (SIGKILL) on try 1; try 2 passed: not counted against the EP"
    evidence = "process 4180's wait status: killed by SIGKILL, a signal the kit had not sent it"
    details = {"evidence": {"bytes_compared": 364},
               "tries": [{"outcome": "crash", "message": "the process running it was killed by SIGKILL", "counted": False}, {"outcome": "pass", "message": ""}],
               "machine_events": [{"try": 1, "kind": "killed", "evidence": evidence, "text": killed}]}
    record = run_record()
    record = dataclasses.replace(record, results=(dataclasses.replace(record.results[0], details=Details.from_wire(details)),))
    data = report.build(record)
    assert report_problems(data) == [] and data["verdict"] == "conformant" and data["summary"]["pass"] == 1
    assert data["run"]["machine_events"] == [{"nodeid": "copy.yaml::x", "outcome": "pass", "try": 1, "kind": "killed", "evidence": evidence, "text": killed}]
    said = f"`x`: {killed}"
    text = markdown.render(data)
    assert f"- {said}" in text.split("\n## ")[0]  # with the run's facts, before any section
    section = lines_under(text, "## Tries lost to the machine, not counted against the EP")
    assert f"- `copy.yaml::x` (pass): {killed}; evidence: `{evidence}`" in section
    page = html.render(data)
    assert 'href="#machine">not counted against the EP</a>' in page and '<h2 id="machine">' in page
    assert f"<td>{killed}</td>" in page and f"<td>{escape(evidence, quote=True)}</td>" in page
    assert said in summary.render(data) and said in summary.terminal(data)


def test_the_reports_name_a_few_tries_lost_to_the_machine_and_list_them_all():
    from conformance.report.common import MACHINE_SHOWN, machine_lines

    events = [{"nodeid": f"f::case{n}", "outcome": "pass", "try": 1, "kind": "stopped", "evidence": "state T", "text": f"event {n}"}
              for n in range(MACHINE_SHOWN + 2)]
    data = dict(report_data(), run=dict(report_data()["run"], machine_events=events))
    lines = machine_lines(data)
    assert lines[:MACHINE_SHOWN] == [f"`case{n}`: event {n}" for n in range(MACHINE_SHOWN)]
    assert lines[MACHINE_SHOWN:] == ["... and 2 more tries lost to the machine, not counted against the EP (report.md and report.html list them)"]
    assert len([line for line in lines_under(markdown.render(data), "## Tries lost to the machine") if line.startswith("- ")]) == len(events)
    assert machine_lines(report_data()) == []


@pytest.mark.parametrize("fields, verdict", [({"interrupted": True}, "incomplete"), ({"collected": 2}, "incomplete")])
def test_a_record_of_an_interrupted_or_short_run_is_incomplete(fields, verdict):
    from conformance import report

    assert report.build(run_record(**fields))["verdict"] == verdict


def test_a_claim_is_verified_only_where_this_run_backs_it():
    claims = [dict(claim("copy_directions", True), value="cpu>default, default>cpu"), claim("memory", True), claim("session_memory", False),
              claim("packages", True)]
    pairs = [{"source": "cpu", "destination": "default", "status": "supported"}, {"source": "default", "destination": "cpu", "status": "broken"}]
    results = [{"ep": "DevEP", "contract": "memory-info.declaration", "outcome": "pass"},
               {"ep": "DevEP", "contract": "memory-info.session-inputs", "outcome": "pass"},
               {"ep": "DevEP", "contract": "memory-info.session-outputs", "outcome": "pass"}]
    shown = {c["claim"]: c for c in evidence.in_this_run(claims, "DevEP", results, [{"ep": "DevEP", "pairs": pairs}])}
    assert not shown["copy_directions"]["verified"], "a broken pair of the copy matrix contradicts the spec's 'verified'"
    assert shown["copy_directions"]["this_run"] == {"status": "contradicted", "evidence": "the copy matrix: default>cpu broken"}
    assert shown["memory"]["verified"] and shown["session_memory"]["verified"], "passed here, whatever the spec said"
    assert shown["packages"]["verified"] and shown["packages"]["this_run"]["status"] == "not_shown", "nothing here bears on it: the spec's word"
    pairs[1]["status"] = "supported"
    results[1]["outcome"] = "fail"
    shown = {c["claim"]: c for c in evidence.in_this_run(claims, "DevEP", results, [{"ep": "DevEP", "pairs": pairs}])}
    assert shown["copy_directions"]["verified"] and not shown["session_memory"]["verified"]
    assert shown["session_memory"]["this_run"]["evidence"] == "memory-info.session-inputs broke"
    # Without an EP device the matrix is the host's: it shows nothing of the EP's copies.
    unlisted = {c["claim"]: c for c in evidence.in_this_run(claims, "DevEP", results, [{"ep": "DevEP", "pairs": pairs}], ep_device=False)}
    assert unlisted["copy_directions"]["this_run"]["status"] == "not_shown"
    text = markdown.render(report_data(claims=list(shown.values())))
    assert ("| copy_directions | cpu>default, default>cpu | yes | shown by this run: the copy matrix: every claimed direction delivered the bytes "
            "| lane x |") in text


def test_the_cases_of_one_defect_share_one_message_pattern():
    def case(direction, dtype, got):
        return {"contract": "copy.x", "params": {"direction": direction, "dtype": dtype}, "outcome": "fail", "message": "m", "details": {"violations": [
            {"message": f"copy_tensors {direction} of {dtype} did not deliver: 1 of 60 bytes differ; first: @30: expected 0x7f got {got}"}]}}

    cases = [case("cpu>default", "float32", "0x7c"), case("default>cpu", "int64", "0x01")]
    (group,) = groups.grouped(cases, {})
    assert group.patterns == [("copy_tensors {direction} of {dtype} did not deliver: # of # bytes differ; first: @#: expected # got #", 2)]
    assert group.params == ["direction", "dtype"] and [row.reproducer for row in group.rows] == ["", ""]
    assert groups.pattern(dict(cases[0], params={})) == "copy_tensors cpu>default of float32 did not deliver: # of # bytes differ; first: @#: expected # got #"


def test_the_reports_show_each_contracts_provenance_and_api_level_and_mark_a_contested_case():
    import dataclasses

    from conformance import report
    from conformance.catalogue import selectors
    from conformance.outcomes import Result
    from conformance.report import junit_schema

    record = run_record()
    contested = next(c for c in load_catalogue().contracts if c.id == "memory-info.session-inputs")
    facts = record.eps[0].facts
    judged = selectors.contested_rule(contested, facts, facts.devices[0])
    assert judged.startswith("contested: judged by the statement's rule")  # the run's EP is no plugin EP
    case = dataclasses.replace(record.results[0], contract=contested.id, spec=str(contested.location), contested=judged)
    data = report.build(dataclasses.replace(record, results=(*record.results, case), contracts=(*record.contracts, contested)))
    version = data["onnxruntime"]["version"]
    level = ".".join(version.split(".")[:2])
    assert data["api_level"] == level and data["verdict_text"] == f"conformant at onnxruntime {level}'s API"
    entry = data["contracts"]["memory-info.session-inputs"]
    assert entry["provenance"]["basis"] == "maintainer" and entry["since"] == "1.24"
    assert entry["contested"]["where"] == {"plugin_library": True, "host_accessible": True, "onnxruntime": ">=1.27"}
    assert data["contracts"]["copy.roundtrip-exact"]["contested"] is None
    assert [r["contested"] for r in data["results"]] == ["", judged]
    text = markdown.render(data)
    assert f"**Verdict: conformant at onnxruntime {level}'s API**" in text
    assert ("| memory-info.session-inputs | an onnxruntime maintainer's statement: https://github.com/microsoft/onnxruntime/issues/29602 "
            "| 1.24 | **contested**") in text
    assert "| memory-info.session-inputs (**contested**) |" in text and "| copy.roundtrip-exact | " in text
    page = html.render(data)
    assert f"Verdict: conformant at onnxruntime {level}&#x27;s API" in page
    assert page.count('class="contested"') == 1 and "<b>Provenance</b>: a change merged into onnxruntime" not in page
    assert "<b>Provenance</b>: an onnxruntime maintainer&#x27;s statement" in page
    # JUnit: the contested case carries the property, the other case none.
    assert ("contested", judged) in Result.from_dict(data["results"][1]).case_properties()
    assert all(name != "contested" for name, _ in Result.from_dict(data["results"][0]).case_properties())
    assert "contested" not in junit_schema.CASE_PROPERTIES
