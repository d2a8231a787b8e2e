"""What the schemas cannot say, checked across the loaded documents: duplicate contract ids, a
contract's `since` older than an API it requires, EP names and aliases declared twice, references to unknown contracts, and contracts naming a check
that is not registered or whose `params` do not fit it, each a `SpecError` at the offending key.

Must not know: how the documents are read or validated, onnxruntime (the checks only as data: a
`known_checks` table passed in).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping

from conformance import apis
from conformance.catalogue import versions
from conformance.catalogue.contracts import CheckSignature, Contract, EpSpec, Location
from conformance.catalogue.yaml_marks import Document, JsonPath
from conformance.errors import SpecError, closest

# Where each built contract and EP spec came from: id(object) -> its document and JSON path,
# so that a cross-check error points at the offending key or value, not at the block.
Where = dict[int, tuple[Document, JsonPath]]


def cross_check(contracts: list[Contract], eps: list[EpSpec], where: Where) -> Iterator[SpecError]:
    def at(item: Contract | EpSpec, path: JsonPath, message: str, *, key: bool = False) -> SpecError:
        doc, base = where[id(item)]
        return doc.error((*base, *path), message, key=key)

    first_seen: dict[str, Contract] = {}
    for contract in contracts:
        if not contract.id:  # a contract without one (the schema said so)
            continue
        needed = max((apis.since(api) for api in contract.requires_api), key=versions.parse, default="")
        if contract.since and needed and not versions.at_least(contract.since, needed):
            newer = [api for api in contract.requires_api if not versions.at_least(contract.since, apis.since(api))]
            yield at(contract, ("since",), f"since {contract.since} is older than the API it requires: {', '.join(newer)} (onnxruntime >= {needed})")
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


def unknown_contracts(documents: list[Document], known: set[str]) -> Iterator[SpecError]:
    """The contracts the EP declarations in `documents` refer to (not_applicable, waivers,
    known_issues) that no contract file defines; read from each document as written, so that
    a declaration with schema errors is checked too."""
    def listed(raw: dict[str, Any], key: str) -> Iterator[tuple[JsonPath, bool, str]]:
        items = raw.get(key)
        for i, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, dict) and isinstance(item.get("contract"), str):
                yield ("ep", key, i, "contract"), False, item["contract"]

    for doc in documents:
        raw = doc.data.get("ep")
        if not known or not isinstance(raw, dict):
            continue
        not_applicable = raw.get("not_applicable")
        referenced = [(("ep", "not_applicable", cid), True, cid) for cid in (not_applicable if isinstance(not_applicable, dict) else {})
                      if isinstance(cid, str)]
        referenced += listed(raw, "waivers")
        referenced += [ref for ref in listed(raw, "known_issues") if not ref[2].startswith("copy:")]
        for path, is_key, contract_id in referenced:
            if contract_id not in known:
                hint = closest(contract_id, sorted(known))
                suggestion = f" (did you mean '{hint}'?)" if hint else ""
                yield doc.error(path, f"unknown contract '{contract_id}'{suggestion}", key=is_key)


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
        if not contract.check:  # none written (the schema said so)
            continue
        if known and contract.check not in known:
            hint = closest(contract.check, sorted(known))
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
            hint = closest(name, [p for p in signature.params if p not in contract.params and p not in suggested])
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
