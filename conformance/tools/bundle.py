"""The submission bundle: one archive that proves what ran, and the verifier that checks it.

A bundle (`ort-conformance bundle`) is a gzipped tar holding `manifest.json` (vendor, EP name
and version, library sha256, onnxruntime version and build, kit version, spec digest, devices,
OS, Python, and the sha256 of every other file), report.json/.md/.html, junit.xml, the worker
logs, the results journal and the ONNX models the run used. `verify` checks that it is complete
and consistent, the way the Vulkan CTS submission verifier and the Kubernetes conformance bot
do: every required contract present on every device, nothing `not_run` without a reason, every
hash and version consistent between the manifest, the report and the JUnit file, the verdict
the one the results give, and the run finished (or its reports were rebuilt from its journal).
It checks consistency, not authorship: the bundle is not signed. The archive itself is read
by bundle_archive.read, which refuses any member that is not a regular file under a plain name.
"""

from __future__ import annotations

import calendar
import gzip
import hashlib
import io
import json
import tarfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from conformance.run import journal, runfolder

from conformance.report import junit_schema as junit, schema as report_schema

from conformance import safe_io
from conformance.testbed.eps import sha256_of
from conformance.report.junit_schema import Problem  # its path: a file of the bundle, or the bundle itself
from conformance.options import reason_of
from conformance.errors import FileError
from conformance.outcomes import Outcome, Result, counts, verdict
from conformance.rules.strict import draft_reason
from conformance.report.schema import parse_json, report_problems
from conformance.tools.bundle_archive import MAX_MEMBER_BYTES, BundleError, read  # noqa: F401  (read: the bundle's reader, named here too)

SCHEMA = "ort-ep-conformance/bundle/1"
MANIFEST = "manifest.json"
REQUIRED_FILES = ("report.json", "report.md", "report.html", "junit.xml")
NEEDS_A_REASON = (Outcome.NOT_RUN, Outcome.NOT_APPLICABLE, Outcome.WAIVED)

# The parts of manifest.json that verify() reads, with their types (report.json has its own
# published schema, report_schema.py): a manifest altered by hand is a list of problems.
_DEVICES = {"type": "array", "items": {"type": "object", "required": ["label"]}}
MANIFEST_SHAPE = {
    "type": "object",
    "properties": {"files": {"type": "object", "additionalProperties": {"type": "string"}}, "devices": _DEVICES,
                   "onnxruntime": {"type": "object"}, "ep": {"type": "object"}},
}


def shape_problems(shape: dict[str, Any], instance: Any) -> list[str]:
    """Where `instance` is not of `shape` (a JSON Schema), as 'json path: message' lines."""
    from jsonschema import Draft202012Validator  # imported here: most commands never need it

    return report_schema.problems(Draft202012Validator(shape), instance)


def require_report_shape(path: Path, report: Any) -> None:
    """BundleError naming `path` and the first problem when `report` is not a report.json this
    kit reads (report_problems)."""
    problems = report_problems(report)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BundleError(path, f"not a conformance report: {problems[0]}{more}")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _inputs(report_dir: Path, junit_file: Path) -> dict[str, bytes]:
    if not (report_dir / "report.json").is_file():
        raise BundleError(report_dir, f"no report.json: run `pytest --ep NAME --conformance-report {report_dir}` first")
    if not junit_file.is_file():
        raise BundleError(junit_file, "no JUnit file: a run of this kit writes it into its report folder "
                                      f"(`pytest --ep NAME --conformance-report {report_dir}`), or give --junit FILE")
    missing = [name for name in REQUIRED_FILES[:3] if not (report_dir / name).is_file()]
    if missing:
        raise BundleError(report_dir, f"lacks {', '.join(missing)}: rerun the conformance run with this kit")
    sources = {name: report_dir / name for name in REQUIRED_FILES[:3]}
    sources["junit.xml"] = junit_file
    # The run's own logs and models, as its journal lists them: not those of an earlier run
    # into the same folder (its logs, the models only it used).
    sources.update((name, report_dir / name.removeprefix("logs/")) if name.startswith("logs/") else (name, report_dir / name)
                   for name in _run_files(report_dir))
    sources[journal.NAME] = report_dir / journal.NAME  # whether the run ended: see unfinished
    files = {}
    for name, path in sources.items():
        # The run's own files are read without following a symlink: one planted in the report
        # folder would put whatever it points at (a key, a password file) into a bundle that
        # is sent away. Only the folder and a JUnit file named by the user may be links.
        try:
            if name.startswith(("models/", "logs/")) or name == journal.NAME:
                if (member := safe_io.read_in(path.parent, path.name, MAX_MEMBER_BYTES, what="bundle member")) is not None:  # None: gone since listed
                    files[name] = member
            else:
                files[name] = safe_io.read_regular(path, MAX_MEMBER_BYTES, what="bundle member")
        except safe_io.UnsafeFile as exc:
            raise BundleError(path, exc.message) from None
    return _intact_models(files)


