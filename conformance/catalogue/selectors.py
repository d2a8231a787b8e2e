"""What a contract's `applies_when`, and a contested rule's `where`, select on: the facts of one
EP device in a run, and whether a selector matches them.

Pure functions of the run's facts (`eps.describe`) and one device's, shared by applicability
(which decides before a check whether a contract applies) and the check runner (which tells a
check whether the rule a contested contract holds for some EPs applies to this one).
"""

from __future__ import annotations

from typing import Any, Mapping

from conformance.catalogue import versions
from conformance.catalogue.contracts import Contract
from conformance.facts import DeviceFacts, EpFacts


def default_memory_kind(device: DeviceFacts) -> str:
    default = device.default_memory
    return "cpu" if default is None or default.on_cpu else "device"


def device_facts(run: EpFacts, device: DeviceFacts) -> dict[str, Any]:
    """The facts `applies_when` keys name, for one EP device of a run."""
    return {
        "default_memory": default_memory_kind(device),
        "host_accessible": device.host_accessible_memory is not None,
        "ep_device": run.ep_device,
        "plugin_library": bool(run.library or run.plugin_module),
        "declared": run.declared,
    }


def selects(where: Mapping[str, Any], run: EpFacts, device: DeviceFacts) -> bool:
    """Whether a contested rule's `where` (device facts, and `onnxruntime`, a version selector)
    selects this EP device of this run."""
    facts = device_facts(run, device)
    version = run.onnxruntime_version
    return all(versions.selects(wanted, version) if key == "onnxruntime" else facts.get(key) == wanted
               for key, wanted in where.items())


def contested_rule(contract: Contract, run: EpFacts, device: DeviceFacts) -> str:
    """For a contested contract, which rule judges its cases on this EP device, in words ('' for
    a contract nobody contests): the rule it holds where `where` selects, else its statement's."""
    if contract.contested is None:
        return ""
    if selects(contract.contested.where, run, device):
        return f"contested: judged by the rule held for {contract.contested.where_text()}"
    return f"contested: judged by the statement's rule (this EP or build is outside {contract.contested.where_text()})"
