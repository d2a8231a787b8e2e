"""The risky onnxruntime calls a check announces before making them, as typed values.

A check wraps each call that can abort or hang the process in `CheckContext.calling(Call(...))`;
the worker announces it before the call and again when it returns, so the parent knows which call
a lost check was in. The parent's quarantine is keyed by these values, never by their text: a
call that crashed or hung is not made again on that EP device. A leaf module, like
`conformance.findings`: both sides of the worker boundary use it.

On the wire (JSON lines between worker and parent) a call is its `to_wire()` dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Call:
    """`kind`: the API called ('copy_tensors', 'update_inplace ortvalue', 'InferenceSession
    creation', ...); `direction`: source>destination memory kinds where the call moves data
    ('cpu>default'), else ''; `note`: what else tells two requests of one kind apart ('bad request
    shape', 'timed'), else ''."""

    kind: str
    direction: str = ""
    note: str = ""

    def __str__(self) -> str:
        text = f"{self.kind} {self.direction}" if self.direction else self.kind
        return f"{text}, {self.note}" if self.note else text

    def to_wire(self) -> dict[str, str]:
        return {"kind": self.kind, "direction": self.direction, "note": self.note}

    @classmethod
    def from_wire(cls, data: Any) -> "Call":
        if isinstance(data, Call):
            return data
        if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
            raise ValueError(f"not a call: {data!r}")
        return cls(data["kind"], str(data.get("direction", "")), str(data.get("note", "")))
