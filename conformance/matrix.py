"""The copy-capability matrix as typed data: what `conformance.probe()` returns.

An application author asks it one question, "can I copy from this memory to that one on this
device?", with `supports(source, destination)`, instead of trying copies at start-up. The
matrix reads from and writes to the JSON that `ort-conformance probe --json` prints (schema
`conformance/schemas/probe.schema.json`, version `SCHEMA`).

A leaf module: it imports nothing of the kit but the leaf of its errors, so that importing it (and `conformance.probe`)
loads neither pytest, onnx, jsonschema nor onnxruntime.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from conformance.errors import KitError, NotMeasured

SCHEMA = "ort-ep-conformance/probe/1"

# The statuses of a pair, as conformance.engine.capabilities decides them (its docstring says each).
Status = Literal["supported", "unverified", "broken", "required_but_missing", "not_required", "unsupported"]
STATUSES: tuple[str, ...] = ("supported", "unverified", "broken", "required_but_missing", "not_required", "unsupported")

# GB/s per size class ("4 KiB", "1 MiB", ...); None where the probe's time budget ran out.
Figures = dict[str, "float | None"]


# The memories every matrix may name; another EP device's DEFAULT memory is named
# `Provider:Vendor:DeviceId` by the matrix that holds it (Device.memories).
MEMORIES = ("cpu", "default", "host_accessible")


class UnknownMemory(KitError, ValueError):
    """A name given to `supports` that is no memory: one clear message naming the memories."""


def require_memories(names: tuple[str, ...], known: set[str]) -> None:
    """UnknownMemory for the first of `names` that is neither one of MEMORIES nor in `known`."""
    for name in names:
        if name not in MEMORIES and name not in known:
            listed = ", ".join([*MEMORIES, *sorted(known - set(MEMORIES))])
            raise UnknownMemory(f"{name!r} is not a memory; the memories are: {listed}")


@dataclass(frozen=True)
class Pair:
    """One copy direction of one device: its status, whether the contract requires it, what
    the probe saw (`detail`, in the kit's words) and its GB/s per method (`figures`:
    "copy_tensors" and "update_inplace", each by size class; empty with --no-throughput)."""

    source: str
    destination: str
    status: Status
    required: bool
    detail: str
    figures: dict[str, Figures] = field(default_factory=dict)
    refusal: str | None = None  # onnxruntime's own words, where `detail` explains a refusal in the kit's

    @property
    def supported(self) -> bool:
        return self.status == "supported"

    def to_dict(self) -> dict[str, Any]:
        out = {"source": self.source, "destination": self.destination, "status": self.status, "required": self.required, "detail": self.detail}
        if self.refusal is not None:
            out["refusal"] = self.refusal
        if self.figures:
            out["throughput"] = self.figures
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pair:
        return cls(data["source"], data["destination"], data["status"], bool(data["required"]), data["detail"], dict(data.get("throughput") or {}),
                   data.get("refusal"))


@dataclass(frozen=True)
class Device:
    """The matrix of one EP device. `error` says why it has no pairs (its probe was lost);
    `memories` are the facts of each memory named in the pairs (None for plain CPU memory)."""

    ep: str
    label: str
    pairs: tuple[Pair, ...] = ()
    memories: dict[str, Any] = field(default_factory=dict)
    host_memcpy: Figures = field(default_factory=dict)
    imports: dict[str, Any] | None = None
    error: str | None = None

    def pair(self, source: str, destination: str) -> Pair | None:
        return next((p for p in self.pairs if (p.source, p.destination) == (source, destination)), None)

    def supports(self, source: str, destination: str) -> bool:
        """Whether a copy from `source` to `destination` moved the bytes intact here; False for
        a direction the matrix does not have (a memory this device lacks). UnknownMemory for a
        name that is no memory (see MEMORIES): a typo is an error, not a "no"."""
        require_memories((source, destination), self.memory_names())
        found = self.pair(source, destination)
        return found is not None and found.supported

    def memory_names(self) -> set[str]:
        """The memories this device's matrix names: its pairs' ends and its memories' facts."""
        return {*self.memories, *(p.source for p in self.pairs), *(p.destination for p in self.pairs)}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ep": self.ep, "device": self.label}
        if self.error is not None:
            return {**out, "error": self.error, "pairs": [p.to_dict() for p in self.pairs]}
        return {**out, "memories": self.memories, "pairs": [p.to_dict() for p in self.pairs], "host_memcpy": self.host_memcpy,
                "imports": self.imports}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Device:
        return cls(data["ep"], data["device"], tuple(Pair.from_dict(p) for p in data.get("pairs", ())), dict(data.get("memories") or {}),
                   dict(data.get("host_memcpy") or {}), data.get("imports"), data.get("error"))


@dataclass(frozen=True)
class Ep:
    """One EP probed: its provider name, the kit's label for it, the onnxruntime version, whether
    get_ep_devices() lists it (`ep_device`; when not, its one device stands for sessions made
    with providers=[...] and only CPU memory was there to probe) and why it is unusable, if so."""

    name: str
    label: str
    onnxruntime: str
    ep_device: bool
    devices: tuple[Device, ...]
    unusable: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ep": self.name, "label": self.label, "onnxruntime": self.onnxruntime, "ep_device": self.ep_device, "unusable": self.unusable,
                "devices": [d.to_dict() for d in self.devices]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ep:
        return cls(data["ep"], data["label"], data["onnxruntime"], bool(data["ep_device"]), tuple(Device.from_dict(d) for d in data["devices"]),
                   data.get("unusable"))


@dataclass(frozen=True)
class CapabilityMatrix:
    """Every EP probed, each with its devices' matrices."""

    eps: tuple[Ep, ...]

    @property
    def devices(self) -> tuple[Device, ...]:
        return tuple(device for ep in self.eps for device in ep.devices)

    def supports(self, source: str, destination: str, *, ep: str | None = None, device: str | None = None) -> bool:
        """Whether the copy works on every device probed (of provider or label `ep`, of label
        `device`, when given): False when one of them lacks it, and when none matches.
        NotMeasured when none that was probed says False and a chosen EP is one that
        get_ep_devices() does not list, asked of its DEFAULT or HOST_ACCESSIBLE memory: it was
        never asked for them, so whether it has them is not known."""
        require_memories((source, destination), {name for d in self.devices for name in d.memory_names()})
        chosen = [(e, d) for e in self.eps if ep in (None, e.name, e.label) for d in e.devices if device in (None, d.label)]
        own_memory = {source, destination} & {"default", "host_accessible"}
        unknown = [e for e, _ in chosen if own_memory and not e.ep_device]
        if not chosen or any(not d.supports(source, destination) for e, d in chosen if e not in unknown):
            return False
        if unknown:
            raise NotMeasured(f"{source} -> {destination} on {', '.join(sorted({e.name for e in unknown}))} is not known: get_ep_devices() "
                              "does not list it, so it was never asked for its memory and only plain CPU memory was probed")
        return True

    def statuses(self) -> set[str]:
        """Every status some pair has (a lost device counts as none)."""
        return {p.status for d in self.devices for p in d.pairs}

    @property
    def lost(self) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.error is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "eps": [e.to_dict() for e in self.eps]}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CapabilityMatrix:
        """From what to_dict() wrote (or a probe's JSON); KeyError on a field it needs."""
        return cls(tuple(Ep.from_dict(e) for e in data["eps"]))
