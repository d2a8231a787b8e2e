"""Load and validate the YAML specs.

YAML is read with PyYAML's safe loader, keeping the position of every key and value so that
each error, and each contract and EP entry, knows its `path:line`. Documents are validated
against the JSON Schemas shipped in `conformance/schemas/` (Draft 2020-12), then checked for
what a schema cannot say: duplicate ids, references to unknown checks or contracts.

Errors are data (`SpecError`) before they are text; `load_catalogue` collects all of them and
raises one `SpecErrors`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, cast

from conformance import apis, data, safe_io
from conformance.catalogue import versions
from conformance.catalogue.contracts import (
    Catalogue,
    CheckSignature,
    Contested,
    Contract,
    EpSpec,
    KnownIssue,
    Location,
    MemoryDeclaration,
    Provenance,
    Source,
    Verification,
    Waiver,
)
from conformance.data import shipped_spec_dirs

if TYPE_CHECKING:
    import jsonschema
    import yaml

JsonPath = tuple[Any, ...]
MAX_MESSAGE = 300  # characters of an error's message


@dataclass(frozen=True)
class SpecError:
    path: str
    line: int
    column: int
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}:{self.column}"
        return f"{where}: {self.message}" if not self.key else f"{where}: {self.key}: {self.message}"


class SpecErrors(Exception):
    def __init__(self, errors: list[SpecError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


# --- YAML with positions -------------------------------------------------------------------


@dataclass
class Document:
    """A parsed YAML file and the position of every node in it, by JSON path."""

    path: str
    data: Any
    value_marks: dict[JsonPath, tuple[int, int]]
    key_marks: dict[JsonPath, tuple[int, int]]

    def location(self, json_path: JsonPath, *, key: bool = False) -> Location:
        marks = self.key_marks if key and json_path in self.key_marks else self.value_marks
        probe = tuple(json_path)
        while probe not in marks and probe:
            probe = probe[:-1]
        line, column = marks.get(probe, (1, 1))
        return Location(self.path, line, column)

    def error(self, json_path: JsonPath, message: str, *, key: bool = False) -> SpecError:
        where = self.location(json_path, key=key)
        if len(message) > MAX_MESSAGE:  # one that quotes a huge value: its start says enough
            message = message[:MAX_MESSAGE - 1] + "…"
        return SpecError(where.path, where.line, where.column, _dotted(json_path), message)

    def keyed_location(self, json_path: JsonPath, *, key: bool = False) -> Location:
        """Where the value (or, with `key`, the key) at `json_path` is written, carrying that
        path (for errors found later)."""
        return dataclasses.replace(self.location(json_path, key=key), key=_dotted(json_path))


def _dotted(json_path: JsonPath) -> str:
    parts = []
    for part in json_path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(("." if parts else "") + str(part))
    return "".join(parts)


def _compose(loader_class, text: str):
    """The document's node (None when empty) and its data."""
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()


# What a spec file read from a user may hold. The shipped specs are a few kilobytes each and
# nest under ten levels; these limits are far beyond any real spec and keep a hostile one (a
# FIFO, /dev/zero, a 400-byte "billion laughs", `[[[...]]]` a million deep) to a clear error
# in milliseconds: past them PyYAML's C composer would recurse without bound, and the walk
# of the nodes and the schema validation would expand every alias.
MAX_SPEC_BYTES = 1 << 20
MAX_DEPTH = 64  # collections within collections, aliases followed
MAX_NODES = 100_000  # values of the document once its aliases are expanded


def read_spec(path: Path, display: str) -> tuple[str | None, SpecError | None]:
    """The text of the spec file `path` (shown as `display`), or the error that says why it is
    not one: not a regular file (refused before it is opened for a blocking read), larger than
    MAX_SPEC_BYTES, unreadable, or not UTF-8."""
    try:
        raw = safe_io.read_regular(path, MAX_SPEC_BYTES, what="spec file")
    except safe_io.UnsafeFile as exc:
        return None, SpecError(display, 1, 1, "", exc.message)
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, SpecError(display, 1, 1, "", f"not a YAML file: not UTF-8 text (byte {exc.start})")


