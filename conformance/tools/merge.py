"""Shards merged into one run: `ort-conformance merge DIR... -o DIR`.

Each DIR is the report folder of one shard (`pytest --conformance-shard=K/N`), typically one job
of a CI matrix. The merge refuses anything but the N shards of one run, saying why: every folder a
shard's, finished and not interrupted; one count N and every index 1..N once; the same catalogue
(spec digest), kit, onnxruntime (version, package, build) and EP build (provider, library sha256,
options, devices); the same strict mode; no case in two shards, and every case of the catalogue
in one. It then writes one report set (report.json/md/html, summary.md, junit.xml, the journal,
repro/) built as a single run's is, from the shards' journals: the same results in catalogue
order, the verdict a single full run gives, the copy matrix of shard 1.

A shard's folder comes from elsewhere (a CI artifact), so each of its files is read as
hostile: a regular file under the size cap, JSON or JUnit XML that parses and has the shape
the merge reads, else one MergeError naming the file. A merge that fails writes no report
set: everything is read and checked before anything is written, and the report set is
written last, whole or not at all.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance import safe_io
from conformance.errors import KitError
from conformance.facts import EpFacts
from conformance.outcomes import Result
from conformance.plugin.selection import Selection, case_key
from conformance.report import junit_schema
from conformance.report.schema import parse_json
from conformance.run import journal, runfolder
from conformance.tools.bundle import MAX_MEMBER_BYTES, BundleError, require_report_shape


class MergeError(KitError):
    """The folders given are not the shards of one run, or the merge cannot be written: why."""


@dataclass
class ShardRun:
    folder: Path
    contents: journal.Contents
    report: dict[str, Any]
    junit: bytes | None

    @property
    def shard(self) -> dict[str, Any]:
        return self.contents.run["shard"]

    @property
    def name(self) -> str:
        return f"{self.folder} ({self.shard['text']})"


def load(folder: Path) -> ShardRun:
    """A shard's report folder: its journal (the results, as the run decided them), its
    report.json (the kit's version) and its junit.xml; MergeError when it is not one."""
    try:
        contents = journal.read(folder)
        report = parse_json(safe_io.read_regular(folder / "report.json", MAX_MEMBER_BYTES, what="report"))
        require_report_shape(folder / "report.json", report)
        junit = safe_io.read_in(folder, "junit.xml", MAX_MEMBER_BYTES, what="JUnit file")
    except (journal.JournalError, BundleError) as exc:
        raise MergeError(str(exc)) from None
    except safe_io.UnsafeFile as exc:
        raise MergeError(f"{exc.path}: {exc.message}") from None
    except ValueError as exc:
        raise MergeError(f"{folder / 'report.json'}: not JSON: {exc}") from None
    if not contents.run.get("shard"):
        raise MergeError(f"{folder}: not a shard: its run was not started with --conformance-shard K/N")
    if contents.finished is None or contents.finished.get("interrupted"):
        raise MergeError(f"{folder}: {contents.run['shard']['text']} did not finish (interrupted or killed): run it again")
    if junit is not None:
        _require_junit(folder / "junit.xml", junit)
    return ShardRun(folder, contents, report, junit)


def _require_junit(path: Path, data: bytes) -> None:
    """MergeError naming `path` unless `data` is a JUnit file of the shape a run writes (the
    merge adds up its suites' counts): a truncated or altered file is refused here, before
    anything is merged or written."""
    try:
        root = ET.fromstring(data)
        problems = junit_schema.check(root, conformance=False)
    except ET.ParseError as exc:
        raise MergeError(f"{path}: not a JUnit file (not XML: {exc}); take the shard's folder from its run again") from None
    except RecursionError:
        raise MergeError(f"{path}: not a JUnit file of a conformance run: nested too deep to read") from None
    if problems:
        raise MergeError(f"{path}: not a JUnit file of a conformance run: {problems[0]}")


def _build_of(run: ShardRun) -> list[tuple]:
    """What makes two shards runs of one EP build: each EP's provider, library hash, options and devices."""
    return [(facts.provider, facts.library_sha256, sorted(facts.options.items()), [device.label for device in facts.devices])
            for facts in run.contents.eps]


def _differ(shards: list[ShardRun], what: str, value) -> list[str]:
    values = [value(run) for run in shards]
    if all(v == values[0] for v in values):
        return []
    listed = "; ".join(f"{run.name}: {v}" for run, v in zip(shards, values, strict=True))
    return [f"shards of different {what}: {listed}"]


def refusals(shards: list[ShardRun]) -> list[str]:
    """Why `shards` are not the N shards of one run (none when they are)."""
    reasons = _differ(shards, "shard counts", lambda r: f"of {r.shard['count']}")
    reasons += _differ(shards, "catalogues (spec digest)", lambda r: r.contents.digest[:16])
    reasons += _differ(shards, "kit versions", lambda r: r.report.get("kit_version"))
    reasons += _differ(shards, "onnxruntime builds", lambda r: " ".join(str(r.report["onnxruntime"].get(k)) for k in ("package", "version", "build")))
    reasons += _differ(shards, "EP builds (provider, library sha256, options, devices)", _build_of)
    reasons += _differ(shards, "modes (strict or not)", lambda r: "strict" if r.contents.run.get("strict") else "not strict")
    if reasons:
        return reasons
    count = shards[0].shard["count"]
    seen: dict[int, ShardRun] = {}
    for run in shards:
        if run.shard["index"] in seen:
            reasons.append(f"{run.shard['text']} given twice: {seen[run.shard['index']].folder} and {run.folder}")
        seen[run.shard["index"]] = run
    missing = [str(index) for index in range(1, count + 1) if index not in seen]
    if missing:
        reasons.append(f"shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} of {count} missing: every shard of the run is needed")
    owner: dict[tuple, ShardRun] = {}
    for run in shards:
        for result in run.contents.results:
            key = case_key(result.ep, result.contract, result.device, result.params)
            if key in owner and owner[key] is not run:
                reasons.append(f"{result.nodeid or result.contract} has a result in {owner[key].name} and in {run.name}")
                break
            owner[key] = run
    return reasons


def catalogue_of(shards: list[ShardRun]):
    """The catalogue the shards ran: their spec files read again (where the shards ran on other
    machines, the shipped specs stand for the shipped folders they named); MergeError when what
    can be read here is not what they ran (its digest)."""
    from conformance.catalogue.spec import SpecErrors, load_catalogue
    from conformance.data import shipped_spec_dirs

    named = [Path(p) for p in shards[0].contents.run.get("specs", [])]
    paths = list(dict.fromkeys([*(str(p) for p in shipped_spec_dirs()), *(str(p) for p in named if p.exists())]))
    try:
        catalogue = load_catalogue(paths)
    except SpecErrors as exc:
        raise MergeError(f"the shards' spec files cannot be read here:\n{exc}") from None
    wanted = shards[0].contents.digest
    if wanted and catalogue.digest != wanted:
        raise MergeError(f"the catalogue the shards ran (spec digest {wanted[:12]}) is not the one here ({catalogue.digest[:12]}): "
                         "merge where the same kit and spec files are")
    return catalogue


def _expected(catalogue, eps: list[EpFacts]) -> list[tuple]:
    """Every case of the catalogue on the run's EP devices, in catalogue order."""
    return [case_key(facts.provider, contract.id, device.label, params) for contract in catalogue.contracts
            for facts in eps for device in facts.devices for params in contract.cases()]


def merge(shards: list[ShardRun], catalogue, command: str) -> tuple[dict[str, Any], dict[str, bytes], list[Result]]:
    """(report.json's data, the other files of the set, the results) of the run the shards make."""
    from conformance import report

    first = min(shards, key=lambda run: run.shard["index"])
    expected = _expected(catalogue, first.contents.eps)
    order = {key: index for index, key in enumerate(expected)}
    results = [result for run in shards for result in run.contents.results]
    keys = [case_key(r.ep, r.contract, r.device, r.params) for r in results]
    missing = [key for key in expected if key not in set(keys)]
    if missing:
        ep, contract, device, params = missing[0]
        raise MergeError(f"{len(missing)} case{'s' if len(missing) != 1 else ''} of the catalogue have no result in any shard "
                         f"(first: {contract} on {device} {dict(params)}): the shards did not run the whole catalogue")
    results = [result for _, result in sorted(zip(keys, results, strict=True), key=lambda pair: order.get(pair[0], len(order)))]
    run = {**first.contents.run, "shard": None, "command": command, "started": min(r.contents.run["started"] for r in shards)}
    ended = max(r.contents.finished["finished"] for r in shards if r.contents.finished)
    contents = journal.Contents(run=run, eps=first.contents.eps, digest=first.contents.digest, collected=sum(r.contents.collected for r in shards),
                                results=results, capabilities=first.contents.capabilities,
                                finished={"verdict": "", "interrupted": False, "finished": ended})
    record = dataclasses.replace(journal.record(contents, catalogue), selection=Selection(len(expected), len(results)).to_dict(), shard=None)
    data = report.build(record)
    assert contents.finished is not None
    contents.finished["verdict"] = data["verdict"]
    files: dict[str, bytes] = {journal.NAME: journal.text(contents).encode("utf-8")}
    junit = merged_junit([run.junit for run in sorted(shards, key=lambda r: r.shard["index"]) if run.junit])
    if junit:
        files["junit.xml"] = junit
    return data, files, results


def merged_junit(documents: list[bytes]) -> bytes | None:
    """The shards' JUnit files as one: the first's suite, with every other's test cases appended
    and its counts (tests, failures, errors, skipped) and time the sums."""
    if not documents:
        return None
    roots = [ET.fromstring(document) for document in documents]
    suites = [root if root.tag == "testsuite" else root.find("testsuite") for root in roots]
    target = suites[0]
    if target is None:
        return documents[0]
    for suite in suites[1:]:
        if suite is not None:
            target.extend(suite.findall("testcase"))
    for name in ("tests", "failures", "errors", "skipped"):
        total = sum(int(suite.get(name, "0")) for suite in suites if suite is not None)  # load() checked each is a count
        target.set(name, str(total))
        if roots[0].tag == "testsuites" and roots[0].get(name) is not None:
            roots[0].set(name, str(total))
    target.set("time", f"{sum(junit_schema.seconds_of(suite.get('time', '0')) for suite in suites if suite is not None):.3f}")
    return ET.tostring(roots[0], encoding="utf-8", xml_declaration=True)


def _models(shards: list[ShardRun]) -> dict[str, bytes]:
    """The models the shards' runs used (each named by its content: the same name is the same
    model in every shard), for OUT/models as a run leaves them for its bundle."""
    models: dict[str, bytes] = {}
    for run in shards:
        # Those the shard's journal lists as its own (an older kit's journal lists none: every model there).
        listed = (run.contents.finished or {}).get("files")
        own = [run.folder / name for name in listed if name.startswith("models/")] if isinstance(listed, list) else None
        for path in sorted((run.folder / "models").glob("*.onnx")) if own is None else own:
            if path.name not in models and (data := safe_io.read_in(path.parent, path.name, MAX_MEMBER_BYTES, what="model")) is not None:
                models[path.name] = data
    return models


def write(data: dict[str, Any], files: dict[str, bytes], out: Path, shards: list[ShardRun]) -> list[Path]:
    """The merged set into `out` (not one of the shards' folders), held as a run holds its folder.
    The shards' models are read first, then the models and reproducers written, and the report
    set last (safe_io.write_set: whole or not at all): a merge that fails at any step leaves
    no report set of its own in `out`, and the one there before, if any, as it was."""
    from conformance import report
    from conformance.report import repro_files

    if any(out.resolve() == run.folder.resolve() for run in shards):
        raise MergeError(f"-o {out}: is one of the shards' folders; write the merged run elsewhere")
    try:
        models = _models(shards)
    except safe_io.UnsafeFile as exc:
        raise MergeError(f"{exc.path}: {exc.message}") from None
    try:
        out.mkdir(parents=True, exist_ok=True)
        lock = runfolder.claim(out)
    except (OSError, runfolder.FolderRefused) as exc:
        raise MergeError(f"-o {out}: {exc}") from None
    try:
        written = safe_io.write_set(out / "models", models) if models else []
        written += repro_files.write(data, out)
        return report.write_all(data, out, files) + written
    except safe_io.UnsafeFile as exc:
        raise MergeError(f"the merged report was not written: {exc}") from None
    finally:
        lock.close()