def _run_files(report_dir: Path) -> list[str]:
    """The logs/ and models/ members of the run in `report_dir`: those its journal's `finished`
    line lists; for a run that did not finish (its reports rebuilt), or without a journal (a
    kit that wrote none), those runfolder.run_files finds of it."""
    try:
        listed = (journal.read(report_dir).finished or {}).get("files")
    except journal.JournalError:
        listed = None
    if isinstance(listed, list):
        return [name for name in listed if isinstance(name, str) and _is_run_file(name)]
    return runfolder.run_files(report_dir)


def _is_run_file(name: str) -> bool:
    """A logs/ or models/ member's name, of one plain file name."""
    folder, _, base = name.partition("/")
    return "/" not in base and base not in ("", ".", "..") and (
        (folder == "logs" and runfolder.is_log(base)) or (folder == "models" and base.endswith(runfolder.MODEL_SUFFIX)))


def _intact_models(files: dict[str, bytes]) -> dict[str, bytes]:
    """The files without a model whose bytes are not the model its name says (garbage or another
    model planted in the models folder): the run rebuilt its own, and a bundle holds only those."""
    from conformance.testbed.models import ModelName

    def intact(name: str, data: bytes) -> bool:
        model = ModelName.parse(name.removeprefix("models/"))
        return model is not None and model.holds(data)

    return {name: data for name, data in files.items() if not name.startswith("models/") or intact(name, data)}


def _report(files: dict[str, bytes], report_dir: Path) -> dict[str, Any]:
    """report.json's data, of the shape the manifest is made from."""
    try:
        report = parse_json(files["report.json"])
    except ValueError as exc:
        raise BundleError(report_dir / "report.json", f"not JSON: {exc}") from None
    require_report_shape(report_dir / "report.json", report)
    return report


def manifest(report: dict[str, Any], files: dict[str, bytes], vendor: str | None) -> dict[str, Any]:
    ep = report["ep"]
    return {
        "schema": SCHEMA,
        # The run's start, not the clock when the bundle was made: one report folder bundles to
        # the same bytes each time (a verifier or a vendor comparing two submissions hashes them).
        "created": report["run"].get("started"),
        "vendor": vendor,
        "ep": {"name": ep.get("name"), "version": ep.get("version"), "library": ep.get("library"), "library_sha256": ep.get("library_sha256")},
        "onnxruntime": report["onnxruntime"],
        "kit_version": report["kit_version"],
        "spec_digest": report.get("spec_digest"),
        "devices": [{"label": d["label"], "ep": d.get("ep"), "hardware": d.get("hardware"), "memory": d.get("memory")} for d in report["devices"]],
        "os": report["run"]["platform"],
        "python": report["run"]["python"],
        "verdict": report["verdict"],
        "strict": bool(report.get("strict")),
        "files": {name: sha256(data) for name, data in sorted(files.items())},
    }


