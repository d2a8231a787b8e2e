"""The contract model: what the YAML says, as frozen data.

Nothing here reads files or talks to onnxruntime: `spec.py` builds these objects from YAML,
the plugin and the worker consume them.
"""

from __future__ import annotations

import itertools
from functools import cached_property
from dataclasses import dataclass, field, replace
from typing import AbstractSet, Any, Mapping, Protocol

SEVERITIES = ("required", "recommended", "informational")
SUBJECTS = ("ep", "runtime", "package")


@dataclass(frozen=True)
class Location:
    """Where something was written: a file and a 1-based line and column."""

    path: str
    line: int
    column: int = 1
    key: str = ""  # the JSON path of what is written there (contracts[0].check), where kept

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Source:
    kind: str  # seed | pr | onnxruntime-source | onnxruntime-docs | onnx-docs (the ONNX specification) | measured
    ref: str
    note: str = ""
    claims: tuple[str, ...] = ()  # in EP specs: the claims this source backs

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "ref": self.ref, "note": self.note}
        if self.claims:
            data["claims"] = list(self.claims)
        return data


# What each provenance basis means, in words: where a contract's rule comes from.
PROVENANCE_BASES = {
    "documented": "onnxruntime's headers or documents",
    "maintainer": "an onnxruntime maintainer's statement",
    "merged-change": "a change merged into onnxruntime",
    "measured": "a measurement",
    "inferred": "the kit's own inference",
}


@dataclass(frozen=True)
class Provenance:
    """Where a contract's rule comes from: one basis (a key of PROVENANCE_BASES) and a reference."""

    basis: str
    ref: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"basis": self.basis, "ref": self.ref, "note": self.note}

    def text(self) -> str:
        """The provenance in one line: 'a merged change: onnxruntime PR 28037'."""
        return f"{PROVENANCE_BASES.get(self.basis, self.basis)}: {self.ref}"


@dataclass(frozen=True)
class Contested:
    """A rule its sources disagree on: the rule the contract holds where `where` selects (EP
    facts as in applies_when, and `onnxruntime`, a version selector), why, and each side."""

    holds: str
    where: Mapping[str, Any]
    why: str
    sides: tuple[tuple[str, str], ...]  # (what a source says, where)

    def to_dict(self) -> dict[str, Any]:
        return {"holds": self.holds, "where": dict(self.where), "for": self.where_text(), "why": self.why,
                "sides": [{"says": says, "ref": ref} for says, ref in self.sides]}

    def where_text(self) -> str:
        """`where` in words, for the reports: 'plugin_library=True, onnxruntime >=1.27'."""
        return ", ".join(f"onnxruntime {v}" if k == "onnxruntime" else f"{k}={v}" for k, v in self.where.items())


@dataclass(frozen=True)
class Contract:
    id: str
    statement: str
    subject: str
    severity: str
    check: str
    sources: tuple[Source, ...]
    applies_when: Mapping[str, Any]
    params: Mapping[str, tuple[Any, ...]]
    location: Location
    family: str
    requires_api: tuple[str, ...] = ()
    provenance: Provenance | None = None
    since: str = ""  # the onnxruntime version (major.minor) whose API the contract needs
    contested: Contested | None = None
    isolated: bool = False
    own_process: bool = False
    tier: str = "functional"  # or "stress": the same promise under load (marker `stress`, stretched by --conformance-soak)
    file: str = ""  # the absolute path of the file that defines it
    check_location: Location | None = None  # where its `check` is written, for an unknown check found later
    # where each key of `params` is written, for a parameter its check turns out not to take
    param_locations: Mapping[str, Location] = field(default_factory=dict)

    def cases(self) -> list[dict[str, Any]]:
        """Every combination of the parameter matrix, in the order the YAML lists them."""
        if not self.params:
            return [{}]
        keys = list(self.params)
        return [dict(zip(keys, values, strict=True)) for values in itertools.product(*self.params.values())]


class CheckSignature(Protocol):
    """What a contract must agree with in the check it names (the registry's `Check` is one):
    the parameters the check takes after its context, and those of them without a default."""

    @property
    def params(self) -> tuple[str, ...]: ...

    @property
    def required(self) -> AbstractSet[str]: ...


@dataclass(frozen=True)
class Waiver:
    contract: str
    reason: str
    url: str
    until: str | None = None  # onnxruntime version from which the waiver no longer holds
    device: str | None = None  # device label selector
    location: Location | None = None
    until_ep: str | None = None  # EP version from which the waiver no longer holds
    onnxruntime: str | None = None  # version selector, e.g. ">=1.30, <1.33": applies only to those builds
    ep_version: str | None = None  # version selector for the EP's own version


@dataclass(frozen=True)
class MemoryDeclaration:
    """What an EP declares about one memory type; `None` fields were not declared."""

    device_type: str  # cpu | gpu | npu | fpga
    vendor_id: int | None = None
    name: str | None = None


@dataclass(frozen=True)
class Verification:
    """Whether a run on the real EP confirmed one claim of an EP spec, and how (or why not)."""

    verified: bool
    how: str


