"""An EP's spec drafted from what the EP showed: `draft` turns what a worker observed (the EP's
facts, the copy matrix of its first device, the sessions of the kit's models) into the spec
document, with what breaks a contract beside the claim it concerns; `render` writes it as YAML.

A claim of the draft is a fact init observed, never a wish: a copy direction is claimed where the
bytes moved, a memory kind of session values where a session had one there. A fact that breaks a
contract is stated as it is (or left out where the spec has no words for it) and said beside the
claim, on the terminal and in a YAML comment (`Breach`); nothing the draft says exempts the EP
from a contract (no `not_applicable`, no waiver), so the run with the draft fails that contract.
Pure functions of plain data: the worker that observes is conformance.tools.init's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from conformance.catalogue import selectors
from conformance.catalogue.contracts import CLAIMS, OPTIONAL_CLAIMS, Catalogue
from conformance.errors import KitError
from conformance.facts import DeviceFacts, EpFacts, MemoryFacts, OnnxruntimeFacts
from conformance.testbed.eps import memory_label

HOW = "observed by init; confirm"
DEVICE_TYPES = ("cpu", "gpu", "npu", "fpga")
KINDS = ("cpu", "default", "host_accessible")
# The contract each copy direction of the spec's vocabulary is held to, and when it applies:
# DEFAULT memory that is not CPU memory, or HOST_ACCESSIBLE memory advertised.
DIRECTION_CONTRACTS = {
    "cpu>default": ("copy.required-directions", "default"), "default>cpu": ("copy.required-directions", "default"),
    "default>default": ("copy.device-to-device", "default"),
    "cpu>host_accessible": ("copy.host-accessible-directions", "host_accessible"),
    "host_accessible>cpu": ("copy.host-accessible-directions", "host_accessible"),
    "default>host_accessible": ("copy.host-accessible-directions", "host_accessible"),
    "host_accessible>default": ("copy.host-accessible-directions", "host_accessible"),
}
WORKS = ("supported", "not_required")


class Unobservable(KitError):
    """What the spec must state could not be observed; the message says what and where to look."""


@dataclass(frozen=True)
class Observed:
    """What init saw: the worker's facts (eps.describe), the copy matrix of the EP's first device
    (engine.capabilities, its `imports` included), the sessions of the kit's models on it
    (engine.observe), when (an ISO date) and the command that saw it."""

    facts: EpFacts
    matrix: dict[str, Any]
    sessions: dict[str, Any]
    date: str
    command: str


@dataclass(frozen=True)
class Breach:
    """An observed fact that breaks a contract: the claim it sits beside, the contract, its severity, what was seen."""

    claim: str
    contract: str
    severity: str
    seen: str

    def __str__(self) -> str:
        return f"{self.seen}: a run fails {self.contract} ({self.severity})"


@dataclass
class Draft:
    """The spec document (`data`), what breaks a contract (`breaches`) and, per top-level key
    of `ep`, what a reader should know beside it (`notes`)."""

    data: dict[str, Any]
    breaches: list[Breach] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)  # claims init could not observe, and why

    def note(self, key: str, text: str) -> None:
        self.notes.setdefault(key, []).append(text)

    def leave_out(self, key: str, text: str) -> None:
        self.note(key, text)
        self.left_out.append(text)


def draft(seen: Observed, catalogue: Catalogue) -> Draft:
    facts, device = seen.facts, seen.facts.devices[0]
    out = Draft({})
    severity = {contract.id: contract.severity for contract in catalogue.contracts}

    def breach(claim: str, contract: str, text: str) -> None:
        out.breaches.append(Breach(claim, contract, severity.get(contract, "required"), text))

    ep: dict[str, Any] = {"draft": f"written by ort-conformance init on {seen.date} from what the EP showed; read each claim and the "
                                   "comments beside it, confirm it in `verification`, then delete this line"}
    ep.update(_names(facts, device, catalogue))
    ep.update(_packages(facts))
    out.note("packages", _packages_note(facts))
    hardware = device.hardware.type if device.hardware else None
    if device.hardware and hardware in DEVICE_TYPES:
        ep["device_type"] = hardware
        out.note("device_type", f"the type of the hardware device the EP device is attached to ({device.hardware.vendor or 'no vendor named'})")
    else:
        out.leave_out("memory", f"no hardware device type known to the spec format ({hardware or 'none listed'}): device_type left out")
    for kind in ("default", "host_accessible"):
        advertised = device.memory(kind)
        if advertised is not None and advertised.device_type not in DEVICE_TYPES:
            # onnxruntime's Python API names a memory's device type only through a value allocated
            # from it (eps.memory_device_type): a type the draft cannot state, and will not guess.
            raise Unobservable(f"the EP device's {kind.upper()} memory {advertised.name!r} could not be allocated from, so its "
                               "device type is not known; `pytest --ep ... -k memory-info.allocatable` shows why")
    ep["memory"] = {kind: _memory(device.memory(kind)) for kind in ("default", "host_accessible")}
    out.note("memory", "as the EP device advertises them (memory_info(DEFAULT) and (HOST_ACCESSIBLE); null: none, plain CPU memory)"
             + "".join(f"; {kind} vendor_id 0x{m['vendor_id']:04X}" for kind, m in ep["memory"].items() if m))
    _other_devices(out, facts, breach)
    _session_memory(out, ep, seen, catalogue, breach)
    ep["copy_directions"] = _copy_directions(seen.matrix, device, breach)
    out.note("copy_directions", "the directions copy_tensors moved bytes in intact (the copy probe, as `ort-conformance probe` tries them)")
    _importer(out, ep, seen.matrix.get("imports"), breach)
    _ops(out, ep, seen.sessions, facts.provider, breach)
    stated = [claim for claim in (*CLAIMS, *OPTIONAL_CLAIMS) if _states(ep, claim)]
    ep["sources"] = [_source(seen, stated)]
    ep["verification"] = {claim: {"verified": False, "how": HOW} for claim in stated}
    out.data = {"ep": ep}
    return out


def _names(facts: EpFacts, device: DeviceFacts, catalogue: Catalogue | None = None) -> dict[str, Any]:
    provider = facts.provider
    stripped = re.sub(r"(ExecutionProvider|_EP)$", "", provider) or provider
    name = re.sub(r"[^a-z0-9-]+", "-", str(facts.label or stripped).lower()).strip("-")
    name = re.sub(r"^[^a-z]+", "", name) or "ep"
    other = catalogue.ep_spec(stripped) if catalogue is not None else None
    # an alias another EP's spec answers to would replace that spec too (openvino's, for the OpenVINO plugin)
    aliases = [stripped] if stripped.lower() not in (name, provider.lower()) and (other is None or other.name == name) else []
    vendor = device.ep_vendor or "its vendor"
    version = device.ep_version
    summary = f"{provider} from {vendor}" + (f", version {version}" if version else "") + ", as ort-conformance init saw it"
    return {"name": name, "provider": provider, "aliases": aliases, "summary": summary}


def _packages(facts: EpFacts) -> dict[str, Any]:
    """The PyPI packages that provide the EP: the plugin package, or the onnxruntime build for
    a built-in EP; none for a library of one's own (its path and sha256 are in the sources)."""
    if facts.plugin_module:
        package = facts.plugin_package
        return {"packages": [package.name] if package and package.name else [], "plugin_module": facts.plugin_module}
    if facts.library:
        return {"packages": []}
    return {"packages": [facts.onnxruntime.package] if facts.onnxruntime and facts.onnxruntime.package else []}