def write(report_dir: Path, output: Path | None = None, *, junit_file: Path | None = None,
          vendor: str | None = None) -> tuple[Path, dict[str, Any]]:
    """Writes the bundle of the run in `report_dir` to `output` (default: conformance-LABEL.tar.gz,
    LABEL the EP's); returns where, and the manifest."""
    files = _inputs(report_dir, junit_file or report_dir / "junit.xml")
    report = _report(files, report_dir)
    if problem := unfinished(files.get(journal.NAME), report):
        raise BundleError(report_dir, f"{problem}; wait for the run to end, or `ort-conformance rebuild {report_dir}`")
    output = output or Path(f"conformance-{report['ep'].get('label') or 'ep'}.tar.gz")
    data = manifest(report, files, vendor)
    files[MANIFEST] = (json.dumps(data, indent=2) + "\n").encode()
    if output.is_dir():
        raise BundleError(output, "is a folder: give the archive's file name")
    try:
        safe_io.write_file(output.parent, output.name, archive(files, _epoch(report)))
    except safe_io.UnsafeFile as exc:
        raise BundleError(output, f"cannot be written: {exc}") from None
    return output, data


def unfinished(journal_data: bytes | None, report: dict[str, Any]) -> str:
    """Why a report set is not that of the run whose journal lies beside it ('' when it is).
    A run writes its reports, then the journal's `finished` line: a journal without one is a
    run still going or killed, and the reports beside it the previous run's (the set is
    replaced whole or not at all), unless `ort-conformance rebuild` wrote them from this
    journal (marked interrupted, of the run's start, every result of the journal in them; it
    adds no line to the journal). No journal: a folder of a kit that wrote none, ''."""
    if journal_data is None:
        return ""
    try:
        contents = journal.parse(journal_data, journal.NAME)
    except journal.JournalError as exc:
        return str(exc)
    if contents.finished is not None:
        return ""
    started = contents.run.get("started")
    rebuilt = (isinstance(started, (int, float)) and _epoch(report) == int(started) and report["run"].get("interrupted") is True
               and len(report.get("results", ())) == len(contents.results))
    if rebuilt:
        return ""
    return (f"the run did not finish: {journal.NAME} has no `finished` line (the run is still going, or was killed) "
            "and the report set is not its own")


def archive(files: dict[str, bytes], mtime: int) -> bytes:
    """The .tar.gz of `files`, the same bytes for the same files: the manifest first, then
    the rest sorted by name; every member dated `mtime`, owned by 0:0 with no owner names,
    mode 0644; the gzip header dated `mtime` too and naming no file (tarfile's "w:gz" would
    write the clock and the output's name there). Made in memory: a bundle is megabytes at most."""
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime, compresslevel=9) as compressed:
        with tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name in [MANIFEST, *sorted(n for n in files if n != MANIFEST)]:
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(files[name]), mtime, 0o644
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(files[name]))
    return raw.getvalue()


def _epoch(report: dict[str, Any]) -> int:
    """The run's start in seconds since 1970 (report.json's run.started), the date of every
    member; 0 when the report does not say."""
    try:
        return calendar.timegm(time.strptime(report["run"]["started"], "%Y-%m-%dT%H:%M:%SZ"))
    except (KeyError, TypeError, ValueError):
        return 0


# --- verify ----------------------------------------------------------------------------------


def verify(bundle: Path, files: dict[str, bytes], *, required_contracts: set[str] | None = None) -> list[Problem]:
    """What is wrong with the files of `bundle` (as `read` gives them)."""
    try:
        data = parse_json(files[MANIFEST])
    except KeyError:
        return [Problem(str(bundle), f"no {MANIFEST}")]
    except ValueError as exc:
        return [Problem(MANIFEST, f"not JSON: {exc}")]
    malformed = [Problem(MANIFEST, problem) for problem in shape_problems(MANIFEST_SHAPE, data)]
    if malformed:
        return malformed
    problems = _hashes(files, data)
    try:
        report = parse_json(files["report.json"])
    except (KeyError, ValueError) as exc:
        return problems + [Problem("report.json", f"missing or not JSON: {exc}")]
    malformed = [Problem("report.json", problem) for problem in report_problems(report)]
    if malformed:
        return problems + malformed
    if problem := unfinished(files.get(journal.NAME), report):
        problems.append(Problem(journal.NAME, problem))
    problems += _foreign(files)
    problems += _versions(data, report)
    problems += _models(files)
    problems += _results(report, required_contracts or set())
    if "junit.xml" in files:
        problems += _junit(files["junit.xml"], report)
    return problems


