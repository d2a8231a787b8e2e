"""What an EP spec claims, as plain data for reports: each claim's value in words, whether a
run on the real EP has verified it and how (or why not), and the sources that back it.

report.json carries this under `ep.claims`; report.md, report.html and `ort-conformance found`
render it as "What the spec claims". Knows nothing of how checks run.
"""

from __future__ import annotations

from typing import Any

from conformance.catalogue.contracts import EpSpec, ImporterDeclaration, MemoryDeclaration


def spec_claims(spec: EpSpec | None) -> list[dict[str, Any]]:
    """One entry per claim the spec makes (EpSpec.claims), in that order; empty without a spec."""
    if spec is None:
        return []
    values = _values(spec)
    out = []
    for claim in spec.claims:
        verification = spec.verification_of(claim)
        out.append({
            "claim": claim,
            "value": values[claim],
            "verified": verification.verified,
            "how": verification.how,
            "sources": [source.ref for source in spec.sources if claim in source.claims],
        })
    return out


def _values(spec: EpSpec) -> dict[str, str]:
    return {
        "device_type": spec.device_type or "-",
        "memory": f"DEFAULT {_declared(spec.default_memory)}; HOST_ACCESSIBLE {_declared(spec.host_accessible) if spec.host_accessible else 'none'}",
        "session_memory": f"inputs {', '.join(spec.session_inputs or ('-',))}; outputs {', '.join(spec.session_outputs or ('-',))}",
        "copy_directions": ", ".join(f"{a}>{b}" for a, b in spec.copy_directions or ()) or "none",
        "packages": ", ".join(spec.packages) or "none on PyPI",
        "importer": _importer(spec.importer),
        "ops": "; ".join(f"{op} {', '.join(types)}" for op, types in sorted(spec.ops.items())) or "none",
    }


def _importer(importer: ImporterDeclaration | None) -> str:
    if importer is None:
        return "none (it imports nothing)"
    memory = f"; imported tensors in {importer.tensor_memory} memory" if importer.tensor_memory else ""
    return f"handle types {', '.join(importer.handle_types) or 'none'}{memory}"


def _declared(memory: MemoryDeclaration | None) -> str:
    if memory is None:
        return "plain CPU memory"
    parts = [memory.device_type] + ([memory.name] if memory.name else []) + ([f"vendor 0x{memory.vendor_id:04x}"] if memory.vendor_id is not None else [])
    return " ".join(parts)


def unverified_count(claims: list[dict[str, Any]]) -> int:
    return sum(1 for claim in claims if not claim["verified"])


def draft_of(spec: EpSpec | None) -> dict[str, Any] | None:
    """report.json's `ep.draft`: where the draft is, its note and the claims nobody has
    confirmed; None for a spec that is no draft (or no spec)."""
    if spec is None or not spec.draft:
        return None
    return {"spec": spec.location.path, "note": spec.draft, "unconfirmed": list(spec.unconfirmed())}