def parse_yaml(text: str, path: str, *, bounded: bool = True) -> tuple[Document | None, list[SpecError]]:
    """The document in `text` with the position of every node, or the errors that say why there
    is none, each at its `path:line:column`; never an exception, whatever the text. `bounded`:
    refuse a document nested deeper than MAX_DEPTH or whose aliases expand past MAX_NODES
    before composing it (False for the kit's own specs, read at every run)."""
    # Imported here: a worker handed the catalogue by the pytest process reads no YAML.
    import yaml

    if bounded:
        refused = _beyond_bounds(text, path)
        if refused is not None:
            return None, [refused]
    try:
        # libyaml's parser when PyYAML has it (same nodes and line marks, about 5 times faster:
        # the catalogue is parsed at the start of every run, in pytest and in each worker) ...
        built = _built(getattr(yaml, "CSafeLoader", yaml.SafeLoader), text, path)
        if built is not None:
            return built
    except (yaml.YAMLError, *_CONSTRUCTION_ERRORS):
        pass  # ... and PyYAML's own parser to word a problem
    try:
        node, data = _compose(yaml.SafeLoader, text)
        if node is None:
            return None, [SpecError(path, 1, 1, "", "the file is empty")]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        return None, [SpecError(path, line, column, "", f"not valid YAML: {exc.problem}")]
    except yaml.YAMLError as exc:
        return None, [_unmarked(path, exc)]
    except _CONSTRUCTION_ERRORS as exc:
        # A value PyYAML parses but cannot build, such as the date `2024-02-30`; it says not where.
        return None, [SpecError(path, 1, 1, "", f"not valid YAML: a value cannot be read: {exc}")]
    document = Document(path, data, {}, {})
    errors: list[SpecError] = []
    _record_marks(node, (), document, errors)
    return document, errors


_STR, _MAP, _SEQ, _MERGE = (f"tag:yaml.org,2002:{name}" for name in ("str", "map", "seq", "merge"))


def _built(loader_class, text: str, path: str) -> tuple[Document, list[SpecError]] | None:
    """The document in `text` with its marks, built in one walk of its nodes (None when it is
    empty); raises what the loader raises for a text that is not valid YAML."""
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        document = Document(path, None, {}, {})
        errors: list[SpecError] = []
        document.data = _value(node, (), document, errors, loader)
        return document, errors
    finally:
        loader.dispose()


