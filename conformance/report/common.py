"""What the report's renderers share: how a device, an EP without an EP device and a case's
parameters read. A leaf of the report package: `report/__init__` (which builds and writes the
report) and the renderers (markdown, html) both import it, and it imports neither.
"""

from __future__ import annotations

import re
from typing import Any

from conformance.catalogue.contracts import PROVENANCE_BASES
from conformance.testbed.eps import memory_label
from conformance.outcomes import BROKEN, NOT_AGAINST_EP


def code_span(text: Any) -> str:
    """`text` as one Markdown code span that nothing in it can end: fenced by one backtick more
    than its longest run of backticks, and spaced from a fence it begins or ends with a backtick
    (CommonMark strips one space each side), on one line. A vendor's wrapper or library path
    written between single backticks would end the span at its own backtick, and what follows
    (`<script>`) would be raw HTML in report.md."""
    text = " ".join(str(text).splitlines())
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text[:1] == "`" or text[-1:] == "`" or (text[:1] == text[-1:] == " " and text.strip()) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# What a report says of a memory type for an EP that get_ep_devices() does not list: its
# memory infos were never asked, so "None" there does not mean plain CPU memory.
NO_EP_DEVICE = "no EP device (get_ep_devices() does not list this EP)"


def unlisted_note(eps: list[dict[str, Any]], matrix: dict[str, Any]) -> str | None:
    """What a reader of `matrix` must know when its EP has no EP device: only CPU memory was
    there to probe, so its pairs and figures are the host's, not the EP's."""
    entry = next((e for e in eps if e.get("name") == matrix.get("ep")), None)
    if entry is None or entry.get("ep_device", True):
        return None
    return (f"{NO_EP_DEVICE}: only plain CPU memory could be probed, so these copies and figures are of the host's "
            "memory, not of memory the EP owns.")


def device_line(device: dict[str, Any]) -> str:
    """A device record in one line: its hardware and the memory infos its EP device advertises."""
    hardware = device.get("hardware")
    if hardware is None:
        return f"{NO_EP_DEVICE}: no memory info was advertised"
    return (f"{hardware['type']} {hardware.get('vendor') or ''}".rstrip()
            + f"; DEFAULT: {advertised_memory(device, 'default')}; HOST_ACCESSIBLE: {advertised_memory(device, 'host_accessible')}")


def advertised_memory(device: dict[str, Any], kind: str) -> str:
    """What a device record says of its `default` or `host_accessible` memory, in words. A
    record without hardware stands for an EP without an EP device (eps.describe)."""
    if device.get("hardware") is None:
        return f"not advertised: {NO_EP_DEVICE}"
    memory = device["memory"][kind]
    if memory is None and kind == "host_accessible":
        return "none"
    return memory_label(memory)


def run_conditions(data: dict[str, Any]) -> list[str]:
    """What a reader must know of where the EP ran, one line each: an emulated CPU (said
    plainly, with what it means for the figures), else the machine's CPU it ran on natively
    (an EP decides which nodes it takes by the hardware it sees: the OpenVINO plugin takes
    empty tensors natively on one CPU and not under an emulated one), and the wrapper its
    processes ran under; then what the report could not compute (report.json's not_computed)."""
    run = data.get("run") or {}
    missing = [f"Not computed: {what}" for what in data.get("not_computed") or []]
    if run.get("emulated"):
        return [f"CPU emulated: {run['emulated']}; which nodes the EP took was decided on that CPU.", *missing]
    native = [f"Ran natively on this machine's {run['cpu']} CPU: which nodes the EP took was decided on this hardware."] if run.get("cpu") else []
    return native + ([f"The EP's processes ran under {code_span(run['wrapper'])}."] if run.get("wrapper") else []) + missing


# The tries lost to the machine that a summary (report.md's head, summary.md, the terminal) names
# one by one; report.md and report.html list every one, with its evidence.
MACHINE_SHOWN = 3
MACHINE_NOTE = ("A worker killed from outside (a SIGKILL the kit had not sent: the OOM killer, a CI runner), or stopped by a signal "
                "or kept waiting for a CPU by other processes when its time ran out, which the case's next try did not repeat: "
                "the machine's event, not the EP's. The case was tried again in a fresh worker, and its outcome is that of the "
                "tries that followed.")


def machine_lines(data: dict[str, Any]) -> list[str]:
    """A line per try lost to the machine and not counted against the EP (report.json's
    run.machine_events), the first MACHINE_SHOWN of them, and how many more the reports list."""
    events = (data.get("run") or {}).get("machine_events") or []
    lines = [f"{code_span(case_name(event['nodeid']))}: {event['text']}" for event in events[:MACHINE_SHOWN]]
    if len(events) > MACHINE_SHOWN:
        lines.append(f"... and {len(events) - MACHINE_SHOWN} more tries lost to the machine, not counted against the EP "
                     "(report.md and report.html list them)")
    return lines


def case_name(nodeid: str) -> str:
    """A case's name without its file: 'copy.roundtrip-exact[cpu-float32-7x13]'."""
    return nodeid.rpartition("::")[2] or nodeid


