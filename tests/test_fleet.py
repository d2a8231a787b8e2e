"""The fleet table (`ort-conformance fleet`), its reader (`conformance.fleet`) and the answers page
(`ort-conformance answers`): runs gathered into one table that validates against its schema, a
page checked in a real browser, an unverified bundle refused, and questions an application asks
answered (or refused with a clear error) without onnxruntime."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import headless
from conftest import LANES
from conformance import cli
from conformance import fleet as reader
from conformance.errors import KitError
from conformance.tools import bundle, fleet, fleet_reader, matrix_text, plain_schema

ROOT = Path(__file__).resolve().parents[1]
HOST = {"name": "OpenVINO_shared_CPU", "device_type": "cpu", "vendor_id": 0x8086, "device_id": 0, "device_mem_type": "host_accessible",
        "allocator_type": "ort_device_allocator", "mem_type": "cpu_output"}


def host_accessible_ep(report: dict, *, imported: str = "host_accessible", inputs: str = "host_accessible") -> dict:
    """The CPU run as if made of an EP with CPU DEFAULT memory and a HOST_ACCESSIBLE allocator, an
    importer, copy_tensors refused between CPU and HOST_ACCESSIBLE memory, and session inputs in
    the memory `inputs` names: the shape seed 000 describes, for the table's and the page's logic."""
    data = copy.deepcopy(report)
    name = "OpenVINOExecutionProvider"
    data["ep"].update(name=name, label="openvino", version="1.8.1")
    data["eps"] = [data["ep"]]
    for device in data["devices"]:
        device.update(ep=name, label="CPU", memory={"default": None, "host_accessible": HOST})
    label = {"host_accessible": "OpenVINO_shared_CPU (cpu, vendor 0x8086, device 0, host_accessible)", "cpu": "Cpu (cpu, vendor 0x0000, device 0, default)"}
    for result in data["results"]:
        result.update(ep=name, device="CPU")
        memory = (result.get("details") or {}).get("evidence", {}).get("memory")
        if memory:
            result["details"]["evidence"]["memory"] = {k: label[inputs] if k.startswith("input") else v for k, v in memory.items()}
    refused = "copy_tensors refused: no data transfer"
    data["capabilities"] = [{"ep": name, "device": "CPU", "pairs": [
        {"source": "cpu", "destination": "cpu", "status": "not_required", "required": False, "detail": "no copy needed"},
        {"source": "cpu", "destination": "host_accessible", "status": "not_required", "required": False, "detail": refused},
        {"source": "host_accessible", "destination": "cpu", "status": "not_required", "required": False, "detail": refused},
        {"source": "host_accessible", "destination": "host_accessible", "status": "supported", "required": False, "detail": "4096 bytes intact"}],
        "imports": {"status": "importer", "reason": "", "handle_types": ["d3d12_resource"], "copies": [],
                    "tensor_memory": {"name": "OpenVINO_shared_CPU", "device_type": "cpu", "memory_type": imported}}}]
    return data


UNLISTED_IMPORTS = {"status": "not_run", "reason": "the C library lists 0 CUDAExecutionProvider devices; the kit tests device 0",
                    "handle_types": [], "tensor_memory": None, "copies": []}


def unlisted_ep(report: dict) -> dict:
    """The CPU run as if made of an EP that get_ep_devices() does not list (the CUDA EP without a
    GPU, as the cuda-absent lane runs it): no EP device, so no memory info was ever asked, and a
    copy matrix of plain CPU memory alone, as the kit records such a run."""
    data = copy.deepcopy(report)
    name = "CUDAExecutionProvider"
    data["ep"].update(name=name, label="cuda", version=None, ep_device=False)
    data["eps"] = [data["ep"]]
    for device in data["devices"]:
        device.update(ep=name, label="cuda", ep_name=name, ep_metadata={}, hardware=None, memory={"default": None, "host_accessible": None})
    for result in data["results"]:
        result.update(ep=name, device="cuda")
    (cpu_matrix,) = report["capabilities"]
    data["capabilities"] = [{**cpu_matrix, "ep": name, "device": "cuda", "imports": UNLISTED_IMPORTS}]
    return data


def runs_folder(tmp_path: Path, cpu_reports: Path, **variant) -> list[str]:
    """reports/cpu (the real run) and reports/openvino (its variant), as lanes/run lays them out."""
    cpu = tmp_path / "reports" / "cpu"
    cpu.mkdir(parents=True)
    for name in ("report.json", "report.html"):
        (cpu / name).write_bytes((cpu_reports / name).read_bytes())
    other = tmp_path / "reports" / "openvino"
    other.mkdir()
    (other / "report.json").write_text(json.dumps(host_accessible_ep(json.loads((cpu_reports / "report.json").read_text()), **variant)))
    return [str(cpu / "report.json"), str(other)]


@pytest.fixture
def table(tmp_path, cpu_reports, capsys) -> Path:
    out = tmp_path / "fleet"
    assert cli.main(["fleet", *runs_folder(tmp_path, cpu_reports), "-o", str(out)]) == 0
    assert "2 EP devices of 2 runs" in capsys.readouterr().out
    return out


def test_what_no_run_measured_is_not_known_with_why_in_the_table_the_page_the_answers_the_reader_and_the_probe(tmp_path, cpu_reports, capsys):
    """A real CPU run, the HOST_ACCESSIBLE variant and an EP that get_ep_devices() does not list:
    the unlisted EP's memory was never asked for, so every output says "not known" and why, and
    none says its memory is CPU memory or that no copy is needed."""
    folders = runs_folder(tmp_path, cpu_reports)
    unlisted = tmp_path / "reports" / "cuda-absent"
    unlisted.mkdir()
    report = unlisted_ep(json.loads((cpu_reports / "report.json").read_text()))
    (unlisted / "report.json").write_text(json.dumps(report))
    out, page = tmp_path / "fleet", tmp_path / "answers.md"
    assert cli.main(["fleet", *folders, str(unlisted), "-o", str(out), "--answers", str(page)]) == 0
    why = fleet_reader.UNLISTED
    assert "get_ep_devices() does not list this EP" in why

    # The reader: an answer of its own, and supports() refuses to say False.
    table_ = reader.load(out)
    (answer,) = table_.answers("cuda", None, "default", "cpu")
    assert answer.status == reader.NOT_KNOWN and why in answer.detail and not answer.supported
    for source, destination in (("default", "cpu"), ("cpu", "default"), ("host_accessible", "cpu"), ("default", "default")):
        with pytest.raises(reader.NotMeasured) as raised:
            table_.supports("CUDAExecutionProvider", None, source, destination)
        assert f"{source} -> {destination} is not known: run cuda-absent: device cuda: {why}" in str(raised.value)
    assert isinstance(raised.value, KitError) and not isinstance(raised.value, LookupError)
    assert table_.supports("cuda", None, "cpu", "cpu") is False  # plain CPU memory: measured, copy_tensors declined it

    # answers.md: the summary row and the section say not known and why; no CPU-memory guess.
    text = page.read_text()
    (line,) = [line for line in text.splitlines() if line.startswith("| CUDAExecutionProvider |")]
    assert "| not known: not listed by get_ep_devices() |" in line and f"| not known: {why} |" in line
    section = text[text.index("### CUDAExecutionProvider"):]
    section = section[:section.index("\n### ")]
    assert f"**Is its DEFAULT memory something other than CPU?** not known: {why}" in section
    assert f"**Which copy_tensors directions work?** not known: {why}" in section
    assert "CPU → CPU: **not_required**" in section and "(plain CPU memory)" in section
    assert "CPU memory (copy_tensors declines" not in line + section and "no copy is needed" not in line + section
    assert "NotMeasured" in text  # the page says what the reader does where it says not known

    # fleet.html: the memory cells and every copy column the unlisted row lacks read not known,
    # their titles why; the CPU -> CPU cell it has is marked as plain CPU memory.
    html = (out / "fleet.html").read_text()
    row = html[html.index('<tr id="3-cuda-absent/cuda/cuda">'):]
    row = row[:row.index("</tr>")]
    cells = row.split("<td")[1:]
    memory_cells = cells[4:6]
    assert all("not known" in cell and f'title="{why}"' in cell for cell in memory_cells)
    copies = {head: cell for head, cell in zip(["CPU→CPU", "CPU→HOST", "HOST→CPU", "HOST→HOST"], cells[6:10], strict=True)}
    assert "not_required" in copies["CPU→CPU"] and "between plain CPU memory" in copies["CPU→CPU"]
    assert all(">not known<" in copies[head] and f'title="{why}"' in copies[head] for head in ("CPU→HOST", "HOST→CPU", "HOST→HOST"))
    assert "the device has no such memory" not in html and "plain CPU memory</a>" not in row

    # The probe's text for the same EP.
    (matrix,) = report["capabilities"]
    text_lines = list(matrix_text.lines({"eps": [{"ep": report["ep"]["name"], "label": "cuda", "onnxruntime": report["onnxruntime"]["version"],
                                                   "ep_device": False, "devices": [{**matrix, "device": "cuda"}]}]}))
    assert "its DEFAULT and HOST_ACCESSIBLE memory are not known (it was never asked for memory info)" in text_lines[1]
    assert "plain CPU memory only, not of memory the EP owns" in text_lines[1]


def test_a_lost_copy_probe_is_not_known_to_the_reader_not_false(table, tmp_path):
    data = json.loads((table / "fleet.json").read_text())
    other = data["rows"][1]
    other["copies"], other["probe_error"] = [], "the probe's process was killed by SIGSEGV"
    path = tmp_path / "lost.json"
    path.write_text(json.dumps(data))
    table_ = reader.load(path)
    (answer,) = table_.answers("openvino", "1.8.1", "host_accessible", "host_accessible")
    assert answer.status == reader.NOT_KNOWN and "its copy probe was lost: the probe's process was killed by SIGSEGV" in answer.detail
    with pytest.raises(reader.NotMeasured, match="killed by SIGSEGV"):
        table_.supports("openvino", "1.8.1", "host_accessible", "host_accessible")


def test_fleet_writes_json_valid_against_its_published_schema_with_a_row_per_ep_device(table, cpu_reports):
    data = json.loads((table / "fleet.json").read_text())
    assert fleet.fleet_problems(data) == []
    cpu, other = data["rows"]
    report = json.loads((cpu_reports / "report.json").read_text())
    assert (cpu["ep"], cpu["onnxruntime"], cpu["device"]) == ("CPUExecutionProvider", report["onnxruntime"]["version"], "cpu")
    assert cpu["memory"] == {"default": None, "host_accessible": None}
    assert [(p["source"], p["destination"], p["status"]) for p in cpu["copies"]] == [("cpu", "cpu", "not_required")]
    assert cpu["importer"]["status"] == "none"
    assert cpu["streams"] == {"stream_aware": False, "outcome": "pass", "reason": ""}  # the CPU EP refuses a sync stream, as it must
    assert cpu["session"]["inputs"][0]["memory"].startswith("Cpu (cpu") and cpu["session"]["inputs"][0]["cases"] > 0
    assert cpu["run"]["verdict"] == report["verdict"] and cpu["run"]["date"] == report["run"]["started"]
    assert (table / cpu["run"]["report"]).resolve() == (table.parent / "reports/cpu/report.html").resolve()
    assert other["memory"]["host_accessible"]["name"] == "OpenVINO_shared_CPU" and other["importer"]["handle_types"] == ["d3d12_resource"]
    # the openvino variant has no report.html: its cells link to its report.json
    assert other["run"]["report"].endswith("openvino/report.json")


def test_a_row_says_whether_the_ep_device_is_stream_aware_from_its_sync_stream_case():
    def result(outcome, message="", **evidence):
        return {"contract": "streams.sync-stream", "ep": "E", "device": "d", "outcome": outcome, "message": message,
                "details": {"evidence": evidence} if evidence else {}}

    cases = [(result("pass", stream_created=True, copies_on_stream=2), {"stream_aware": True, "outcome": "pass", "reason": ""}),
             (result("fail", "copies on the EP's sync stream did not deliver the bytes", stream_created=True), {"stream_aware": True, "outcome": "fail",
              "reason": "copies on the EP's sync stream did not deliver the bytes"}),
             (result("not_applicable", "E is not stream-aware: create_sync_stream() refused (no)"), {"stream_aware": False, "outcome": "not_applicable",
              "reason": "E is not stream-aware: create_sync_stream() refused (no)"}),
             (result("pass", refused="no streams"), {"stream_aware": False, "outcome": "pass", "reason": ""}),  # a report older than stream_created
             (result("not_run", "stopped before copy_tensors cpu>default"), {"stream_aware": None, "outcome": "not_run",
              "reason": "stopped before copy_tensors cpu>default"})]
    for case, expected in cases:
        assert fleet._streams([case], "E", "d") == expected
    assert fleet._streams([], "E", "d")["stream_aware"] is None
    from conformance.tools.fleet_page import _streams_cell

    row = {"run": {"report": "r/report.html"}, "streams": cases[1][1]}
    assert ">yes <small>(fail)</small></a>" in _streams_cell(row) and 'class="bad"' in _streams_cell(row)
    assert ">unknown</a>" in _streams_cell({"run": {"report": "r.json"}})  # a table written before the column


def test_the_schema_refuses_a_row_that_lacks_what_the_table_answers(table):
    data = json.loads((table / "fleet.json").read_text())
    del data["rows"][0]["copies"]
    data["rows"][1]["importer"]["status"] = "maybe"
    problems = fleet.fleet_problems(data)
    assert any("rows[0]" in p and "copies" in p for p in problems) and any("rows[1].importer.status" in p for p in problems)


def mutations(data: dict) -> list[dict]:
    """The table made wrong in the ways a file written elsewhere may be: fields retyped, missing,
    out of their sets; each a copy."""
    changes = [
        lambda d: d["rows"][0].update(copies="none"),
        lambda d: d["rows"][0]["memory"].update(default={"name": 3}),
        lambda d: d["rows"][1]["memory"]["host_accessible"].update(vendor_id="0x8086"),
        lambda d: d["rows"][0]["run"].pop("verdict"),
        lambda d: d["rows"][0]["run"].update(verdict="fine"),
        lambda d: d["rows"][0].update(ep_device="yes"),
        lambda d: d["rows"][1]["copies"][0].update(required=1),
        lambda d: d["rows"][0]["session"]["inputs"][0].update(cases=0),
        lambda d: d["rows"][0]["session"].update(outcomes={"x": {"pass": "3"}}),
        lambda d: d.update(runs=True),
        lambda d: d.update(rows={}),
        lambda d: d["rows"].append(7),
        lambda d: d["rows"][0]["importer"].update(tensor_memory=[]),
    ]
    out = []
    for change in changes:
        changed = copy.deepcopy(data)
        change(changed)
        out.append(changed)
    return out


def test_the_readers_schema_check_finds_what_jsonschema_finds_with_the_standard_library_alone(table):
    schema = json.loads(fleet_reader.SCHEMA_FILE.read_text())
    data = json.loads((table / "fleet.json").read_text())
    assert plain_schema.problems(schema, data) == [] == fleet.fleet_problems(data)
    for changed in mutations(data):
        ours, theirs = plain_schema.problems(schema, changed), fleet.fleet_problems(changed)
        assert ours and theirs, (ours, theirs)
        places = {line.split(": ")[0] for line in ours}
        assert all(any(line.startswith(place) for place in places) for line in theirs), (ours, theirs)  # every place jsonschema names, or the object holding it
    with pytest.raises(plain_schema.UnknownKeyword, match="keyword pattern is not checked"):
        plain_schema.problems({"type": "string", "pattern": "^a"}, "b")


def test_the_reader_answers_a_question_about_each_ep(table):
    table_ = reader.load(table)
    assert table_.eps() == ["CPUExecutionProvider", "OpenVINOExecutionProvider"]
    version = table_.versions("cpu")[0]
    # The CPU EP: DEFAULT is CPU memory, and copy_tensors declines CPU -> CPU: no copy is needed.
    assert table_.supports("cpu", version, "default", "cpu") is False
    (answer,) = table_.answers("CPUExecutionProvider", version, "DEFAULT", "cpu")
    assert (answer.source, answer.destination, answer.status) == ("cpu", "cpu", "not_required")
    assert "DEFAULT memory is plain CPU memory" in answer.detail and answer.report.endswith("report.html")
    # The HOST_ACCESSIBLE EP: its own memory copies; CPU <-> HOST_ACCESSIBLE is refused.
    assert table_.supports("openvino", "1.8.1", "host_accessible", "host_accessible") is True
    assert table_.supports("OpenVINOExecutionProvider", "1.8.1", "host_accessible", "cpu") is False
    assert table_.answers("openvino", None, "host_accessible", "cpu")[0].status == "not_required"


@pytest.mark.parametrize("question, message", [
    (("tensorrt", None, "cpu", "default"), "no run of EP 'tensorrt'; the table has CPUExecutionProvider, OpenVINOExecutionProvider"),
    (("openvino", "9.9", "cpu", "default"), "no run of openvino at version '9.9'; its versions: 1.8.1"),
    (("openvino", "1.8.1", "gpu", "cpu"), "'gpu' is not a memory of the table; memories: cpu, default, host_accessible"),
    (("cpu", None, "host_accessible", "cpu"), "advertises no HOST_ACCESSIBLE memory"),
])
def test_an_unknown_ep_version_or_memory_is_a_clear_error(table, question, message):
    with pytest.raises(reader.FleetError) as raised:
        reader.load(table).supports(*question)
    assert message in str(raised.value)
    assert isinstance(raised.value, LookupError)


def test_a_memory_one_run_of_an_ep_lacks_is_answered_from_the_runs_that_have_it(tmp_path, cpu_reports, capsys):
    """The same EP version set up two ways (refdev and refdev-host in the lanes): the run without
    HOST_ACCESSIBLE memory answers not_advertised, and supports() goes by the run that has it."""
    folders = runs_folder(tmp_path, cpu_reports)
    plain = tmp_path / "reports" / "openvino-plain"
    plain.mkdir()
    data = json.loads((Path(folders[1]) / "report.json").read_text())
    data["devices"][0]["memory"]["host_accessible"] = None
    data["capabilities"][0]["pairs"] = [p for p in data["capabilities"][0]["pairs"] if "host_accessible" not in (p["source"], p["destination"])]
    (plain / "report.json").write_text(json.dumps(data))
    assert cli.main(["fleet", *folders, str(plain), "-o", str(tmp_path / "fleet")]) == 0
    table_ = reader.load(tmp_path / "fleet")
    answers = {a.run: a.status for a in table_.answers("openvino", "1.8.1", "host_accessible", "host_accessible")}
    assert answers == {"openvino": "supported", "openvino-plain": "not_advertised"}
    assert table_.supports("openvino", "1.8.1", "host_accessible", "host_accessible") is True


def test_the_reader_needs_no_onnxruntime_and_loads_only_the_standard_library(table):
    code = ("import sys\nfor name in ('onnxruntime', 'numpy', 'jsonschema', 'yaml', 'pytest'): sys.modules[name] = None\n"
            "import conformance.fleet as f\n"
            f"t = f.load({str(table / 'fleet.json')!r})\n"
            "print(t.supports('openvino', '1.8.1', 'host_accessible', 'host_accessible'))\n"
            "print(sorted(m for m in sys.modules if m.startswith('conformance')))")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert completed.returncode == 0, completed.stderr
    answer, modules = completed.stdout.splitlines()
    assert answer == "True"
    assert modules == str(["conformance", "conformance.errors", "conformance.fleet", "conformance.safe_io", "conformance.tools",
                           "conformance.tools.fleet_reader", "conformance.tools.plain_schema", "conformance.version"])


@pytest.mark.parametrize("content, message", [
    ("{", "not JSON"),
    ('{"schema": "ort-ep-conformance/report/1"}', "not a fleet table of schema ort-ep-conformance/fleet/1"),
    ('{"schema": "ort-ep-conformance/fleet/1", "rows": [{"ep": "x"}]}', "$: lacks 'kit_version', 'generated', 'runs' (and 1 more)"),
    ('{"schema": "ort-ep-conformance/fleet/1", "kit_version": "1", "generated": "now", "runs": 1, "rows": [{"ep": "x"}]}',
     "not a fleet table of fleet.schema.json: $.rows[0]: lacks 'id', 'ep_label', 'ep_version'"),
])
def test_the_reader_refuses_a_file_that_is_not_a_fleet_table_naming_it(tmp_path, content, message):
    path = tmp_path / "fleet.json"
    path.write_text(content)
    with pytest.raises(reader.FleetError, match=None) as raised:
        reader.load(path)
    assert str(path) in str(raised.value) and message in str(raised.value)


def test_a_verified_bundle_goes_in_with_its_report_page_beside_the_table(tmp_path, cpu_reports, capsys):
    archive, _ = bundle.write(cpu_reports, tmp_path / "acme-cpu.tar.gz", vendor="ACME")
    out = tmp_path / "fleet"
    assert cli.main(["fleet", str(archive), "-o", str(out)]) == 0
    (row,) = json.loads((out / "fleet.json").read_text())["rows"]
    assert row["run"]["kind"] == "bundle" and row["run"]["name"] == "acme-cpu"
    assert (out / row["run"]["report"]).read_bytes() == (cpu_reports / "report.html").read_bytes()


def test_an_unverified_bundle_is_refused_saying_why(tmp_path, cpu_reports, capsys):
    archive, _ = bundle.write(cpu_reports, tmp_path / "acme-cpu.tar.gz", vendor="ACME")
    with tarfile.open(archive) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    report = json.loads(files["report.json"])
    report["verdict"] = "conformant" if report["verdict"] != "conformant" else "non_conformant"
    files["report.json"] = json.dumps(report).encode()  # the manifest's hash no longer matches
    archive.write_bytes(bundle.archive(files, 0))
    out = tmp_path / "fleet"
    assert cli.main(["fleet", str(archive), "-o", str(out)]) == 2
    error = capsys.readouterr().err
    assert "an unverified bundle is refused" in error and "report.json" in error and len(error.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("what", ["missing", "not json", "not a report"])
def test_fleet_of_something_that_is_not_a_run_exits_2_in_one_line(tmp_path, capsys, what):
    path = tmp_path / "x.json"
    if what != "missing":
        path.write_text("{" if what == "not json" else json.dumps({"schema": "ort-ep-conformance/report/1"}))
    assert cli.main(["fleet", str(path), "-o", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("ort-conformance: ") and str(path) in error and len(error.strip().splitlines()) == 1


def test_answers_answer_the_seeds_questions_and_weigh_its_claims_about_openvino(table, tmp_path, capsys):
    page = tmp_path / "docs" / "answers.md"
    assert cli.main(["answers", str(table / "fleet.json"), "-o", str(page)]) == 0
    text = page.read_text()
    assert "| CPUExecutionProvider |" in text and "| OpenVINOExecutionProvider | 1.8.1 |" in text
    for question in ("Is its DEFAULT memory something other than CPU?", "Which copy_tensors directions work?", "Does it give an importer?",
                     "Where do session inputs live?", "Where do session outputs live?"):
        assert text.count(question) == 2
    assert "*Registers with CPU as its default device, beside a HOST_ACCESSIBLE allocator*: holds" in text
    assert "*CopyTensors returns an error (no data transfer)*: holds" in text
    assert "*Imported tensors are HOST_ACCESSIBLE*: holds: imported tensors report host_accessible memory" in text
    assert "*Session inputs are only ever CPU or DEFAULT memory*: does not hold" in text
    # every answer links to the run it came from, relative to the page
    assert "](../reports/cpu/report.html#capabilities)" in text and "](../reports/openvino/report.json)" in text


def test_answers_say_when_a_claim_does_not_hold(tmp_path, cpu_reports, capsys):
    out = tmp_path / "fleet"
    assert cli.main(["fleet", *runs_folder(tmp_path, cpu_reports, imported="default", inputs="cpu"), "-o", str(out),
                     "--answers", str(tmp_path / "answers.md")]) == 0
    text = (tmp_path / "answers.md").read_text()
    assert "*Imported tensors are HOST_ACCESSIBLE*: does not hold: imported tensors report default memory" in text
    assert "*Session inputs are only ever CPU or DEFAULT memory*: holds" in text


def test_answers_without_an_openvino_run_say_none_was_weighed(tmp_path, cpu_reports, capsys):
    out = tmp_path / "fleet"
    assert cli.main(["fleet", str(cpu_reports), "-o", str(out), "--answers", str(tmp_path / "answers.md")]) == 0
    assert "No run of the OpenVINO EP is in this table" in (tmp_path / "answers.md").read_text()


def test_answers_of_a_file_that_is_not_a_fleet_table_exits_2(tmp_path, capsys):
    (tmp_path / "x.json").write_text("[]")
    assert cli.main(["answers", str(tmp_path / "x.json")]) == 2
    assert "not a fleet table" in capsys.readouterr().err


def test_lanes_end_by_writing_the_fleet_table_of_their_lanes(tmp_path, cpu_reports, monkeypatch):
    reports, venvs = tmp_path / "reports", tmp_path / "venvs"
    (reports / "cpu").mkdir(parents=True)
    (reports / "cpu" / "report.json").write_bytes((cpu_reports / "report.json").read_bytes())
    (reports / "cuda").mkdir()
    (reports / "cuda" / "skipped.txt").write_text("no NVIDIA GPU\n")
    (venvs / "cpu" / "bin").mkdir(parents=True)
    (venvs / "cpu" / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setattr(LANES, "REPO", tmp_path)
    monkeypatch.setattr(LANES, "REPORTS", reports)
    monkeypatch.setattr(LANES, "FLEET", reports / "fleet")
    monkeypatch.setattr(LANES, "VENVS", venvs)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    known = {lane.name: lane for lane in LANES.LANES}
    assert LANES.write_fleet([known["cpu"], known["cuda"]]) is False
    rows = json.loads((reports / "fleet" / "fleet.json").read_text())["rows"]
    assert [row["run"]["name"] for row in rows] == ["cpu"]
    assert (reports / "fleet" / "fleet.html").is_file() and "## Each EP device" in (reports / "answers.md").read_text()


# --- in a real browser ---------------------------------------------------------------------------


def test_the_page_shows_one_table_filters_it_and_links_each_cell_to_the_runs_report_in_chromium(browser, table, tmp_path):
    page = table / "fleet.html"
    dom = headless.parse_dom(headless.dump_dom(browser, page, tmp_path / "profile-all"))
    (grid,) = dom.find_all("table")
    rows = grid.find_all("tr")[1:]
    assert len(rows) == 2 and all(not row.attrs.get("hidden") for row in rows)
    for row in rows:
        links = [cell.find_all("a")[0].attrs["href"] for cell in row.find_all("td")]
        assert links and all(link.split("#")[0] in ("../reports/cpu/report.html", "../reports/openvino/report.json") for link in links)
    filtered = headless.parse_dom(headless.dump_dom(browser, page, tmp_path / "profile-q", query="q=openvino%20d3d12"))
    hidden = {row.attrs["id"]: "hidden" in row.attrs for row in filtered.find_all("tr")[1:]}
    assert [name for name, off in hidden.items() if not off] == ["2-openvino/openvino/CPU"]
    assert filtered.by_id("shown").text() == "1"
    png = tmp_path / "fleet.png"
    headless.screenshot(browser, page, png, tmp_path / "profile-shot", size=(2200, 600))
    pixels = headless.read_png(png)
    assert headless.colour_share(pixels, "#dff3e0") > 0.001, "supported and not_required cells are drawn green"
    assert headless.colour_share(pixels, "#ffffff") < 0.97


def test_the_page_escapes_what_a_report_says(tmp_path, cpu_reports, capsys):
    report = json.loads((cpu_reports / "report.json").read_text())
    report["devices"][0]["label"] = "<script>alert(1)</script>"
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "report.json").write_text(json.dumps(report))
    assert cli.main(["fleet", str(folder), "-o", str(tmp_path / "out")]) == 0
    assert "<script>alert(1)" not in (tmp_path / "out" / "fleet.html").read_text()


def test_answers_write_what_a_fleet_table_says_as_text_never_as_raw_html(table, tmp_path, capsys):
    # a table written elsewhere is hostile until checked: its EP names, versions, labels and
    # messages reach the page as text (entities), and what stands in a code span as typed
    data = json.loads((table / "fleet.json").read_text())
    for row in data["rows"]:
        row["ep"] = row["ep"] + "<script>alert(1)</script>"
        row["device"] = "<img src=x onerror=alert(1)>"
        row["run"]["name"] = "run`<b>"
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(data))
    page = tmp_path / "answers.md"
    assert cli.main(["answers", str(hostile), "-o", str(page)]) == 0
    text = page.read_text()
    outside_code = re.sub(r"(`+)(?:(?!\1).)*?\1", "", text)  # the page without its code spans
    assert "<script" not in outside_code and "<img" not in outside_code and "<b>" not in outside_code
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "Run ``run`<b>``" in text and "[run run&#96;&lt;b&gt;," in text