def _value(node: yaml.Node, json_path: JsonPath, doc: Document, errors: list[SpecError], loader) -> Any:
    """The value of `node`, its marks (and those of everything in it) recorded in `doc`, a
    duplicate key an error: what PyYAML's constructor and then _record_marks would give, in one
    walk instead of two (a spec file is strings, mappings and lists; this took a third less
    time for a 2000-contract file). Any other node (a number, a date, a merge key `<<`, a
    tagged collection) is built by PyYAML's constructor and its marks recorded by _record_marks."""
    doc.value_marks[json_path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    kind = node.id  # type: ignore[attr-defined]  # every node PyYAML makes has an id; the stubs' Node lacks it
    if kind == "scalar" and node.tag == _STR:
        return node.value
    if kind == "mapping" and node.tag == _MAP and not any(key.tag == _MERGE for key, _ in node.value):
        data: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = key_node.value if key_node.tag == _STR and key_node.id == "scalar" else loader.construct_object(key_node, deep=True)
            child = (*json_path, key)
            doc.key_marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if key in data:  # raises TypeError for an unhashable key, as PyYAML's constructor does its error
                errors.append(doc.error(child, f"duplicate key '{key}'", key=True))
            data[key] = _value(value_node, child, doc, errors, loader)
        return data
    if kind == "sequence" and node.tag == _SEQ:
        return [_value(item, (*json_path, index), doc, errors, loader) for index, item in enumerate(node.value)]
    value = loader.construct_object(node, deep=True)
    _record_marks(node, json_path, doc, errors)
    return value


# What PyYAML's safe constructors raise besides YAMLError for a value they cannot build: a
# ValueError for the date `2024-02-30`, an AttributeError for `!!timestamp x`, others for other
# tags. Whatever the bytes, a spec file is an error to show, never a traceback.
_CONSTRUCTION_ERRORS = (Exception,)


def _unmarked(path: str, exc: Exception) -> SpecError:
    """A YAML error without a mark; the reader's (a control character) carries a position."""
    position = getattr(exc, "position", None)
    if isinstance(position, int) and isinstance(getattr(exc, "name", None), str):
        return SpecError(path, 1, 1, "", f"not valid YAML: {getattr(exc, 'reason', exc)} (character {position})")
    return SpecError(path, 1, 1, "", f"not valid YAML: {exc}")


def _beyond_bounds(text: str, path: str) -> SpecError | None:
    """The first place where `text` nests deeper than MAX_DEPTH or its aliases expand it past
    MAX_NODES, found from libyaml's event stream (its parser keeps its own stack, it does not
    recurse) before any node is composed. None when within bounds, or when the text is not
    valid YAML (parse_yaml then words that)."""
    import yaml

    def at(event, message: str) -> SpecError:
        return SpecError(path, event.start_mark.line + 1, event.start_mark.column + 1, "", message)

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    # Per open collection: its anchor, the values in it so far, and how deep it goes below itself.
    frames: list[list[Any]] = [[None, 0, 0]]
    closed: dict[str, tuple[int, int]] = {}  # anchor -> (values, depth) of what it names
    expanded = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.CollectionStartEvent):
                if len(frames) > MAX_DEPTH:
                    return at(event, f"nested more than {MAX_DEPTH} levels deep")
                frames.append([event.anchor, 1, 0])
            elif isinstance(event, yaml.CollectionEndEvent):
                anchor, values, below = frames.pop()
                if anchor is not None:
                    closed[anchor] = (values, below + 1)
                frames[-1][1] += values
                frames[-1][2] = max(frames[-1][2], below + 1)
            elif isinstance(event, yaml.ScalarEvent):
                frames[-1][1] += 1
                if event.anchor is not None:
                    closed[event.anchor] = (1, 0)
            elif isinstance(event, yaml.AliasEvent):
                if any(frame[0] == event.anchor for frame in frames):
                    return at(event, f"the alias *{event.anchor} is inside what it names (a recursive alias)")
                values, below = closed.get(event.anchor or "", (1, 0))  # an unknown anchor: the composer says so
                expanded += values
                if expanded > MAX_NODES:
                    return at(event, f"the aliases expand this document past {MAX_NODES} values (an alias bomb?)")
                if len(frames) - 1 + below > MAX_DEPTH:
                    return at(event, f"nested more than {MAX_DEPTH} levels deep once the alias *{event.anchor} is expanded")
                frames[-1][1] += values
                frames[-1][2] = max(frames[-1][2], below)
    except yaml.MarkedYAMLError as exc:
        # libyaml refuses a flow collection 1000 deep as it scans, before any event: said here,
        # as PyYAML's own parser, which words the other problems, would compose it recursively.
        if "nesting depth" in str(exc.problem) and exc.problem_mark is not None:
            mark = exc.problem_mark
            return SpecError(path, mark.line + 1, mark.column + 1, "", f"nested more than {MAX_DEPTH} levels deep")
        return None
    except yaml.YAMLError:
        return None
    finally:
        loader.dispose()
    return None