def _packages_note(facts: EpFacts) -> str:
    if facts.plugin_module:
        package = facts.plugin_package
        named = " ".join(part for part in ((package.name, package.version) if package else ()) if part) or "its distribution not found"
        return f"the plugin package whose module {facts.plugin_module} gave the library ({named})"
    if facts.library:
        return "no PyPI package: a library of its own, whose path and sha256 are under sources"
    build = facts.onnxruntime or OnnxruntimeFacts()
    return f"the onnxruntime build the EP is part of ({build.package} {build.version})"


def _memory(advertised: MemoryFacts | None) -> dict[str, Any] | None:
    """A memory as the spec declares it."""
    if advertised is None:
        return None
    return {"device_type": advertised.device_type, "vendor_id": advertised.vendor_id, "name": advertised.name}


def _other_devices(out: Draft, facts: EpFacts, breach) -> None:
    """One spec declares every device of the EP: a device whose memory differs from the first's
    breaks memory-info.declaration on it, whatever the spec says."""
    devices = facts.devices
    if len(devices) < 2:
        return
    out.note("memory", f"the EP lists {len(devices)} devices; this draft is of the first ({devices[0].label}), and the spec declares them all")
    first = [_memory(devices[0].memory(kind)) for kind in ("default", "host_accessible")]
    for device in devices[1:]:
        if [_memory(device.memory(kind)) for kind in ("default", "host_accessible")] != first:
            breach("memory", "memory-info.declaration", f"device {device.label} advertises other memory than {devices[0].label}")


