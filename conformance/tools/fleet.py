"""The fleet table: many conformance runs gathered into one capability table.

`ort-conformance fleet REPORT_OR_BUNDLE... -o DIR` reads runs of any EPs, builds and machines
(report.json files, folders holding one, or submission bundles that verify) and writes one row per
EP device of each run: the memory kinds it advertises, each copy direction's status, its importer
and handle types, where session inputs and outputs live, whether it is stream-aware, and the run's
verdict and date. The rows
go to DIR/fleet.json (schema `conformance/schemas/fleet.schema.json`) and DIR/fleet.html (one
filterable table, each cell linking into the run's report.html). An application reads the JSON
with `conformance.fleet.load(path)` instead of probing the EP at start-up.

Every fact is read from a report; nothing here runs onnxruntime. A bundle that does not verify
is refused whole: a table that answers from an altered report would answer wrongly. A run given
twice (the same path, its folder and its report.json, or a bundle and the folder it was made
from) is one row set: runs are told apart by their report.json's bytes (`distinct`).
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from conformance import safe_io
from conformance.options import reason_of
from conformance.outcomes import Details
from conformance.proofs import COPIES_ON_STREAM, MEMORY, REFUSED, STREAM_CREATED
from conformance.report.schema import parse_json, problems as schema_problems
from conformance.tools.bundle import MAX_MEMBER_BYTES, BundleError, read, require_report_shape, verify
from conformance.testbed.eps import memory_label
from conformance.tools.fleet_reader import SCHEMA, FleetError
from conformance.version import __version__

JSON_NAME = "fleet.json"
HTML_NAME = "fleet.html"
# The contracts whose evidence says where a session's inputs and outputs live.
SESSION_CONTRACTS = ("memory-info.session-inputs", "memory-info.session-outputs", "memory-info.cpu-default-io")
STREAM_CONTRACT = "streams.sync-stream"  # whose case says whether create_sync_stream() gives a stream


@dataclass
class Run:
    """One run as given: where it came from, its report, and its report.html (a bundle's, to be
    written beside the table; None for a report read in place, whose page is linked where it is)."""

    source: Path
    kind: str  # report | bundle
    report: dict[str, Any]
    page: bytes | None = None
    digest: str = ""  # sha256 of its report.json's bytes: the same run, however it was given

    @property
    def name(self) -> str:
        """The run's name in the table: the report's folder (a lane's name), or the bundle's file name."""
        if self.kind == "bundle":
            return self.source.name.removesuffix(".gz").removesuffix(".tar").removesuffix(".tgz")
        return self.source.parent.name or "report"


def load_run(path: Path, required_contracts: Callable[[dict[str, bytes]], set[str]] | None = None) -> Run:
    """A report.json, a folder holding one, or a bundle (any other file): FleetError when it is
    none of them, or a bundle that does not verify (each of its problems named)."""
    if path.is_dir():
        path = path / "report.json"
    if path.suffix == ".json":
        try:
            data = safe_io.read_regular(path, MAX_MEMBER_BYTES, what="report")
            report = parse_json(data)
            require_report_shape(path, report)
        except safe_io.UnsafeFile as exc:
            raise FleetError(f"{path}: cannot read a report: {exc.message}") from None
        except UnicodeDecodeError:
            raise FleetError(f"{path}: not a report.json (not UTF-8 text)") from None
        except ValueError as exc:
            raise FleetError(f"{path}: not JSON: {reason_of(exc)}") from None
        except BundleError as exc:
            raise FleetError(str(exc)) from None
        return Run(path, "report", report, digest=hashlib.sha256(data).hexdigest())
    try:
        files = read(path)
    except BundleError as exc:
        raise FleetError(f"{exc}: give a report.json, a folder holding one, or a bundle that `ort-conformance verify` accepts") from None
    problems = verify(path, files, required_contracts=required_contracts(files) if required_contracts else None)
    if problems:
        listed = "; ".join(str(p) for p in problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
        raise FleetError(f"{path}: an unverified bundle is refused ({len(problems)} problem{'s' if len(problems) != 1 else ''}: {listed})")
    return Run(path, "bundle", parse_json(files["report.json"]), files.get("report.html"), hashlib.sha256(files["report.json"]).hexdigest())


def distinct(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """(the runs, each once, in the order first given; a note for each given again). A run is
    its report.json's bytes: a bundle holds those of the folder it was made from."""
    first: dict[str, Run] = {}
    notes = []
    for run in runs:
        if run.digest in first:
            notes.append(f"{run.source}: the same run as {first[run.digest].source} (the same report.json): taken once")
        else:
            first[run.digest] = run
    return list(first.values()), notes


# --- one row per EP device of a run -------------------------------------------------------------


def rows_of(run: Run, index: int, link: str) -> list[dict[str, Any]]:
    report = run.report
    matrices = {(m.get("ep"), m.get("device")): m for m in report.get("capabilities", [])}
    eps = {ep.get("name"): ep for ep in report.get("eps") or [report["ep"]]}
    facts = _run_facts(run, index, link)
    rows = []
    for device in report["devices"]:
        ep = eps.get(device.get("ep")) or report["ep"]
        name = ep.get("name") or device.get("ep") or "?"
        matrix = matrices.get((name, device["label"]))
        rows.append({
            "id": f"{facts['id']}/{ep.get('label') or name}/{device['label']}",
            "ep": name,
            "ep_label": ep.get("label") or name,
            "ep_version": ep.get("version"),
            "onnxruntime": (report.get("onnxruntime") or {}).get("version"),
            "onnxruntime_package": (report.get("onnxruntime") or {}).get("package"),
            "device": device["label"],
            "hardware": _hardware(device.get("hardware")),
            "ep_device": bool(ep.get("ep_device", device.get("hardware") is not None)),
            "library_sha256": ep.get("library_sha256"),
            "memory": _memory(device),
            "copies": _copies(matrix),
            "probe_error": (matrix or {}).get("error"),
            "importer": _importer(matrix),
            "session": _session(report["results"], name, device["label"]),
            "streams": _streams(report["results"], name, device["label"]),
            "run": facts,
        })
    return rows


def _run_facts(run: Run, index: int, link: str) -> dict[str, Any]:
    report, selection = run.report, run.report.get("selection") or {}
    return {
        "id": f"{index}-{run.name}",
        "name": run.name,
        "source": str(run.source),
        "kind": run.kind,
        "report": link,
        "verdict": report["verdict"],
        "verdict_reasons": list(report.get("verdict_reasons", []))[:5],
        "date": report["run"].get("started"),
        "complete": bool(selection.get("complete", True)),
        "strict": bool(report.get("strict")),
        "shard": report.get("shard"),
        "platform": report["run"].get("platform"),
        "kit_version": report.get("kit_version"),
        "spec_digest": report.get("spec_digest"),
    }


def _hardware(hardware: dict[str, Any] | None) -> str | None:
    if not hardware:
        return None
    return f"{hardware.get('type')} {hardware.get('vendor') or ''}".strip()


def _memory(device: dict[str, Any]) -> dict[str, Any]:
    """The memory infos the EP device advertises, each with its label; None where it advertises
    none (or, with no EP device, where none could be asked)."""
    memory = device.get("memory") or {}
    out = {}
    for kind in ("default", "host_accessible"):
        facts = memory.get(kind)
        out[kind] = None if facts is None else {**{k: facts.get(k) for k in ("name", "device_type", "vendor_id", "device_id", "device_mem_type")},
                                                "label": memory_label(facts)}
    return out


def _copies(matrix: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not matrix:
        return []
    return [{k: pair[k] for k in ("source", "destination", "status", "required", "detail")} for pair in matrix.get("pairs", [])]


def _importer(matrix: dict[str, Any] | None) -> dict[str, Any]:
    imports = (matrix or {}).get("imports")
    if not imports:
        return {"status": "unknown", "reason": "the run recorded no import probe for this device", "handle_types": [], "tensor_memory": None, "copies": []}
    return {"status": imports.get("status", "unknown"), "reason": imports.get("reason") or "", "handle_types": list(imports.get("handle_types") or []),
            "tensor_memory": imports.get("tensor_memory"), "copies": list(imports.get("copies") or [])}


def _session(results: list[dict[str, Any]], ep: str, device: str) -> dict[str, Any]:
    """Where the session's inputs and outputs lived in the cases that looked: each memory seen
    with how many cases saw it, and the contracts' outcomes. `reason`, when no case looked: the
    first message of those that could not (the EP took no node, an older API)."""
    seen: dict[str, dict[str, dict[str, Any]]] = {"inputs": {}, "outputs": {}}
    outcomes: dict[str, dict[str, int]] = {}
    reason = ""
    for result in results:
        if result["contract"] not in SESSION_CONTRACTS or result["ep"] != ep or result["device"] != device:
            continue
        tally = outcomes.setdefault(result["contract"], {})
        tally[result["outcome"]] = tally.get(result["outcome"], 0) + 1
        places = _places(result)
        if not places and not reason and result["outcome"] in ("not_run", "not_applicable"):
            reason = result["message"]
        for which, label in places:
            entry = seen[which].setdefault(label, {"memory": label, "cases": 0, "failed": 0})
            entry["cases"] += 1
            entry["failed"] += result["outcome"] != "pass"
    measured = bool(seen["inputs"] or seen["outputs"])
    return {"inputs": list(seen["inputs"].values()), "outputs": list(seen["outputs"].values()), "outcomes": outcomes,
            "reason": "" if measured else (reason or "no case of the run read a session's memory infos")}


def _streams(results: list[dict[str, Any]], ep: str, device: str) -> dict[str, Any]:
    """Whether the EP device is stream-aware, from its streams.sync-stream case: whether
    create_sync_stream() gave a stream (the case's evidence `stream_created`; a refusal that makes
    the case not_applicable is a no), None where the run could not tell; with the case's outcome,
    and its message where it did not pass."""
    result = next((r for r in results if r["contract"] == STREAM_CONTRACT and r["ep"] == ep and r["device"] == device), None)
    if result is None:
        return {"stream_aware": None, "outcome": None, "reason": f"the run has no {STREAM_CONTRACT} case for this device"}
    evidence = Details.from_wire(result.get("details")).evidence
    created = evidence.get(STREAM_CREATED)
    if created is not None:
        aware = created
    elif COPIES_ON_STREAM in evidence or REFUSED in evidence:  # a report written before the kit recorded stream_created
        aware = COPIES_ON_STREAM in evidence
    elif result["outcome"] == "not_applicable" and "not stream-aware" in result["message"]:
        aware = False
    else:
        aware = None
    return {"stream_aware": aware, "outcome": result["outcome"], "reason": "" if result["outcome"] == "pass" else result["message"]}


def _places(result: dict[str, Any]) -> set[tuple[str, str]]:
    """(inputs|outputs, memory label) of each value a result saw: its evidence ("input x": label),
    and a violation's actual memory (a failing case's value)."""
    details = Details.from_wire(result.get("details"))
    places = set()
    memory = details.evidence.get(MEMORY)
    # evidence written elsewhere may hold one label instead of a label per role: no place to read
    for item, label in (memory.items() if isinstance(memory, dict) else ()):
        if isinstance(label, str) and str(item).startswith(("input ", "output ")):
            places.add(("inputs" if str(item).startswith("input ") else "outputs", label))
    for violation in details.violations:
        roles = violation.memory if isinstance(violation.memory, dict) else {}
        which = "inputs" if "input" in roles else "outputs" if "output" in roles else None
        if which and isinstance(violation.actual, str):
            places.add((which, violation.actual))
    return places


# --- the table ----------------------------------------------------------------------------------


def build(runs: list[Run], out_dir: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(fleet.json's data, the bundles' report pages to write beside it by name). A report read in
    place is linked where it is, relative to `out_dir`: its report.html, else its report.json."""
    rows, pages = [], {}
    for index, run in enumerate(runs, start=1):
        if run.page is not None:
            link = f"{index}-{run.name}.report.html"
            pages[link] = run.page
        else:
            page = run.source.parent / "report.html"
            link = os.path.relpath(page if page.is_file() else run.source, out_dir.resolve() if out_dir.exists() else out_dir.absolute())
        rows += rows_of(run, index, Path(link).as_posix())
    data = {"schema": SCHEMA, "kit_version": __version__, "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "runs": len(runs), "rows": rows}
    return data, pages


def fleet_problems(data: Any) -> list[str]:
    """Where `data` is not a fleet.json of schema/fleet.schema.json, as 'json path: message' lines."""
    import json

    from jsonschema import Draft202012Validator  # imported here: the reader never needs it

    from conformance.data import schemas_dir

    schema = json.loads((schemas_dir() / "fleet.schema.json").read_text(encoding="utf-8"))
    return schema_problems(Draft202012Validator(schema), data)


def write(data: dict[str, Any], pages: dict[str, bytes], out_dir: Path) -> list[Path]:
    """fleet.json, fleet.html and the bundles' pages, as one set (safe_io.write_set)."""
    import json

    from conformance.tools.fleet_page import render

    problems = fleet_problems(data)
    if problems:  # the kit's own table not of its published schema: a defect of the kit, said as such
        raise FleetError(f"the table made does not follow fleet.schema.json: {problems[0]}")
    files: dict[str, bytes | str] = {JSON_NAME: json.dumps(data, indent=1) + "\n", HTML_NAME: render(data), **pages}
    try:
        return safe_io.write_set(out_dir, files)
    except safe_io.UnsafeFile as exc:
        raise FleetError(f"the table was not written: {exc}") from None