@dataclass(frozen=True)
class KnownIssue:
    """An upstream defect that a failure of this EP matches: by contract id (or
    `copy:SOURCE>DESTINATION` for a pair of the copy matrix) and, optionally, message text."""

    contract: str
    url: str
    title: str
    match: str | None = None

    @classmethod
    def all_from(cls, raw: dict[str, Any]) -> tuple["KnownIssue", ...]:
        """The `known_issues` list of a YAML document (an EP spec, or the kit's own table)."""
        return tuple(cls(k["contract"], k["url"], k["title"], k.get("match")) for k in raw.get("known_issues", ()))

    def matches(self, contract: str, message: str) -> bool:
        return self.contract == contract and (self.match is None or self.match.lower() in message.lower())


# The claims an EP spec makes; each may carry a Verification.
CLAIMS = ("device_type", "memory", "session_memory", "copy_directions", "packages")
# Claims a spec makes only where it states them (`importer`, `ops`): a spec without them claims
# nothing of its importer or operators, rather than leaving a claim unverified.
OPTIONAL_CLAIMS = ("importer", "ops")


@dataclass(frozen=True)
class ImporterDeclaration:
    """What an EP declares of its external resource importer: the handle types it imports and
    the memory kind (cpu, default, host_accessible) an imported tensor reports (None: not said)."""

    handle_types: tuple[str, ...]
    tensor_memory: str | None = None


@dataclass(frozen=True)
class EpSpec:
    name: str
    aliases: tuple[str, ...]
    provider: str
    summary: str
    packages: tuple[str, ...]
    plugin_module: str | None
    default_memory: MemoryDeclaration | None
    host_accessible: MemoryDeclaration | None
    device_type: str | None
    copy_directions: tuple[tuple[str, str], ...] | None
    not_applicable: Mapping[str, str]
    waivers: tuple[Waiver, ...]
    sources: tuple[Source, ...]
    unverified: tuple[str, ...]
    location: Location
    # Memory kinds (cpu, default, host_accessible) that session inputs and outputs use.
    session_inputs: tuple[str, ...] | None = None
    session_outputs: tuple[str, ...] | None = None
    verification: Mapping[str, Verification] = field(default_factory=dict)
    known_issues: tuple[KnownIssue, ...] = ()
    # A vendor's spec given on the command line replaces a shipped spec of the same EP: where
    # that one was written (None for a shipped spec, or a vendor's spec of a new EP).
    overrides: Location | None = None
    # Environment variables the EP reads (`environment` in its spec): those that set it up, which a
    # reproducer requires as its run had them, and those that break it on purpose (fault modes).
    environment_setup: tuple[str, ...] = ()
    environment_faults: tuple[str, ...] = ()
    # A draft (`draft` in its spec, as `ort-conformance init` writes it): the note; '' for none.
    draft: str = ""
    # The optional claims the spec states (OPTIONAL_CLAIMS); `importer` None there: it imports nothing.
    stated: frozenset[str] = frozenset()
    importer: ImporterDeclaration | None = None
    ops: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, self.provider, *self.aliases)

    @property
    def claims(self) -> tuple[str, ...]:
        """The claims this spec makes: CLAIMS, and the optional ones it states."""
        return CLAIMS + tuple(claim for claim in OPTIONAL_CLAIMS if claim in self.stated)

    def unconfirmed(self) -> tuple[str, ...]:
        """The claims no run has confirmed (their verification says false, or nothing)."""
        return tuple(claim for claim in self.claims if not self.verification_of(claim).verified)

    def verification_of(self, claim: str) -> Verification:
        return self.verification.get(claim) or Verification(False, "not stated in the spec")

    def known_issue(self, contract: str, message: str) -> KnownIssue | None:
        return next((issue for issue in self.known_issues if issue.matches(contract, message)), None)


@dataclass(frozen=True)
class Catalogue:
    contracts: tuple[Contract, ...]
    eps: tuple[EpSpec, ...]
    files: tuple[str, ...] = field(default=())
    digest: str = ""

    def contract(self, contract_id: str) -> Contract:
        return self._by_id[contract_id]

    @cached_property
    def _by_id(self) -> dict[str, Contract]:
        # Built once: a worker looks up the contract of every case it runs, and a scan of the
        # contracts per case made a 10 000-contract catalogue's run quadratic (6 s of lookups).
        # The first of two contracts with one id wins, as the scan's did (the loader refuses
        # duplicates anyway).
        by_id: dict[str, Contract] = {}
        for contract in self.contracts:
            by_id.setdefault(contract.id, contract)
        return by_id

    def only(self, contract_id: str) -> Catalogue:
        """This catalogue with contract `contract_id` alone (every EP declaration kept): what a
        worker that runs one case of it needs."""
        return replace(self, contracts=(self.contract(contract_id),))

    def ep_spec(self, name: str) -> EpSpec | None:
        """The EP declaration that answers to `name` (alias, spec name or provider name)."""
        wanted = name.lower()
        for ep in self.eps:
            if wanted in (n.lower() for n in (ep.name, *ep.aliases)):
                return ep
        # By provider name: an EP built into onnxruntime before its plugin package.
        by_provider = [ep for ep in self.eps if ep.provider.lower() == wanted]
        return min(by_provider, key=lambda ep: ep.plugin_module is not None, default=None)