def memory_kind(facts: MemoryFacts | None, device: DeviceFacts) -> str:
    """cpu, default or host_accessible: which memory of the EP device (or plain CPU memory) a
    session value's memory facts are; 'other' for any other."""
    if facts is None:
        return "cpu"
    for kind in ("default", "host_accessible"):
        advertised = device.memory(kind)
        if advertised is not None and _place(facts) == _place(advertised):
            return kind
    return "cpu" if facts.on_cpu and facts.device_mem_type == "default" else "other"


def _place(memory: MemoryFacts) -> tuple[str, int, int, str]:
    """What makes a session value's memory one the EP device advertises."""
    return (memory.name, memory.vendor_id, memory.device_id, memory.device_mem_type)


def _session_memory(out: Draft, ep: dict[str, Any], seen: Observed, catalogue: Catalogue, breach) -> None:
    device, provider = seen.facts.devices[0], seen.facts.provider
    taken = [s for s in seen.sessions["sessions"] if s["ops_on_ep"] or (s["inputs"] and not seen.sessions["assignment_known"])]
    if not taken:
        out.leave_out("session_memory", f"{provider} took no node of the kit's models (models/recipes.yaml) in any element type: "
                                   "session_memory left out; the session contracts will not run")
        return
    # The rule memory-info.session-inputs holds for this EP and build, where its sources disagree.
    contested = next((c.contested for c in catalogue.contracts if c.id == "memory-info.session-inputs"), None)
    host_inputs_lawful = contested is not None and selectors.selects(contested.where, seen.facts, device)
    kinds: dict[str, list[str]] = {"inputs": [], "outputs": []}
    for which, contract in (("inputs", "memory-info.session-inputs"), ("outputs", "memory-info.session-outputs")):
        for session in taken:
            # The observe request's answer holds each value's memory as its JSON (null: plain CPU memory).
            for facts in (MemoryFacts.from_wire(wire) for wire in session[which]):
                kind = memory_kind(facts, device)
                where = f"a session {which[:-1]} of model '{session['recipe']}' ({session['dtype']}) lives in {memory_label(facts)}"
                if kind == "other":
                    breach("session_memory", contract, where + ", which is none of the EP device's memories")
                    continue
                if kind == "host_accessible" and which == "inputs" and not host_inputs_lawful and kind not in kinds[which]:
                    breach("session_memory", contract, where)
                if kind not in kinds[which]:
                    kinds[which].append(kind)
    if kinds["inputs"] and kinds["outputs"]:
        ep["session_memory"] = {which: [k for k in KINDS if k in kinds[which]] for which in ("inputs", "outputs")}
        out.note("session_memory", f"from {len(taken)} sessions of the kit's models of which {provider} took nodes")
    else:
        out.leave_out("session_memory", "no session's inputs and outputs lived in memory the spec format names: session_memory left out")


