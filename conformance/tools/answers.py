"""The answers page: seed 000's questions answered for every EP a run measured, from a fleet table.

Seed 000 (onnxruntime feature request "Expose API to query supported copies for EPs") asks which
copy directions an EP supports, and its thread makes claims about OpenVINO: that it implements
no data transfer (CopyTensors returns an error), registers with CPU as its default device beside
a HOST_ACCESSIBLE allocator, and that imported tensors are HOST_ACCESSIBLE. `ort-conformance
answers FLEET.json -o docs/answers.md` writes, per EP device of the table, the answer to each
question, linked to the run it came from, and weighs each of those claims against the OpenVINO
rows. Every fact comes from fleet.json; nothing is written by hand, and nothing is said that
no run measured: where a run could not measure an answer (an EP that get_ep_devices() does not
list advertised no memory), the answer is "not known", with why.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from conformance.report.common import code_span
from conformance.tools.fleet_page import LABELS
from conformance.tools.fleet_reader import MEMORIES, UNLISTED

SEED = "onnxruntime feature request \"Expose API to query supported copies for EPs\" (seed 000)"
OPENVINO = "OpenVINOExecutionProvider"
WORKS = ("supported",)
REFUSED = ("unsupported", "not_required", "required_but_missing")


def _cpu_default(row: dict[str, Any]) -> bool:
    default = row["memory"]["default"]
    return default is None or default.get("device_type") == "cpu"


def _link(row: dict[str, Any], anchor: str, fleet_dir: Path, out_dir: Path) -> str:
    """A Markdown link to the run's report, relative to the page being written."""
    report = row["run"]["report"]
    target = report if "://" in report else os.path.relpath(fleet_dir / report, out_dir)
    fragment = f"#{anchor}" if anchor and report.endswith(".html") else ""
    return f"[run {row['run']['name']}, {row['run']['date'] or 'undated'}]({Path(target).as_posix()}{fragment})"


def _name(memory: str) -> str:
    return LABELS.get(memory, memory)


def default_answer(row: dict[str, Any]) -> str:
    if not row["ep_device"]:
        return f"not known: {UNLISTED} (sessions run on it by provider name)"
    default = row["memory"]["default"]
    if _cpu_default(row):
        return "no: its DEFAULT memory is plain CPU memory" + (f" ({default['label']})" if default else " (it advertises none of its own)")
    return f"yes: {default['label']}"


def _short_default(row: dict[str, Any]) -> str:
    """The summary table's DEFAULT cell: the answer's first words, and for "not known" why."""
    return "not known: not listed by get_ep_devices()" if not row["ep_device"] else default_answer(row).split(":")[0]


def copies_answer(row: dict[str, Any]) -> tuple[str, list[str]]:
    """(one line, a line per direction) among CPU, DEFAULT and HOST_ACCESSIBLE."""
    pairs = [p for p in row["copies"] if p["source"] in MEMORIES and p["destination"] in MEMORIES]
    lines = [f"{_name(p['source'])} → {_name(p['destination'])}: **{p['status']}**{' (required)' if p['required'] else ''}: {p['detail']}" for p in pairs]
    if not row["ep_device"]:
        # Its memory None means never asked: what it measured is plain CPU memory, said as such.
        return f"not known: {UNLISTED}", [f"{line} (plain CPU memory)" for line in lines]
    if not pairs:
        return f"not known: {'its copy probe was lost: ' + row['probe_error'] if row['probe_error'] else 'the run has no copy matrix for this device'}", []
    works = [p for p in pairs if p["status"] in WORKS]
    if all(p["status"] == "not_required" for p in pairs):
        head = ("no copy is needed: every memory it advertises is CPU memory (copy_tensors declines CPU → CPU, as it may)"
                if _cpu_default(row) and row["memory"]["host_accessible"] is None
                else "no copy is needed: copy_tensors declined every direction, each between memories the CPU reads directly")
    else:
        head = (", ".join(f"{_name(p['source'])} → {_name(p['destination'])}" for p in works) or "none") + " moved the bytes intact"
        broken = [f"{_name(p['source'])} → {_name(p['destination'])} {p['status']}" for p in pairs if p["status"] not in WORKS + ("not_required",)]
        head += f"; {', '.join(broken)}" if broken else ""
        head += " (its DEFAULT is CPU memory, so CPU stands for it)" if _cpu_default(row) else ""
    return head, lines


def importer_answer(row: dict[str, Any]) -> str:
    importer = row["importer"]
    if importer["status"] == "none":
        return f"no importer: {importer['reason'] or 'the EP device imports no external memory'}"
    if importer["status"] in ("not_run", "unknown"):
        return f"not known here: {importer['reason']}"
    memory = importer.get("tensor_memory")
    reported = (f"imported tensors report {memory.get('memory_type')} memory ({memory.get('name')}, {memory.get('device_type')})"
                if memory else "no imported tensor's memory was read")
    copies = "; ".join(f"{c['source']} → {c['destination']} {c['status']}" for c in importer["copies"])
    return (f"yes, for handle types {', '.join(importer['handle_types']) or 'none'}; {reported}"
            + (f"; copies of imported tensors: {copies}" if copies else ""))


