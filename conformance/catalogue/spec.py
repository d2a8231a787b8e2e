"""Loading the catalogue: the spec files found, each read with positions (yaml_marks), validated
against its schema (schema), built into the frozen `Contract`s and `EpSpec`s (contracts), a
vendor's EP spec put in place of the shipped one it names, and the whole cross-checked
(cross_checks).

Errors are data (`conformance.errors.SpecError`) before they are text; `load_catalogue` collects
all of them and raises one `SpecErrors`. Must not know: pytest, onnxruntime.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from conformance.catalogue.contracts import (
    Catalogue,
    CheckSignature,
    Contested,
    Contract,
    OPTIONAL_CLAIMS,
    EpSpec,
    ImporterDeclaration,
    KnownIssue,
    Location,
    MemoryDeclaration,
    Provenance,
    Source,
    Verification,
    Waiver,
)
from conformance.catalogue.cross_checks import Where, cross_check, unknown_checks, unknown_contracts
from conformance.catalogue.schema import CONTRACTS_SCHEMA, EP_SCHEMA, KNOWN_ISSUES_SCHEMA, schema_errors
from conformance.catalogue.yaml_marks import Document, parse_yaml, read_spec
from conformance.data import shipped_spec_dirs
from conformance.errors import SpecError, SpecErrors, unique


def spec_files(paths: Iterable[str | Path]) -> list[Path]:
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml")))
        else:
            files.append(path)
    return files


def load_catalogue(paths: Iterable[str | Path] | None = None, *,
                   known_checks: Iterable[str] | Mapping[str, CheckSignature] = ()) -> Catalogue:
    """Load, validate and cross-check spec files; raise `SpecErrors` with every error found.
    `known_checks`: the check ids, or the registry (ids to signatures, see `unknown_checks`)."""
    # The collector off while the catalogue is built: loading makes millions of small objects
    # (nodes, values, marks, contracts) and no garbage cycle, and each collection the
    # allocations trigger traversed all of them again, which took half the load of a
    # 10 000-contract catalogue (2.4 s instead of 4.3 s on the development machine).
    with collector_paused():
        return _load_catalogue(paths, known_checks)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off within, as it was after: for work that makes many
    objects and no garbage cycle to speak of, which reference counting frees as it goes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _load_catalogue(paths: Iterable[str | Path] | None, known_checks: Iterable[str] | Mapping[str, CheckSignature]) -> Catalogue:
    # A shipped file named again (e.g. on the command line) is read once.
    files = list(dict.fromkeys(_resolved(f) for f in spec_files(shipped_spec_dirs() if paths is None else paths)))
    shipped_dirs = {folder.resolve(): folder.name for folder in shipped_spec_dirs()}  # resolved once, for every file
    errors: list[SpecError] = []
    contracts: list[Contract] = []
    eps: list[EpSpec] = []
    where: Where = {}
    ep_documents: list[Document] = []  # every EP declaration read, valid or not
    flagged: set[tuple[str, str]] = set()  # (file, key) of every schema error
    shipped: set[int] = set()  # id() of the EP specs that ship with the kit
    digest = hashlib.sha256()
    for file in files:
        display = _display_path(file, shipped_dirs)
        text, unreadable = read_spec(file, display)
        if text is None:
            errors += [unreadable] if unreadable else []
            continue
        digest.update(file.name.encode() + b"\0" + text.encode() + b"\0")
        # The kit's own specs are trusted to be within the bounds; checking costs a third of a parse.
        doc, parse_errors = parse_yaml(text, display, bounded=file.parent not in shipped_dirs)
        errors.extend(parse_errors)
        if doc is None:
            continue
        if not isinstance(doc.data, dict) or not ({"contracts", "ep"} & set(doc.data)):
            errors.append(doc.error((), "expected a contract file (top-level key 'contracts') or an EP declaration (top-level key 'ep')"))
            continue
        schema = CONTRACTS_SCHEMA if "contracts" in doc.data else EP_SCHEMA
        found = schema_errors(doc, schema)
        errors.extend(found)
        flagged |= {(e.path, e.key) for e in found}
        # A file with schema errors is still read for what the later checks need (contract ids,
        # checks, parameters, the contracts an EP refers to): validation names every error of
        # every file in one pass, not in rounds. Its catalogue is never returned.
        lenient = bool(found or parse_errors)
        if schema == CONTRACTS_SCHEMA:
            for index, contract in _contracts(doc, errors, str(file), lenient=lenient):
                contracts.append(contract)
                where[id(contract)] = (doc, ("contracts", index))
        else:
            ep_documents.append(doc)
            if lenient:
                continue
            eps.append(_ep_spec(doc))
            where[id(eps[-1])] = (doc, ("ep",))
            if file.parent in shipped_dirs:
                shipped.add(id(eps[-1]))
    eps = _override_shipped(eps, shipped, where)
    errors.extend(cross_check(contracts, eps, where))
    errors.extend(unknown_contracts(ep_documents, {c.id for c in contracts if c.id}))
    # A parameter the schema already refused is not named again by its check.
    errors.extend(e for e in unknown_checks(contracts, known_checks) if (e.path, e.key) not in flagged)
    if errors:
        raise SpecErrors(sorted(unique(errors), key=lambda e: (e.path, e.line, e.column)))
    return Catalogue(tuple(contracts), tuple(eps), tuple(str(f) for f in files), digest.hexdigest())


def load_known_issues(path: str | Path) -> tuple[KnownIssue, ...]:
    """The kit's table of upstream defects (conformance/known_issues.yaml), validated against
    its schema; raise `SpecErrors` with every error at file:line:column."""
    file = Path(path)
    text, unreadable = read_spec(file, str(file))
    if text is None:
        raise SpecErrors([unreadable] if unreadable else [])
    doc, errors = parse_yaml(text, str(file))
    if doc is not None and not errors:
        errors = schema_errors(doc, KNOWN_ISSUES_SCHEMA)
    if errors:
        raise SpecErrors(errors)
    assert doc is not None, "parse_yaml gives a document or errors"
    return KnownIssue.all_from(doc.data)


def _resolved(file: Path) -> Path:
    """`file` resolved; a symlink loop (which Path.resolve raises for) as it is, made absolute,
    so that reading it says what is wrong with it."""
    try:
        return file.resolve()
    except (RuntimeError, OSError):
        return Path(os.path.abspath(file))


def _override_shipped(eps: list[EpSpec], shipped: set[int], where: Where) -> list[EpSpec]:
    """A vendor's EP spec (a file not shipped with the kit) replaces each shipped spec it
    shares a name or alias with: a vendor can give their own declaration or waivers for a
    shipped EP without editing the kit. Two vendor files declaring one name still clash, as
    does a spec of another name for a shipped provider (the cross-check reports both)."""
    vendors = [ep for ep in eps if id(ep) not in shipped]
    replaced: set[int] = set()  # id() of the shipped specs a vendor spec replaces
    overriding: dict[int, Location] = {}  # id(vendor spec) -> the (first) shipped spec it replaces
    for ep in eps:
        vendor = next((v for v in vendors if id(ep) in shipped and _same_name(v, ep)), None)
        if vendor is not None:
            replaced.add(id(ep))
            overriding.setdefault(id(vendor), ep.location)
    result = []
    for ep in eps:
        if id(ep) in replaced:
            continue
        if id(ep) in overriding:
            kept = dataclasses.replace(ep, overrides=overriding[id(ep)])
            where[id(kept)] = where[id(ep)]
            ep = kept
        result.append(ep)
    return result


def _same_name(ep: EpSpec, other: EpSpec) -> bool:
    """Whether two specs share a spec name or alias (the provider alone does not make them
    one EP: OpenVINO's built-in and plugin specs share theirs)."""
    return bool({n.lower() for n in (ep.name, *ep.aliases)} & {n.lower() for n in (other.name, *other.aliases)})


def _display_path(file: Path, shipped_dirs: dict[Path, str]) -> str:
    """Shipped specs by their place in the kit (`specs/contracts/copy.yaml`), whether installed
    or not, so that reports from different machines compare; other files relative to the
    working directory when they are under it. `file` is resolved; `shipped_dirs`: the shipped
    folders, resolved, with their names."""
    if file.parent in shipped_dirs:
        return f"specs/{shipped_dirs[file.parent]}/{file.name}"
    try:
        return str(file.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(file)


def _sources(items: list[dict[str, str]]) -> tuple[Source, ...]:
    return tuple(Source(s["kind"], s["ref"], s.get("note", ""), tuple(s.get("claims", ()))) for s in items)


def _contested(raw: dict[str, Any] | None) -> Contested | None:
    if raw is None:
        return None
    return Contested(" ".join(raw["holds"].split()), dict(raw["where"]), " ".join(raw["why"].split()),
                     tuple((" ".join(side["says"].split()), side["ref"]) for side in raw["sides"]))


def _contracts(doc: Document, errors: list[SpecError], file: str, *, lenient: bool = False) -> Iterator[tuple[int, Contract]]:
    """The contracts of a contract file. `lenient`: the file has schema errors; each contract
    is built from what it holds of the right type, for the checks that follow the schema's."""
    if lenient:
        yield from _lenient_contracts(doc, file)
        return
    family = doc.data["family"]
    for index, raw in enumerate(doc.data["contracts"]):
        if not raw["id"].startswith(family + "."):
            errors.append(doc.error(("contracts", index, "id"), f"id must start with the family name '{family}.'"))
        yield index, Contract(
            id=raw["id"],
            statement=" ".join(raw["statement"].split()),
            subject=raw["subject"],
            severity=raw["severity"],
            check=raw["check"],
            sources=_sources(raw["sources"]),
            applies_when=dict(raw.get("applies_when", {})),
            params={k: tuple(v) for k, v in raw.get("params", {}).items()},
            location=doc.location(("contracts", index)),
            check_location=doc.keyed_location(("contracts", index, "check")),
            param_locations={k: doc.keyed_location(("contracts", index, "params", k), key=True) for k in raw.get("params", {})},
            family=family,
            requires_api=tuple(raw.get("requires_api", ())),
            provenance=Provenance(raw["provenance"]["basis"], raw["provenance"]["ref"], raw["provenance"].get("note", "")),
            since=raw["since"],
            contested=_contested(raw.get("contested")),
            isolated=bool(raw.get("isolated", False)),
            own_process=bool(raw.get("own_process", False)),
            tier=raw.get("tier", "functional"),
            file=file,
        )


def _lenient_contracts(doc: Document, file: str) -> Iterator[tuple[int, Contract]]:
    """A contract file's contracts as far as their id, check and parameters can be read."""
    def text(value: Any) -> str:
        return value if isinstance(value, str) else ""

    family = text(doc.data.get("family"))
    items = doc.data.get("contracts")
    for index, raw in enumerate(items if isinstance(items, list) else []):
        if not isinstance(raw, dict):
            continue
        written = raw.get("params")
        params = {k: tuple(v) if isinstance(v, list) else (v,) for k, v in (written if isinstance(written, dict) else {}).items()
                  if isinstance(k, str)}
        yield index, Contract(
            id=text(raw.get("id")), statement=text(raw.get("statement")), subject=text(raw.get("subject")),
            severity=text(raw.get("severity")), check=text(raw.get("check")), sources=(), applies_when={}, params=params,
            location=doc.location(("contracts", index)), check_location=doc.keyed_location(("contracts", index, "check")),
            param_locations={k: doc.keyed_location(("contracts", index, "params", k), key=True) for k in params},
            family=family, file=file,
        )


def _memory(raw: dict[str, Any] | None) -> MemoryDeclaration | None:
    if raw is None:
        return None
    return MemoryDeclaration(raw["device_type"], raw.get("vendor_id"), raw.get("name"))


def _until(waiver: dict[str, Any], kind: str) -> str | None:
    """`until: "1.33"` is an onnxruntime version; `until: {ep: "2.0"}` an EP version."""
    until = waiver.get("until")
    if isinstance(until, dict):
        return until.get(kind)
    return until if kind == "onnxruntime" else None


def _ep_spec(doc: Document) -> EpSpec:
    raw = doc.data["ep"]
    waivers = tuple(
        Waiver(w["contract"], w["reason"], w["url"], _until(w, "onnxruntime"), w.get("device"), doc.location(("ep", "waivers", i)),
               until_ep=_until(w, "ep"), onnxruntime=w.get("onnxruntime"), ep_version=w.get("ep_version"))
        for i, w in enumerate(raw.get("waivers", []))
    )
    directions = raw.get("copy_directions")
    return EpSpec(
        name=raw["name"],
        aliases=tuple(raw.get("aliases", ())),
        provider=raw["provider"],
        summary=raw["summary"],
        packages=tuple(raw["packages"]),
        plugin_module=raw.get("plugin_module"),
        default_memory=_memory(raw["memory"]["default"]),
        host_accessible=_memory(raw["memory"]["host_accessible"]),
        device_type=raw.get("device_type"),
        copy_directions=None if directions is None else tuple(tuple(d.split(">")) for d in directions),
        not_applicable=dict(raw.get("not_applicable", {})),
        waivers=waivers,
        sources=_sources(raw.get("sources", [])),
        unverified=tuple(raw.get("unverified", ())),
        location=doc.location(("ep",)),
        session_inputs=tuple(raw["session_memory"]["inputs"]) if "session_memory" in raw else None,
        session_outputs=tuple(raw["session_memory"]["outputs"]) if "session_memory" in raw else None,
        verification={claim: Verification(v["verified"], v["how"]) for claim, v in raw.get("verification", {}).items()},
        known_issues=KnownIssue.all_from(raw),
        environment_setup=tuple(raw.get("environment", {}).get("setup", ())),
        environment_faults=tuple(raw.get("environment", {}).get("faults", ())),
        draft=raw.get("draft", ""),
        stated=frozenset(claim for claim in OPTIONAL_CLAIMS if claim in raw),
        importer=_importer(raw.get("importer")),
        ops={op: tuple(types) for op, types in raw.get("ops", {}).items()},
    )


def _importer(raw: dict[str, Any] | None) -> ImporterDeclaration | None:
    if raw is None:
        return None
    return ImporterDeclaration(tuple(raw["handle_types"]), raw.get("tensor_memory"))