def _record_marks(node: yaml.Node, json_path: JsonPath, doc: Document, errors: list[SpecError]) -> None:
    doc.value_marks[json_path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if node.id == "mapping":  # type: ignore[attr-defined]  # every node PyYAML makes has an id; the stubs' Node lacks it
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            # The key as constructed (3, None, True ...), the way jsonschema reports it.
            key = key_node.value if key_node.tag == "tag:yaml.org,2002:str" else _constructed(key_node.value)
            child = (*json_path, key)
            doc.key_marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if key in seen:
                errors.append(doc.error(child, f"duplicate key '{key}'", key=True))
            seen.add(key)
            _record_marks(value_node, child, doc, errors)
    elif node.id == "sequence":  # type: ignore[attr-defined]
        for index, item in enumerate(node.value):
            _record_marks(item, (*json_path, index), doc, errors)


def _constructed(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


# --- schema validation ---------------------------------------------------------------------

CONTRACTS_SCHEMA = "contracts.schema.json"
EP_SCHEMA = "ep.schema.json"
KNOWN_ISSUES_SCHEMA = "known-issues.schema.json"


def schema_text(name: str) -> str:
    return (data.schemas_dir() / name).read_text(encoding="utf-8")


def load_schema(name: str) -> dict[str, Any]:
    return json.loads(schema_text(name))


def _validators() -> dict[str, jsonschema.protocols.Validator]:
    # Imported here, when the first file is validated: a pytest run launches its workers
    # before that, so they start while this process imports jsonschema.
    import jsonschema
    import referencing

    schemas = {name: load_schema(name) for name in (CONTRACTS_SCHEMA, EP_SCHEMA, KNOWN_ISSUES_SCHEMA)}
    registry = referencing.Registry().with_resources(
        (schema["$id"], referencing.Resource.from_contents(schema)) for schema in schemas.values()
    )
    # The shipped schemas themselves are checked by the kit's tests (check_schema in
    # tests/test_spec.py), not at every load, where it took most of the validation time.
    return {name: jsonschema.Draft202012Validator(inline_local_refs(schema), registry=registry) for name, schema in schemas.items()}


LOCAL_REF = "#/$defs/"


def inline_local_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with each `{"$ref": "#/$defs/NAME"}` replaced by that definition (itself
    inlined), the same constraints: jsonschema resolves a `$ref` each time it meets one, a
    third of the time it took to validate a 2000-contract file. A definition that refers to
    itself, and a reference to another schema, stay references (the registry resolves them)."""
    definitions = schema.get("$defs", {})

    def inlined(node: Any, within: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if len(node) == 1 and isinstance(ref, str) and ref.startswith(LOCAL_REF):
                name = ref[len(LOCAL_REF):]
                if name in definitions and name not in within:
                    return inlined(definitions[name], (*within, name))
            return {key: inlined(value, within) for key, value in node.items()}
        if isinstance(node, list):
            return [inlined(item, within) for item in node]
        return node

    return cast(dict[str, Any], inlined(schema, ()))


_VALIDATORS: dict[str, jsonschema.protocols.Validator] | None = None


def validators() -> dict[str, jsonschema.protocols.Validator]:
    global _VALIDATORS
    if _VALIDATORS is None:
        _VALIDATORS = _validators()
    return _VALIDATORS


def schema_errors(doc: Document, schema_name: str) -> list[SpecError]:
    validator = validators()[schema_name]
    errors: list[SpecError] = []
    for error in sorted(validator.iter_errors(doc.data), key=lambda e: list(map(str, e.absolute_path))):
        errors.extend(_explain(doc, error))
    return _unique(errors)


def _explain(doc: Document, error: jsonschema.ValidationError) -> Iterator[SpecError]:
    json_path = tuple(error.absolute_path)
    if error.validator in ("oneOf", "anyOf") and error.context:
        # Report the branch the author evidently meant: the one whose type matched.
        meant = [e for e in error.context if e.validator != "type" or tuple(e.absolute_path) != json_path]
        if meant:
            for sub in meant:
                yield from _explain(doc, sub)
            return
    if error.validator == "additionalProperties":
        allowed = sorted(cast(Mapping[str, Any], error.schema).get("properties", {}))
        for key in cast(Iterable[Any], error.instance):
            if key in allowed:
                continue
            hint = _closest(str(key), allowed, cutoff=0.5)
            suggestion = f" (did you mean '{hint}'?)" if hint else f"; expected one of: {', '.join(allowed)}"
            yield doc.error((*json_path, key), f"unknown key '{key}'{suggestion}", key=True)
        return
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        yield doc.error(json_path, f"missing key '{missing}'")
        return
    if error.validator == "enum":
        choices = ", ".join(repr(c) for c in cast(Iterable[Any], error.validator_value))
        yield doc.error(json_path, f"{error.instance!r} is not allowed; expected one of: {choices}")
        return
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        yield doc.error(json_path, f"expected {expected}, got {type(error.instance).__name__} {error.instance!r}")
        return
    if error.validator == "pattern":
        yield doc.error(json_path, f"{error.instance!r} does not match the expected form {error.validator_value!r}")
        return
    yield doc.error(json_path, error.message)


def _unique(errors: Iterable[SpecError]) -> list[SpecError]:
    seen: set[SpecError] = set()
    unique = []
    for error in errors:
        if error not in seen:
            seen.add(error)
            unique.append(error)
    return unique


# --- building the model --------------------------------------------------------------------


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
    with _collector_paused():
        return _load_catalogue(paths, known_checks)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while the catalogue is built, as it was after. Loading
    makes millions of small objects (nodes, values, marks, contracts) and no garbage cycle: each
    collection the allocations trigger traverses all of them again, which took half the load of
    a 10 000-contract catalogue (2.4 s instead of 4.3 s on the development machine). What
    reference counting frees is freed as it goes."""
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
        if found or parse_errors:
            continue
        if schema == CONTRACTS_SCHEMA:
            for index, contract in _contracts(doc, errors, str(file)):
                contracts.append(contract)
                where[id(contract)] = (doc, ("contracts", index))
        else:
            eps.append(_ep_spec(doc))
            where[id(eps[-1])] = (doc, ("ep",))
            if file.parent in shipped_dirs:
                shipped.add(id(eps[-1]))
    eps = _override_shipped(eps, shipped, where)
    errors.extend(_cross_check(contracts, eps, where))
    errors.extend(unknown_checks(contracts, known_checks))
    if errors:
        raise SpecErrors(errors)
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


def _contracts(doc: Document, errors: list[SpecError], file: str) -> Iterator[tuple[int, Contract]]:
    family = doc.data["family"]
    for index, raw in enumerate(doc.data["contracts"]):
        if not raw["id"].startswith(family + "."):
            errors.append(doc.error(("contracts", index, "id"), f"id must start with the family name '{family}.'"))
            continue
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
            file=file,
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
    )


# Where each built contract and EP spec came from: id(object) -> its document and JSON path,
# so that a cross-check error points at the offending key or value, not at the block.
Where = dict[int, tuple[Document, JsonPath]]


def _cross_check(contracts: list[Contract], eps: list[EpSpec], where: Where) -> Iterator[SpecError]:
    def at(item: Contract | EpSpec, path: JsonPath, message: str, *, key: bool = False) -> SpecError:
        doc, base = where[id(item)]
        return doc.error((*base, *path), message, key=key)

    first_seen: dict[str, Contract] = {}
    for contract in contracts:
        needed = max((apis.since(api) for api in contract.requires_api), key=versions.parse, default="")
        if needed and not versions.at_least(contract.since, needed):
            yield at(contract, ("since",), f"since {contract.since} is older than the API it requires: "
                     f"{', '.join(a for a in contract.requires_api if not versions.at_least(contract.since, apis.since(a)))} "
                     f"(onnxruntime >= {needed})")
        if contract.id in first_seen:
            yield at(contract, ("id",), f"duplicate contract id '{contract.id}' (first defined at {first_seen[contract.id].location})")
        else:
            first_seen[contract.id] = contract
    names: dict[str, EpSpec] = {}
    for ep in eps:
        for name in {n.lower() for n in ep.names}:
            if name in names and not _same_ep_other_packaging(ep, names[name], name):
                yield at(ep, _name_path(ep, name), f"EP name or alias '{name}' is already declared at {names[name].location}")
            names[name] = ep
        referenced: list[tuple[JsonPath, bool, str]] = [(("not_applicable", cid), True, cid) for cid in ep.not_applicable]
        referenced += [(("waivers", i, "contract"), False, w.contract) for i, w in enumerate(ep.waivers)]
        referenced += [(("known_issues", i, "contract"), False, k.contract) for i, k in enumerate(ep.known_issues) if not k.contract.startswith("copy:")]
        for path, is_key, contract_id in referenced:
            if first_seen and contract_id not in first_seen:
                hint = _closest(contract_id, sorted(first_seen))
                suggestion = f" (did you mean '{hint}'?)" if hint else ""
                yield at(ep, path, f"unknown contract '{contract_id}'{suggestion}", key=is_key)


def unknown_checks(contracts: Iterable[Contract], known_checks: Iterable[str] | Mapping[str, CheckSignature]) -> list[SpecError]:
    """A contract naming a check that is not registered, or whose `params` do not fit the
    check's parameters: a key the check does not take, or a parameter without a default that
    the YAML does not give (none are checked without a registry; parameters only where
    `known_checks` maps ids to signatures). Needs only the contracts: a worker handed a
    catalogue loaded without its registry checks this against its own (the pytest process
    never imports the checks)."""
    signatures = known_checks if isinstance(known_checks, Mapping) else {}
    known = set(known_checks)
    errors = []
    for contract in contracts:
        if known and contract.check not in known:
            hint = _closest(contract.check, sorted(known))
            suggestion = f" (did you mean '{hint}'?)" if hint else ""
            errors.append(_at(contract.check_location or contract.location, f"unknown check '{contract.check}'{suggestion}"))
        elif contract.check in signatures:
            errors.extend(_params_mismatch(contract, signatures[contract.check]))
    return errors


def _params_mismatch(contract: Contract, signature: CheckSignature) -> Iterator[SpecError]:
    """The contract's `params` against its check's parameters: one error per key the check
    does not take (at the key, with the closest parameter it does take), and one for the
    required parameters missing (at `check:`), less those a misspelt key was suggested for."""
    taken = ", ".join(signature.params) or "none"
    suggested = set()
    for name in contract.params:
        if name not in signature.params:
            hint = _closest(name, [p for p in signature.params if p not in contract.params and p not in suggested])
            suggested.add(hint)
            suggestion = f" (did you mean '{hint}'?)" if hint else ""
            where = contract.param_locations.get(name) or contract.location
            yield _at(where, f"check '{contract.check}' takes no parameter '{name}'{suggestion}; it takes: {taken}")
    missing = [p for p in signature.params if p in signature.required and p not in contract.params and p not in suggested]
    if missing:
        where = contract.check_location or contract.location
        yield _at(where, f"check '{contract.check}' needs {', '.join(repr(m) for m in missing)} in the contract's params; it takes: {taken}")


def _at(where: Location, message: str) -> SpecError:
    return SpecError(where.path, where.line, where.column, where.key, message)


def _closest(word: str, choices: list[str], cutoff: float = 0.6) -> str | None:
    """The choice `word` was most likely meant to be, if any is close. difflib is imported only
    here, for a spec with an error: a worker's start does without it."""
    import difflib

    hint = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return hint[0] if hint else None


def _name_path(ep: EpSpec, name: str) -> JsonPath:
    """Where an EP's name or alias `name` (lower case) is written."""
    if ep.name.lower() == name:
        return ("name",)
    if ep.provider.lower() == name:
        return ("provider",)
    return ("aliases", [a.lower() for a in ep.aliases].index(name))


def _same_ep_other_packaging(ep: EpSpec, other: EpSpec, name: str) -> bool:
    """One provider name may be declared twice when one spec is the EP built into an
    onnxruntime build and the other its plugin package (OpenVINO ships as both): their memory
    models differ, so each gets its own spec, told apart by the spec name."""
    return name == ep.provider.lower() == other.provider.lower() and (ep.plugin_module is None) != (other.plugin_module is None)
