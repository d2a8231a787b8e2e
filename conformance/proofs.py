"""What a check can prove, declared: each item of a pass's evidence (`Details.evidence`) as a
typed key, `Proof`, with its name on the wire, the Python types its value may take and what it
means; the evidence itself as `Proven`, a mapping read by key (`proven.get(GROWTH)` is the
declared type or None).

A check proves through its context (`CheckContext.prove(ADDRESS_KEPT, True)`), which checks the
value against the key when it is written: a wrong type is the kit's defect and raises
`ProofTypeError`. `Proven.to_wire` is report.json's `evidence`, the journal's and the worker
reply's, key for key as before; `Proven.from_wire` reads it back from this kit's files and from
older or hostile ones, dropping what it does not know and what is not of the declared type,
never raising. The one structured item readers compute with, the memory curves of the
endurance checks, is a record (`GrowthCurve`) with its own writer and reader, as in
conformance.facts.

A leaf: the checks write these keys, the runner, the reports and the tools read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Iterator, Mapping, TypeVar

from conformance.errors import KitError

V = TypeVar("V")


class ProofTypeError(KitError):
    """A check proved a value of a type its key does not declare, or named no declared key."""


@dataclass(frozen=True)
class GrowthCurve:
    """One gauge a check sampled over its calls (conformance.checks.endurance_growth): the
    samples (`values` after `calls`), the slope judged (bytes per call, the median slope between
    every two samples) and that per 1,000 calls, the threshold, the one-off step discounted,
    and whether it grows. report/curve.py draws it; JUnit carries its figures."""

    calls: tuple[float, ...]
    values: tuple[float, ...]
    slope_per_call: float
    gauge: str = "memory"
    unit: str = "bytes"
    per: str = "call"
    per_1000_calls: float | None = None
    threshold_per_call: float = 0
    step_discounted: float = 0
    grows: bool = False

    def to_wire(self) -> dict[str, Any]:
        wire = {"gauge": self.gauge, "unit": self.unit, "per": self.per, "calls": list(self.calls), "values": list(self.values),
                "slope_per_call": self.slope_per_call, "per_1000_calls": self.per_1000_calls, "threshold_per_call": self.threshold_per_call,
                "step_discounted": self.step_discounted, "grows": self.grows}
        return wire if self.per_1000_calls is not None else {k: v for k, v in wire.items() if k != "per_1000_calls"}

    @classmethod
    def from_wire(cls, wire: Any) -> GrowthCurve | None:
        """None for what is no curve: not an object, samples that are not two lists of numbers
        of one length, a slope that is no number. A figure missing takes its default."""
        if not isinstance(wire, dict):
            return None
        calls, values, slope = wire.get("calls"), wire.get("values"), wire.get("slope_per_call")
        if not (isinstance(calls, list) and isinstance(values, list) and len(calls) == len(values)
                and all(_number(x) for x in calls + values) and _number(slope)):
            return None
        per_1000 = wire.get("per_1000_calls")
        return cls(tuple(calls), tuple(values), _figure(slope), _text(wire.get("gauge"), "memory"), _text(wire.get("unit"), "bytes"),
                   _text(wire.get("per"), "call"), per_1000 if _number(per_1000) else None, _figure(wire.get("threshold_per_call")),
                   _figure(wire.get("step_discounted")), wire.get("grows") is True)


class Proof(Generic[V]):
    """One thing a check can prove: `name`, its key in report.json's evidence; `types`, the
    Python types its value may take (bool is not taken for int; an int is taken for float; a
    record type such as GrowthCurve is written and read by its to_wire and from_wire); `items`,
    for evidence built item by item (`Evidence.prove_item`: an object of named items), the types
    each item may take; `meaning`, what the value says, in one line."""

    def __init__(self, name: str, types: type[V] | tuple[type, ...], meaning: str, items: tuple[type, ...] = ()):
        self.name, self.meaning, self.items = name, meaning, items
        self.types: tuple[type, ...] = types if isinstance(types, tuple) else (types,)

    def __repr__(self) -> str:
        return f"Proof({self.name!r})"

    def holds(self, value: Any) -> bool:
        """Whether `value` is of the declared type (and, for an object of items, each item is)."""
        if not _of(value, self.types):
            return False
        return not self.items or not isinstance(value, dict) or all(isinstance(k, str) and _of(v, self.items) for k, v in value.items())

    def holds_item(self, value: Any) -> bool:
        """Whether `value` may be one item of this evidence (Evidence.prove_item)."""
        return bool(self.items) and _of(value, self.items)

    def wrong_type(self, value: Any) -> str:
        """What is wrong with proving `value` under this key, in words."""
        kinds = " or ".join(kind.__name__ for kind in self.types) + (f" of {' or '.join(kind.__name__ for kind in self.items)}" if self.items else "")
        return f"evidence {self.name!r} takes {kinds}, not {type(value).__name__}: {value!r:.80}"

    def to_wire(self, value: V) -> Any:
        if isinstance(value, dict) and any(_is_record(t) for t in self.items):
            return {name: _item_wire(item) for name, item in value.items()}
        return _item_wire(value)

    def from_wire(self, wire: Any) -> V | None:
        """The value `wire` holds, or None where it is not of the declared type. Of an object of
        items, the items that are not of theirs are dropped."""
        if self.items and isinstance(wire, dict) and dict in self.types:
            items = {str(name): read for name, item in wire.items() if (read := _read(item, self.items)) is not None}
            return items  # type: ignore[return-value]  # V is a dict of items here: `holds` says so
        return _read(wire, self.types)


def _of(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    return isinstance(value, types)


def _is_record(kind: type) -> bool:
    return hasattr(kind, "from_wire")


def _item_wire(value: Any) -> Any:
    return value.to_wire() if hasattr(value, "to_wire") else value


def _read(wire: Any, types: tuple[type, ...]) -> Any:
    for kind in types:
        if _is_record(kind):
            if (record := kind.from_wire(wire)) is not None:  # type: ignore[attr-defined]  # _is_record: it has one
                return record
        elif _of(wire, (kind,)):
            return wire
    return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _figure(value: Any) -> float:
    return value if _number(value) else 0


def _text(value: Any, default: str) -> str:
    return value if isinstance(value, str) else default


class Proven:
    """What a check proved: each value under its declared key, in the order proved. No method
    changes it; it is equal to another where their wire is."""

    def __init__(self, entries: Mapping[Proof[Any], Any] | None = None):
        """`entries`: values by their key, each checked: ProofTypeError for a key that is not
        the one declared under its name, or a value of the wrong type."""
        self._values: dict[str, Any] = {}
        for key, value in (entries or {}).items():
            if not declared(key).holds(value):
                raise ProofTypeError(key.wrong_type(value))
            self._values[key.name] = value

    def get(self, key: Proof[V]) -> V | None:
        value: V | None = self._values.get(key.name)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, Proof) and key.name in self._values

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[Proof[Any]]:
        return (DECLARED[name] for name in self._values)

    def items(self) -> Iterator[tuple[Proof[Any], Any]]:
        return ((DECLARED[name], value) for name, value in self._values.items())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Proven) and self.to_wire() == other.to_wire()

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __repr__(self) -> str:
        return f"Proven({self.to_wire()!r})"

    def plus(self, key: Proof[V], value: V) -> Proven:
        """This evidence with `key` proved (replaced where it was)."""
        return Proven({**dict(self.items()), key: value})

    def to_wire(self) -> dict[str, Any]:
        return {name: DECLARED[name].to_wire(value) for name, value in self._values.items()}

    @classmethod
    def from_wire(cls, wire: Any) -> Proven:
        """What `wire` proves that this kit declares, each of its declared type; the rest (an
        older kit's names, a hostile file's values) is dropped."""
        if isinstance(wire, Proven):
            return wire
        if not isinstance(wire, dict):
            return cls()
        # Each value read by its key's from_wire is of its declared type: not checked again.
        proven = cls.__new__(cls)
        proven._values = {name: value for name, item in wire.items() if (key := DECLARED.get(name)) is not None
                          if (value := key.from_wire(item)) is not None}
        return proven


def declared(key: object) -> Proof[Any]:
    """`key`, where it is the key declared under its name: a bare name, or a key made elsewhere
    with a declared name, is ProofTypeError."""
    if not isinstance(key, Proof) or DECLARED.get(key.name) is not key:
        raise ProofTypeError(f"evidence is proved under a key of conformance.proofs, not {key!r}")
    return key


# --- the declared evidence, by name on the wire --------------------------------------------------
# One key per name; a value whose shape differs between checks says so in its type (`memory`: a
# label, or labels by role).

ADDRESS_KEPT = Proof("address_kept", bool, "the output stayed at the address it was bound or updated at")
ADVERTISED: Proof[str] = Proof("advertised", str, "the memory info the C API advertises for the EP device, as a label")
ALIASES_THE_ARRAY = Proof("aliases_the_array", bool, "the OrtValue made over a numpy array shares the array's buffer")
ALLOCATED_BYTES = Proof("allocated_bytes", int, "tensor_size_in_bytes() of the value allocated")
ALLOCATION_SECONDS: Proof[dict[str, float]] = Proof("allocation_seconds", dict, "how long each large block took to allocate, by block",
                                                    items=(float,))
ALLOCATIONS = Proof("allocations", list, "the addresses of the allocations made from a memory info, in hex")
ALLOCATOR = Proof("allocator", dict, "the allocator read (its memory and the version of its interface)")
ALLOCATOR_STATS: Proof[dict[str, Any] | str] = Proof("allocator_stats", (dict, str),
                                                     "the allocator's statistics before and after the loop, or why it reports none")
BAD_BINDING = Proof("bad_binding", str, "what onnxruntime made of a bad binding: refused (and why) or accepted")
BOUND = Proof("bound", str, "where the input and the output were bound")
BYTES_COMPARED = Proof("bytes_compared", int, "bytes compared with what they had to be, over every comparison of the check")
BYTES_NOT_CHECKED = Proof("bytes_not_checked", str, "why the loop could not check the bytes it copied")
CALLS = Proof("calls", dict, "the loop's calls: made, the bounded count, what one is, under which load")
CALLS_FROM_ANOTHER_THREAD = Proof("calls_from_another_thread", dict, "each call made from a thread other than the registering one, and how it went")
CANARIES_CHECKED: Proof[dict[str, int]] = Proof("canaries_checked", dict, "the guard bytes checked around each host buffer, by buffer", items=(int,))
CANARIES_INTACT = Proof("canaries_intact", bool, "no copy wrote past its host buffer")
CHAINS: Proof[dict[str, dict[str, Any]]] = Proof("chains", dict, "each chain of large copies: bytes compared and what was checked", items=(dict,))
CHECKPOINTS = Proof("checkpoints", int, "the calls of the loop whose results were checked")
COMPARED: Proof[dict[str, str]] = Proof("compared", dict, "what of the EP device was compared with the spec, by item", items=(str,))
COMPLETE_BEFORE_SYNCHRONIZE = Proof("complete_before_synchronize", bool, "the outputs were complete before synchronize_outputs() was called")
CONFIRMING_ROUNDS = Proof("confirming_rounds", int, "rounds of the count added to confirm a growth")
COPIES: Proof[dict[str, dict[str, Any]]] = Proof("copies", dict, "the figures of each kind of copy made, by kind", items=(dict,))
COPIES_ASKED = Proof("copies_asked", int, "the copies onnxruntime asked of the EP during runs on imported memory")
COPIES_ON_STREAM = Proof("copies_on_stream", int, "copies queued on the EP's stream")
CPU_WRITTEN_BYTES = Proof("cpu_written_bytes", int, "bytes the CPU wrote into and read back from allocations")
DECLARED_PLACEMENT = Proof("declared", str, "the memory the EP declared for its kernels' inputs (device type, vendor, id)")
DESCRIBED = Proof("described", dict, "what was asked of a value: shape, element type, size")
DEVICE_GUARDS = Proof("device_guards", str, "the guard bytes laid around device blocks, or why none were")
DEVICE_NAME = Proof("device_name", str, "OrtValue.device_name() of a value in the memory")
DEVICE_OFFSET_VIEWS = Proof("device_offset_views", dict, "whether a tensor at an offset into a DEFAULT block is those bytes, as a child process found")
DIRECTION = Proof("direction", str, "the direction copied (source>destination)")
EP_CONTEXT_NODES = Proof("ep_context_nodes", int, "EPContext nodes in the compiled model")
EP_DEVICES_LISTED = Proof("ep_devices_listed", list, "how many EP devices each listing gave")
FD_AFTER_IMPORT = Proof("fd_after_import", str, "who owned a file descriptor after it was imported")
GAUGES_DROPPED = Proof("gauges_dropped", dict, "the gauges that could not be read, and why")
GROWTH: Proof[dict[str, GrowthCurve]] = Proof("growth", dict, "each memory gauge's curve over the loop's calls, by gauge", items=(GrowthCurve,))
GUARD_BYTES_EACH_SIDE = Proof("guard_bytes_each_side", int, "guard bytes laid on each side of a tensor")
HOST_BUFFERS_GUARDED = Proof("host_buffers_guarded", int, "host buffers the kit handed out between guard bytes, none written past (the runner's)")
HOST_DESTINATION_TOUCHED_SECONDS = Proof("host_destination_touched_seconds", float, "how long writing the host destination took")
IMPORTED = Proof("imported", str, "the handle type imported")
IMPORTER = Proof("importer", str, "what the EP gave for an external resource importer")
KERNEL_INPUTS_RECORDED = Proof("kernel_inputs_recorded", int, "kernel inputs the EP recorded")
LARGEST_BYTES = Proof("largest_bytes", int, "the largest tensor copied, in bytes")
LISTED_AND_RUNS = Proof("listed_and_runs", dict, "the package that lists the provider, and the provider that ran")
MEMORY: Proof[str | dict[str, str]] = Proof("memory", (str, dict), "the memories the values were in: a label, or labels by role", items=(str,))
MEMORY_FIGURES = Proof("memory_figures", str, "the memory a large copy needed and what the device had")
MEMORY_INFO = Proof("memory_info", dict, "the memory info's name, allocator type and memory type")
MODEL_SUBSTITUTED = Proof("model_substituted", dict, "the model asked for, the one run instead, and why")
NAMES = Proof("names", str, "what the refusal's message named")
NODES_ELSEWHERE = Proof("nodes_elsewhere", list, "the nodes onnxruntime placed on other EPs")
NODES_ON_EP = Proof("nodes_on_ep", list, "the nodes onnxruntime placed on the EP")
NUMPY_ALIASES = Proof("numpy_aliases", bool, "a numpy view of the value shares its buffer")
OUTPUT = Proof("output", dict, "the output's shape and dtype")
OUTPUT_REPORTS = Proof("output_reports", dict, "what the bound output reports of itself: shape, element type, bytes")
OVERLAPPING_CALLS = Proof("overlapping_calls", int, "calls of different threads that overlapped in time")
OVERLAPPING_RUNS = Proof("overlapping_runs", int, "runs of different threads that overlapped in time")
PATH = Proof("path", str, "how the outputs were read")
PLACEMENT_SHOWN_BY = Proof("placement_shown_by", str, "what showed where the inputs were")
PROVIDERS = Proof("providers", list, "the session's providers")
QUERIES = Proof("queries", list, "the queries of the EP device that were answered")
QUEUED_AT_RETURN = Proof("queued_at_return", bool, "the copy was still queued when the call returned")
REFUSED: Proof[str | dict[str, str]] = Proof("refused", (str, dict), "what onnxruntime or the EP said refusing, or that by direction", items=(str,))
REFUSED_ON_4KIB = Proof("refused_on_4KiB", dict, "the directions refused already on 4 KiB, and what was said")
RELEASE = Proof("release", str, "whether the import's release function was set")
RELEASED = Proof("released", str, "the order the importer and the handle were released in")
ROUNDS = Proof("rounds", int, "rounds of the check made")
RULE = Proof("rule", str, "the rule of a contested contract that judged the case")
RUNS: Proof[int | dict[str, Any]] = Proof("runs", (int, dict), "the runs made: a count, or their figures")
RUNS_ON_EP = Proof("runs_on_ep", int, "session runs with nodes on the EP")
SECONDS = Proof("seconds", float, "how long the loop took")
SELF_COPY = Proof("self_copy", str, "what a copy onto itself did to the bytes")
SESSION = Proof("session", dict, "the session made: intra-op threads and the shape")
SESSION_MEMORY: Proof[dict[str, str]] = Proof("session_memory", dict, "the memory the session's inputs and outputs said they were in", items=(str,))
SESSION_PROVIDERS = Proof("session_providers", list, "the providers of each session made")
SESSIONS = Proof("sessions", dict, "the sessions made at once: count, threads, shape, creation rounds")
SKIPPED = Proof("skipped", dict, "the calls skipped, and why")
SKIPPED_DIRECTIONS = Proof("skipped_directions", dict, "the copy directions skipped, and why")
STAGING_CANARIES_INTACT = Proof("staging_canaries_intact", bool, "no copy wrote past its staging buffer")
STATS = Proof("stats", str, "the statistics the allocator reported")
STEPS_DONE = Proof("steps_done", int, "the steps of the lifecycle done")
STREAM_CREATED = Proof("stream_created", bool, "create_sync_stream() gave a stream")
STRINGS_COMPARED = Proof("strings_compared", int, "strings compared with what they had to be")
TAKEN = Proof("taken", list, "the nodes the EP took")
TENSOR = Proof("tensor", dict, "the tensor copied: dtype, elements, bytes")
TENSOR_BYTES = Proof("tensor_bytes", int, "the bytes of each tensor")
TENSOR_SIZE_IN_BYTES: Proof[dict[str, int]] = Proof("tensor_size_in_bytes", dict, "tensor_size_in_bytes() reported, by tensor or against what was expected",
                                                    items=(int,))
THREADS: Proof[int | dict[str, Any]] = Proof("threads", (int, dict), "the threads used: a count, or which thread did what")
TIMED = Proof("timed", dict, "the bytes updated and how long each way took")
UNREGISTER = Proof("unregister", str, "what unregistering the library did while imports were alive")
USABLE_AFTER_REFUSAL: Proof[bool | dict[str, int]] = Proof("usable_after_refusal", (bool, dict), "the session or values stayed usable after a refusal")
VALID_TWIN = Proof("valid_twin", str, "what became of the valid request beside the bad one")

DECLARED: dict[str, Proof[Any]] = {key.name: key for key in list(globals().values()) if isinstance(key, Proof)}