def _foreign(files: dict[str, bytes]) -> list[Problem]:
    """The members that are not the run's: a name no run writes, or a log or model its
    journal's `finished` line does not list (an earlier run's, in the same folder)."""
    listed: list[str] | None = None
    try:
        finished = journal.parse(files[journal.NAME], journal.NAME).finished if journal.NAME in files else None
        listed = finished.get("files") if finished else None
    except journal.JournalError:
        pass  # unfinished() says so
    known = {MANIFEST, journal.NAME, *REQUIRED_FILES}
    problems = []
    for name in sorted(set(files) - known):
        if not _is_run_file(name):
            problems.append(Problem(name, "not a file of a conformance run: a bundle holds one run's files alone"))
        elif isinstance(listed, list) and name not in listed:
            problems.append(Problem(name, f"not a file of this run: its {journal.NAME} does not list it (an earlier run's?)"))
    return problems


def check_library(files: dict[str, bytes], library: Path) -> list[Problem]:
    """Whether `library` is the EP library the run of the bundle's `files` loaded; FileError
    when it cannot be read."""
    try:
        actual = sha256_of(str(library))  # as eps.describe hashed it for the report
    except OSError as exc:
        raise FileError(library, f"cannot be read: {reason_of(exc)}") from None
    try:
        declared = parse_json(files[MANIFEST])["ep"].get("library_sha256")
    except (LookupError, ValueError, TypeError, AttributeError):
        return []  # verify() says what is wrong with the bundle or its manifest
    if declared is None:
        return [Problem(str(library), "the bundle's run loaded no EP library")]
    if declared != actual:
        return [Problem(str(library), f"sha256 {actual} is not the bundle's EP library ({declared})")]
    return []


def _hashes(files: dict[str, bytes], data: dict[str, Any]) -> list[Problem]:
    listed = data.get("files", {})
    problems = [Problem(name, "required file missing from the bundle") for name in REQUIRED_FILES if name not in files]
    for name, digest in sorted(listed.items()):
        if name not in files:
            problems.append(Problem(name, "listed in the manifest but absent from the bundle"))
        elif sha256(files[name]) != digest:
            problems.append(Problem(name, f"sha256 {sha256(files[name])} differs from the manifest's {digest}"))
    problems += [Problem(name, "in the bundle but not listed in the manifest") for name in sorted(set(files) - set(listed) - {MANIFEST})]
    if not any(name.startswith("models/") for name in files):
        problems.append(Problem(str(MANIFEST), "the bundle holds no models"))
    return problems


def _models(files: dict[str, bytes]) -> list[Problem]:
    """Each bundled model against its name and, where this kit has the recipe it was made from,
    against that recipe (rebuilt: a few milliseconds a model)."""
    from conformance.testbed import models

    recipes = models.load_recipes()
    found = ((name, models.recipe_mismatch(name.removeprefix("models/"), data, recipes)) for name, data in sorted(files.items()) if name.startswith("models/"))
    return [Problem(name, why) for name, why in found if why]


def _versions(data: dict[str, Any], report: dict[str, Any]) -> list[Problem]:
    pairs = {
        "kit_version": (data.get("kit_version"), report.get("kit_version")),
        "spec_digest": (data.get("spec_digest"), report.get("spec_digest")),
        "onnxruntime version": ((data.get("onnxruntime") or {}).get("version"), report["onnxruntime"].get("version")),
        "onnxruntime build": ((data.get("onnxruntime") or {}).get("build"), report["onnxruntime"].get("build")),
        "EP name": ((data.get("ep") or {}).get("name"), report["ep"].get("name")),
        "EP version": ((data.get("ep") or {}).get("version"), report["ep"].get("version")),
        "EP library sha256": ((data.get("ep") or {}).get("library_sha256"), report["ep"].get("library_sha256")),
        "verdict": (data.get("verdict"), report.get("verdict")),
        "devices": (sorted(d["label"] for d in data.get("devices", [])), sorted(d["label"] for d in report["devices"])),
    }
    problems = [Problem(MANIFEST, f"{what}: manifest says {ours!r}, report.json says {theirs!r}") for what, (ours, theirs) in pairs.items() if ours != theirs]
    if report["ep"].get("library") and not report["ep"].get("library_sha256"):
        problems.append(Problem("report.json", "the EP library has no sha256"))
    return problems


