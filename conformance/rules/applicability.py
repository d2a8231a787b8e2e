"""Whether a contract applies to an EP device: a pure function of the contract and the facts.

Decided before a check runs, from what the EP advertises and what the onnxruntime build offers,
so that `not_applicable` and `not_run` never depend on how a check happens to fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance import apis
from conformance.catalogue import selectors, versions
from conformance.catalogue.contracts import Contract, EpSpec
from conformance.facts import DeviceFacts, EpFacts
from conformance.outcomes import Outcome


@dataclass(frozen=True)
class Skip:
    outcome: Outcome
    reason: str


def decide(contract: Contract, ep: EpFacts, device: DeviceFacts, spec: EpSpec | None) -> Skip | None:
    if ep.unusable and contract.subject != "package":
        # A package's contract is about exactly this: a listed EP that cannot run here.
        return Skip(Outcome.NOT_RUN, ep.unusable)
    if spec and contract.id in spec.not_applicable:
        return Skip(Outcome.NOT_APPLICABLE, f"declared not applicable by {spec.location}: {spec.not_applicable[contract.id]}")
    facts = selectors.device_facts(ep, device)
    for key, wanted in contract.applies_when.items():
        if facts[key] != wanted:
            return Skip(Outcome.NOT_APPLICABLE, _explain(key, wanted, facts[key]))
    # The API level matters only for a contract that applies: an EP with CPU DEFAULT memory on
    # an older onnxruntime has device-copy contracts not_applicable for that reason, not this one.
    version = ep.onnxruntime_version
    if contract.since and version and not versions.at_least(version, contract.since):
        return Skip(Outcome.NOT_APPLICABLE, versions.below_api_level(contract.since, version, contract.requires_api))
    # A build at the contract's API level that still lacks an API it needs is not the EP's
    # doing, nor a level the run can certify without it: not_run.
    for api in contract.requires_api:
        if not ep.has_api(api):
            return Skip(Outcome.NOT_RUN, f"needs {api} (onnxruntime >= {apis.since(api)}); onnxruntime {version} lacks it")
    return None


def _explain(key: str, wanted: Any, actual: Any) -> str:
    if key == "default_memory":
        return {"device": "the EP's DEFAULT memory is plain CPU memory; this contract is about non-CPU DEFAULT memory",
                "cpu": "the EP's DEFAULT memory is device memory; this contract is about EPs whose DEFAULT memory is CPU memory"}[wanted]
    if key == "host_accessible":
        return "the EP device advertises no HOST_ACCESSIBLE memory" if wanted else "the EP device advertises HOST_ACCESSIBLE memory"
    if key == "ep_device":
        return "the EP is not listed by get_ep_devices()" if wanted else "the EP is listed by get_ep_devices()"
    if key == "plugin_library":
        return "the EP is built into onnxruntime, not loaded from a plugin library" if wanted else "the EP comes from a plugin library"
    if key == "declared":
        return "no vendor declaration (EP spec) was given for this EP" if wanted else "an EP spec was given"
    return f"{key} is {actual!r}, the contract needs {wanted!r}"