def _copy_directions(matrix: dict[str, Any], device: DeviceFacts, breach) -> list[str]:
    """The directions copy_tensors moved the bytes in; each one a contract requires that did not
    is a breach beside the claim."""
    status = {f"{p['source']}>{p['destination']}": p for p in matrix.get("pairs", ())}
    device_default = device.default_memory is not None and not device.default_memory.on_cpu
    held = {"default": device_default, "host_accessible": device.host_accessible_memory is not None}
    directions = []
    for direction, (contract, needs) in DIRECTION_CONTRACTS.items():
        pair = status.get(direction)
        if pair is not None and pair["status"] == "supported":
            directions.append(direction)
            continue
        if pair is None and not device_default:
            # DEFAULT is plain CPU memory: the run copies such a direction as its cpu pair
            pair = status.get(">".join("cpu" if end == "default" else end for end in direction.split(">")))
        if held[needs] and (pair is None or pair["status"] not in WORKS):
            what = pair["status"].replace("_", " ") if pair else "not tried"
            detail = f" ({pair['detail']})" if pair and pair.get("detail") else ""
            breach("copy_directions", contract, f"copy_tensors {direction}: {what}{detail}")
    return directions


def _importer(out: Draft, ep: dict[str, Any], imports: dict[str, Any] | None, breach) -> None:
    if not imports or imports.get("status") not in ("importer", "none"):
        reason = (imports or {}).get("reason") or "the copy probe gave no answer"
        out.leave_out("copy_directions", f"the importer was not asked ({reason}): importer left out")
        return
    if imports["status"] == "none":
        ep["importer"] = None
        if not imports.get("refused_with"):
            out.note("importer", "CreateExternalResourceImporterForDevice answered OK and no importer: the EP device imports nothing")
        else:
            breach("importer", "import.unsupported-is-success",
                   f"CreateExternalResourceImporterForDevice answered an error status ({imports['refused_with']}) instead of OK and no importer")
        return
    memory = imports.get("tensor_memory")
    kind = None
    if memory:
        kind = "host_accessible" if memory["memory_type"] == "host_accessible" else "cpu" if memory["device_type"] == "cpu" else "default"
    ep["importer"] = {"handle_types": list(imports.get("handle_types") or []), "tensor_memory": kind}
    out.note("importer", "the handle types CanImportMemory accepts, and the memory a tensor of an imported allocation reports")
    if not memory:
        out.note("importer", f"no tensor was imported to see its memory ({imports.get('reason') or 'no producer here'})")


def _ops(out: Draft, ep: dict[str, Any], sessions: dict[str, Any], provider: str, breach) -> None:
    """The ops and element types the EP takes, stated for a narrow EP: one that left some node
    of the kit's models to another EP."""
    if not sessions["assignment_known"]:
        return
    unrunnable = [s for s in sessions["sessions"] if s["claimed_but_unrunnable"]]
    if unrunnable:
        breach("ops", "session.claimed-nodes-run", f"{provider} claimed nodes it could not run in {_models(unrunnable)} "
                                                   f"(first: {unrunnable[0]['refused']})")
    failed = [s for s in sessions["sessions"] if s["ops_on_ep"] and s["ran"] and s["run"]]
    if failed:
        breach("ops", "session.nodes-on-ep", f"runs of {_models(failed)} failed on {provider} (first: {failed[0]['run']})")
    taken: dict[str, list[str]] = {}
    for session in sessions["sessions"]:
        for op in session["ops_on_ep"]:
            if session["dtype"] not in taken.setdefault(op, []):
                taken[op].append(session["dtype"])
    if taken and any(s["ops_elsewhere"] for s in sessions["sessions"]):
        ep["ops"] = dict(sorted(taken.items()))
        out.note("ops", f"{provider} left other nodes of the kit's models to another EP: a narrow EP")


