"""YAML with positions: a spec file's text read within bounds, parsed into a `Document` that keeps
the `line:column` of every key and value by JSON path, and every problem as a `SpecError` at its
place, never an exception, whatever the bytes.

PyYAML's safe loader (libyaml's where PyYAML has it) reads the text. Must not know: the schemas,
contracts, onnxruntime.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conformance import safe_io
from conformance.catalogue.contracts import Location
from conformance.errors import KitError, SpecError

if TYPE_CHECKING:
    import yaml

JsonPath = tuple[Any, ...]
MAX_MESSAGE = 300  # characters of an error's message


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

    fast = getattr(yaml, "CSafeLoader", None)
    # The bounds' pass over the event stream costs as much as a third of a parse. It comes first
    # where aliases may be (a `*` anywhere in the text) or where PyYAML's own composer, which
    # recurses, would compose. Elsewhere a document cannot expand, libyaml's composer refuses
    # nesting past 1000 levels, and _value refuses a collection nested past MAX_DEPTH as it
    # builds it: the pass then only words the refusal.
    early = bounded and (fast is None or "*" in text)
    if early:
        refused = _beyond_bounds(text, path)
        if refused is not None:
            return None, [refused]
    try:
        # libyaml's parser when PyYAML has it (same nodes and line marks, about 5 times faster:
        # the catalogue is parsed at the start of every run, in pytest and in each worker) ...
        built = _built(fast or yaml.SafeLoader, text, path)
        if built is not None:
            return built
    except (yaml.YAMLError, *_CONSTRUCTION_ERRORS):
        # ... and PyYAML's own parser to word a problem; it recurses, so the bounds come first.
        refused = _beyond_bounds(text, path) if bounded and not early else None
        if refused is not None:
            return None, [refused]
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
    empty); raises what the loader raises for a text that is not valid YAML, and _TooDeep."""
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


class _TooDeep(KitError):
    """A collection nested deeper than MAX_DEPTH, met while building the document."""


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
    if kind != "scalar" and len(json_path) + _collections_in(node) > MAX_DEPTH:
        raise _TooDeep()
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


def _collections_in(node: yaml.Node) -> int:
    """How many collections deep `node` goes, itself included: 1 for a plain mapping or list,
    whose own collections _value counts as it reaches them; for a tagged collection or a
    mapping with a merge key, built by PyYAML's constructor, its whole depth (a walk without
    recursion, each node once)."""
    if node.tag in (_MAP, _SEQ) and not (node.id == "mapping" and any(key.tag == _MERGE for key, _ in node.value)):  # type: ignore[attr-defined]
        return 1
    deepest, seen, stack = 0, set(), [(node, 1)]
    while stack:
        current, level = stack.pop()
        if id(current) in seen or current.id == "scalar":  # type: ignore[attr-defined]
            continue
        seen.add(id(current))
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            break
        children = current.value if current.id == "sequence" else [part for pair in current.value for part in pair]  # type: ignore[attr-defined]
        stack.extend((child, level + 1) for child in children)
    return deepest


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