def session_answer(row: dict[str, Any], which: str) -> str:
    places = row["session"][which]
    if not places:
        return f"not measured: {row['session']['reason']}"
    return "; ".join(f"{p['memory']} ({p['cases']} case{'s' if p['cases'] != 1 else ''}" + (f", {p['failed']} not passed" if p["failed"] else "") + ")"
                     for p in places)


def _heading(row: dict[str, Any]) -> str:
    return f"{row['ep']} {row['ep_version'] or ''} — onnxruntime {row['onnxruntime'] or '?'}, device {row['device']}".replace("  ", " ")


def _inert(value: Any) -> Any:
    """`value` with `&`, `<`, `>` and backticks of every string written as entities: Markdown passes
    raw HTML through, a stray backtick opens a code span, and a renderer decodes the entities back
    to the characters (link targets included)."""
    if isinstance(value, str):
        return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("`", "&#96;")
    if isinstance(value, dict):
        return {key: _inert(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_inert(item) for item in value]
    return value


def _row_section(row: dict[str, Any], raw_run: dict[str, Any], fleet_dir: Path, out_dir: Path) -> list[str]:
    """The row's answers; `raw_run` is its run as the table gives it, for the code spans."""
    link = lambda anchor: _link(row, anchor, fleet_dir, out_dir)  # noqa: E731
    head, lines = copies_answer(row)
    run = row["run"]
    out = [f"### {_heading(row)}", "",
           f"Run {code_span(raw_run['name'])} ({run['kind']} {code_span(raw_run['source'])}), verdict **{run['verdict']}**"
           + ("" if run["complete"] else " (a partial run)") + f", {run['date']}, on {run['platform']}: {link('verdict')}.", "",
           f"- **Is its DEFAULT memory something other than CPU?** {default_answer(row)}. {link('version-chain-heading')}",
           f"- **Which copy_tensors directions work?** {head}. {link('capabilities')}",
           *(f"  - {line}" for line in lines),
           f"- **Does it give an importer?** {importer_answer(row)}. {link('capabilities')}",
           f"- **Where do session inputs live?** {session_answer(row, 'inputs')}. {link('contract-memory-info.session-inputs')}",
           f"- **Where do session outputs live?** {session_answer(row, 'outputs')}. {link('contract-memory-info.session-outputs')}", ""]
    return out


def _pair(row: dict[str, Any], source: str, destination: str) -> dict[str, Any] | None:
    return next((p for p in row["copies"] if (p["source"], p["destination"]) == (source, destination)), None)


def openvino_claims(rows: list[dict[str, Any]], fleet_dir: Path, out_dir: Path) -> list[str]:
    """Seed 000's claims about OpenVINO, each weighed against every OpenVINO row of the table."""
    out = ["## Seed 000's claims about OpenVINO", "",
           "bbernhar: \"OpenVINO EP. It doesn't implement IDataTransfer, so attempting to call CopyTensors returns an ORT error. "
           "Our current OV path happens to work because the imported tensors are HOST_ACCESSIBLE.\" skottmckay: \"AFAIK OV only "
           "provides the HOST_ACCESSIBLE allocator and registers with CPU as its default device.\"", ""]
    openvino = [row for row in rows if row["ep"] == OPENVINO]
    if not openvino:
        return out + ["No run of the OpenVINO EP is in this table, so none of these claims is weighed here. The OpenVINO lanes of",
                      "`lanes/run` measure it; regenerate this page from their fleet table (lanes/README.md, \"The fleet table and the answers page\").", ""]
    for row in openvino:
        link = lambda anchor, row=row: _link(row, anchor, fleet_dir, out_dir)  # noqa: E731
        out += [f"### {_heading(row)} ({row['onnxruntime_package'] or 'package not stated'})", ""]
        out.append(f"- *Registers with CPU as its default device, beside a HOST_ACCESSIBLE allocator*: {_registration(row)}. {link('version-chain-heading')}")
        out.append(f"- *CopyTensors returns an error (no data transfer)*: {_transfer(row)}. {link('capabilities')}")
        out.append(f"- *Imported tensors are HOST_ACCESSIBLE*: {_imported(row)}. {link('capabilities')}")
        out.append(f"- *Session inputs are only ever CPU or DEFAULT memory*: {_inputs(row)}. {link('contract-memory-info.session-inputs')}")
        out.append("")
    return out


def _registration(row: dict[str, Any]) -> str:
    if not row["ep_device"]:
        return "cannot be weighed: this build lists no OpenVINO EP device, so it advertises no memory info at all"
    host = row["memory"]["host_accessible"]
    default = "DEFAULT is CPU memory" if _cpu_default(row) else f"DEFAULT is {row['memory']['default']['label']}"
    holds = _cpu_default(row) and host is not None
    return f"{'holds' if holds else 'does not hold'}: {default}; HOST_ACCESSIBLE is {host['label'] if host else 'not advertised'}"


def _transfer(row: dict[str, Any]) -> str:
    pairs = [p for p in row["copies"] if "cpu" in (p["source"], p["destination"]) and p["source"] != p["destination"]]
    if not row["ep_device"]:
        return f"cannot be weighed: {UNLISTED}"
    if not pairs:
        return "cannot be weighed: no copy between CPU and memory of the EP was tried in this run" + (f" ({row['probe_error']})" if row["probe_error"] else "")
    refused = [p for p in pairs if p["status"] in REFUSED]
    moved = [p for p in pairs if p["status"] in WORKS]
    said = "; ".join(f"{_name(p['source'])} → {_name(p['destination'])} {p['status']}" for p in pairs)
    if refused and not moved:
        return f"holds: copy_tensors was refused between CPU and the EP's memory ({said})"
    if moved and not refused:
        return f"does not hold: copy_tensors moved the bytes intact ({said})"
    return f"holds in part ({said})"


def _imported(row: dict[str, Any]) -> str:
    importer = row["importer"]
    if importer["status"] != "importer":
        return f"cannot be weighed here: {importer_answer(row)}"
    memory = importer.get("tensor_memory")
    if not memory:
        return "cannot be weighed: no imported tensor's memory was read"
    kind = str(memory.get("memory_type"))
    return f"{'holds' if kind == 'host_accessible' else 'does not hold'}: imported tensors report {kind} memory ({memory.get('name')})"


def _inputs(row: dict[str, Any]) -> str:
    places = row["session"]["inputs"]
    if not places:
        return f"cannot be weighed: {row['session']['reason']}"
    host = [p for p in places if p["memory"].endswith("host_accessible)")]
    return (f"does not hold: inputs lived in {'; '.join(p['memory'] for p in host)}" if host
            else f"holds: inputs lived in {'; '.join(p['memory'] for p in places)}")


def render(data: dict[str, Any], fleet_path: Path, output: Path | None) -> str:
    """The page, its links relative to `output`'s folder (the current folder when printed)."""
    fleet_dir = fleet_path.parent
    out_dir = (output.parent if output else Path("."))
    raw_rows = sorted(data["rows"], key=lambda r: (r["ep"], r["ep_version"] or "", r["onnxruntime"] or "", r["run"]["name"], r["device"]))
    # Every string of the table was written elsewhere (issue 38 item 7): made inert as HTML before
    # it reaches the page, except where it stands in a code span (which shows entities as typed).
    rows = [_inert(row) for row in raw_rows]
    out = ["# Which copies each EP supports: seed 000, answered from runs", "",
           f"Generated from the fleet table {code_span(fleet_path.as_posix())} by `ort-conformance answers` (after `lanes/run`: "
           "`ort-conformance fleet reports/*/report.json -o reports/fleet --answers docs/answers.md`); do not edit by hand.",
           f"The question is that of the {SEED}: an application cannot ask onnxruntime which copy directions an EP supports, so it",
           "probes at start-up. These answers were measured by conformance runs: `copy_tensors` tried with real bytes in each",
           "direction, the importer asked for, and the memory infos of real sessions read. Each answer links to the run it came from",
           "(the links lead into the lanes' report folders, `reports/<lane>/report.html`, written by `lanes/run`). An application",
           "reads the same facts from `fleet.json` with `conformance.fleet.load(path).supports(ep, version, src, dst)`.",
           "What a run could not measure is **not known** here, with why: an EP that `get_ep_devices()` does not list was never",
           "asked for its memory, so its DEFAULT and HOST_ACCESSIBLE memory and the copies to and from them are not known",
           "(`supports` raises `conformance.fleet.NotMeasured` for them rather than answer False).", "",
           "| EP | EP version | onnxruntime | device | DEFAULT other than CPU? | copies that work | importer | session inputs | session outputs | verdict |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        head, _ = copies_answer(row)
        importer = row["importer"]
        short = ("yes: " + ", ".join(importer["handle_types"])) if importer["status"] == "importer" else {"none": "no"}.get(importer["status"], "not known")
        out.append(f"| {row['ep']} | {row['ep_version'] or '-'} | {row['onnxruntime'] or '-'} | {row['device']} | {_cell(_short_default(row))} | "
                   f"{_cell(head)} | {_cell(short)} | {_cell(_short_places(row, 'inputs'))} | {_cell(_short_places(row, 'outputs'))} | "
                   f"{_link(row, 'verdict', fleet_dir, out_dir).replace('[run ', '[' + row['run']['verdict'] + ', run ')} |")
    out += ["", *openvino_claims(rows, fleet_dir, out_dir), "## Each EP device, question by question", ""]
    for row, raw in zip(rows, raw_rows, strict=True):
        out += _row_section(row, raw["run"], fleet_dir, out_dir)
    return "\n".join(out).rstrip("\n") + "\n"


def _short_places(row: dict[str, Any], which: str) -> str:
    """'RefDev (default)': each memory's name and memory type, from its label."""
    short = [p["memory"].split(" (")[0] + (f" ({p['memory'].rsplit(', ', 1)[-1].rstrip(')')})" if "(" in p["memory"] else "")
             for p in row["session"][which]]
    return ", ".join(short) or "not measured"


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())