def _models(sessions: list[dict[str, Any]]) -> str:
    """Sessions in words: "models 'add' (float32), 'relu' (float32)", at most four named."""
    named = [f"'{s['recipe']}' ({s['dtype']})" for s in sessions]
    return ("model " if len(named) == 1 else "models ") + ", ".join(named[:4]) + (f" and {len(named) - 4} more" if len(named) > 4 else "")


def _states(ep: dict[str, Any], claim: str) -> bool:
    return claim in ep if claim in OPTIONAL_CLAIMS or claim in ("device_type", "session_memory") else True


def _source(seen: Observed, stated: list[str]) -> dict[str, Any]:
    facts = seen.facts
    build = facts.onnxruntime or OnnxruntimeFacts()
    source: dict[str, Any] = {"kind": "observed", "ref": seen.command, "date": seen.date, "onnxruntime": build.version}
    if facts.library_sha256:
        source["library_sha256"] = facts.library_sha256
    versions = {build.package: build.version}
    package = facts.plugin_package
    if package and package.name:
        versions[package.name] = package.version or "unknown"
    ep_version = facts.devices[0].ep_version
    if ep_version:
        versions[facts.provider] = ep_version
    source["versions"] = versions
    if facts.library:
        source["note"] = f"the EP library {facts.library}"
    source["claims"] = stated
    return source


# --- the YAML --------------------------------------------------------------------------------


def _comment(text: str) -> str:
    """`text` as one comment line: control characters (a newline would end the comment) as spaces."""
    return "# " + re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+", " ", text).strip()


def _dumped(key: str, value: Any) -> list[str]:
    """`key: value` as YAML lines: a value that fits one line (a scalar, a list or mapping of
    scalars) beside its key, any other below it."""
    dumped = [line for line in yaml.safe_dump(value, sort_keys=False, default_flow_style=None, allow_unicode=True, width=4096).splitlines()
              if line != "..."]
    if len(dumped) == 1 and (not isinstance(value, (dict, list)) or dumped[0][:1] in "[{"):
        return [f"{key}: {dumped[0]}"]
    return [f"{key}:"] + ["  " + line for line in dumped]


def render(out: Draft, schema_path: str) -> str:
    """The draft as YAML: each top-level key of `ep` with its notes and breaches as comments
    above it. Read back, the text is `out.data` exactly (a value the EP named that YAML would
    take otherwise cannot slip in: the text is checked against it)."""
    seen = out.data["ep"]["sources"][0]
    lines = [f"# yaml-language-server: $schema={schema_path}",
             _comment(f"A draft of {out.data['ep']['provider']}'s spec, written by ort-conformance init on {seen['date']} "
                      f"(onnxruntime {seen['onnxruntime']}) from what the EP showed."),
             _comment("Each claim is one init observed. Read it and the comments beside it; where you agree, set its "
                      "verification to verified: true saying how; then delete the `draft` line."),
             "ep:"]
    beside: dict[str, list[str]] = {}
    for item in out.breaches:
        beside.setdefault(item.claim, []).append(f"WARNING: {item}")
    for key, value in out.data["ep"].items():
        comments = out.notes.get(key, []) + beside.get(key, [])
        if key == "copy_directions":  # a breach of the importer or ops without a key of its own sits with the copies
            comments += [text for claim in ("importer", "ops") if claim not in out.data["ep"] for text in beside.get(claim, [])]
        lines += ["  " + _comment(text) for text in comments]
        lines += ["  " + line for line in _dumped(key, value)]
    text = "\n".join(lines) + "\n"
    if yaml.safe_load(text) != out.data:
        raise ValueError("the draft's YAML does not read back as its data")
    return text