def _results(report: dict[str, Any], required_contracts: set[str]) -> list[Problem]:
    try:
        results = [Result.from_dict(r) for r in report["results"]]
    except (TypeError, ValueError, KeyError) as exc:
        return [Problem("report.json", f"a result is malformed: {exc}")]
    problems = []
    if (report.get("shard") or {}).get("text"):
        problems.append(Problem("report.json", f"{report['shard']['text']} of a run: a shard alone is no submission; "
                                               "`ort-conformance merge` every shard's report folder and bundle the merged one"))
    required = required_contracts | {cid for cid, c in report.get("contracts", {}).items() if c.get("severity") == "required"}
    present = {(r.ep, r.device, r.contract) for r in results}
    for device in report["devices"]:
        for contract in sorted(required):
            if (device.get("ep"), device["label"], contract) not in present:
                problems.append(Problem("report.json", f"required contract {contract} has no result on {device.get('ep')} {device['label']}"))
    problems += [Problem("report.json", f"{r.nodeid or r.contract}: {r.outcome.value} without a reason")
                 for r in results if r.outcome in NEEDS_A_REASON and not r.message.strip()]
    if report["summary"] != counts(results):
        problems.append(Problem("report.json", f"summary {report['summary']} does not count the results {counts(results)}"))
    collected = report.get("run", {}).get("collected")
    if collected is not None and collected != len(results):
        problems.append(Problem("report.json", f"{collected} checks were collected but {len(results)} results are listed"))
    run = report.get("run", {})
    selection = report.get("selection") or {}
    subset = selection.get("text", "") if not selection.get("complete", True) else ""
    shard = report.get("shard") or {}
    drafts = [ep["draft"] for ep in report.get("eps") or [report.get("ep") or {}] if isinstance(ep, dict) and isinstance(ep.get("draft"), dict)]
    decided, _ = verdict(results, interrupted=bool(run.get("interrupted")) or (collected or 0) > len(results), strict=bool(report.get("strict")), subset=subset,
                         shard=shard.get("text", ""), draft=draft_reason(drafts))
    if decided.value != report["verdict"]:
        problems.append(Problem("report.json", f"verdict {report['verdict']!r}, but the results give {decided.value!r}"))
    return problems


def _junit(text: bytes, report: dict[str, Any]) -> list[Problem]:
    try:
        root = ET.fromstring(text)
        problems = [Problem("junit.xml", str(p)) for p in junit.check(root)]
    except ET.ParseError as exc:
        return [Problem("junit.xml", f"not XML: {exc}")]
    except RecursionError:  # suites nested past what the checker's recursion holds: no run writes that
        return [Problem("junit.xml", "nested too deep to read")]
    # Every case, by what JUnit says of it (failure, error, skipped, passed), against what
    # report.json's result of it makes it: a <failure> planted in a not_applicable case is seen.
    cases: Counter[tuple[Any, ...]] = Counter()
    for case in root.iter("testcase"):
        values = {p.get("name"): p.get("value") for p in case.iter("property")}
        cases[(values.get("contract"), values.get("ep"), values.get("device"), values.get("outcome"), junit.case_kind(case))] += 1
    try:
        results = Counter((r["contract"], r["ep"], r["device"], r["outcome"], junit.expected_kind(Result.from_dict(r))) for r in report["results"])
    except (TypeError, ValueError, KeyError):
        return problems  # _results says which result is malformed
    for key in sorted(set(cases) | set(results), key=str):
        if cases[key] != results[key]:
            contract, ep, device, outcome, kind = key
            problems.append(Problem("junit.xml", f"{contract} on {ep} {device}, outcome {outcome} as a JUnit {kind}: "
                                                 f"{cases[key]} JUnit cases, {results[key]} results in report.json"))
    return problems