def ep_origin(entry: dict[str, Any]) -> str:
    """Which build of the EP ran: its plugin package and version, its library and the library's
    sha256 ('' for an EP built into onnxruntime)."""
    package = entry.get("plugin_package") or {}
    parts = [f"package {package['name']} {package['version']}"] if package else []
    if entry.get("library"):
        parts.append(f"library {code_span(entry['library'])} sha256 {code_span(entry['library_sha256'])}")
    return ", ".join(parts)


def params_label(params: dict[str, Any]) -> str:
    return "-".join(map(str, params.values())) or "-"


def imports_lines(imports: dict[str, Any] | None) -> list[str]:
    """What the interop probe found for one EP device (conformance/testbed/interop/probe.py), in words:
    the answer to "which copies work on an imported tensor"."""
    if not imports:
        return []
    if imports["status"] == "none":
        return ["Imports: no importer (the EP device imports no external memory)."]
    if imports["status"] == "not_run":
        return [f"Imports: not probed here: {imports['reason']}"]
    types = ", ".join(imports["handle_types"]) or "none"
    out = [f"Imports: an importer; handle types: {types}."]
    memory = imports.get("tensor_memory")
    if memory:
        out.append(f"Imported tensors report {memory['memory_type']} memory ({memory['name']}, {memory['device_type']}).")
    if imports.get("reason"):
        out.append(imports["reason"])
    out += [f"- {c['source']} -> {c['destination']}: {c['status']} ({c['detail']})" for c in imports.get("copies", [])]
    return out


# --- anchors: report.html's ids, which summary.md links into -----------------------------------

_NOT_IN_AN_ANCHOR = re.compile(r"[^A-Za-z0-9._-]")


def anchor(text: str) -> str:
    """`text` as an id that a URL fragment carries unescaped: other characters become '_'."""
    return _NOT_IN_AN_ANCHOR.sub("_", text)


def contract_anchor(contract_id: str) -> str:
    """The id of a contract's entry among all results (every contract that ran has one)."""
    return "contract-" + anchor(contract_id)


def failure_anchor(contract_id: str) -> str:
    """The id of a contract's block among the failures of the EP or the findings."""
    return "failure-" + anchor(contract_id)


def case_anchor(result: dict[str, Any]) -> str:
    """The id of one result's row: its contract, EP device and parameters, as pytest names the item."""
    return "case-" + anchor(f"{result['contract']}[{result['device']}-{params_label(result['params'])}]")


def reason_contract(reason: str, contracts: dict[str, Any]) -> str | None:
    """The contract a verdict reason names ("required contract broken: copy.h2d" and the
    like end with the contract's id), or None for a reason about the run as a whole."""
    return next((part.strip() for part in reversed(reason.split(": ")) if part.strip() in contracts), None)


def tally(results: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """(the EP's results, onnxruntime's results) by outcome, in first-seen order: a broken
    `runtime`-subject contract is a finding against onnxruntime and says nothing of the EP, so
    the two are counted apart (an EP with every check passed must not read '3 fail')."""
    ep: dict[str, int] = {}
    runtime: dict[str, int] = {}
    for result in results:
        counts = runtime if result["subject"] in NOT_AGAINST_EP else ep
        counts[result["outcome"]] = counts.get(result["outcome"], 0) + 1
    return ep, runtime


BROKEN_VALUES = frozenset(o.value for o in BROKEN)


def failures_of_the_ep(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The broken cases the EP answers for (subject ep, or both): what pytest counts failed
    (a crash or a timeout: an error), what the verdict reads, in every report the same."""
    return [r for r in results if r["outcome"] in BROKEN_VALUES and r["subject"] not in NOT_AGAINST_EP]


def findings_apart(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The broken cases that are onnxruntime's alone (subject runtime or package): pytest's
    xfailed, counted apart from the EP's. A broken `both` case is the EP's failure (it is
    counted there, once); report.json's `findings` lists it too, as onnxruntime let it through."""
    return [r for r in results if r["outcome"] in BROKEN_VALUES and r["subject"] in NOT_AGAINST_EP]


def shared_with_the_ep(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The broken `both` cases: counted with the EP's failures, and named among the findings."""
    return [r for r in results if r["outcome"] in BROKEN_VALUES and r["subject"] == "both"]


def counts_text(counts: dict[str, int]) -> str:
    """'288 fail, 77 pass': one tally (see `tally`) as every output words it."""
    return ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "none"


def partial_run(data: dict[str, Any]) -> str:
    """What a run that did not run the whole catalogue ran ('61 of 521 checks ran (-k ...)'),
    or '' for a whole run (or a report from before report.json recorded its selection)."""
    selection = data.get("selection")
    return selection["text"] if selection and not selection.get("complete", True) else ""


def verdict_text(verdict: str, level: str | None) -> str:
    """The verdict naming the API level it certifies: 'conformant at onnxruntime 1.24's API'
    (contracts that need a newer API were not_applicable on this build)."""
    return f"{verdict} at onnxruntime {level}'s API" if level else verdict


def verdict_of(data: dict[str, Any]) -> str:
    """A report's verdict in words, with its API level (a report written before it had one: the verdict)."""
    return data.get("verdict_text") or data["verdict"]


def provenance_text(contract: dict[str, Any]) -> str:
    """A report's contract entry's provenance in one line ('' where the entry has none)."""
    provenance = contract.get("provenance") or {}
    if not provenance:
        return ""
    return f"{PROVENANCE_BASES.get(provenance['basis'], provenance['basis'])}: {provenance['ref']}"

