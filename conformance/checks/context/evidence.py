"""What the running check proved, as data: the bytes it compared, the memory infos it saw, the
nodes that ran on the EP, the addresses it saw kept, each under its key declared in
conformance.proofs. The runner puts it into a pass's details (`Details.evidence`) and refuses a
pass that recorded none: a check that proved nothing has not passed."""

from __future__ import annotations

from typing import Any, TypeVar

from conformance import proofs
from conformance.proofs import Proof, ProofTypeError, Proven
from conformance.testbed import tensors

V = TypeVar("V")


class Evidence:
    def __init__(self) -> None:
        self._recorded: dict[str, Any] = {}  # values by their key's name, in the order proved

    def clear(self) -> None:
        """A new check starts: it has proved nothing yet."""
        self._recorded = {}

    def prove(self, key: Proof[V], value: V) -> None:
        """Records that the check established `key` (`ADDRESS_KEPT`, True), replacing what the
        key held. Values are small and plain (counts, names, labels): they go into report.json.
        A value that is not of the key's declared type is the kit's defect: ProofTypeError."""
        if not proofs.declared(key).holds(value):
            raise ProofTypeError(key.wrong_type(value))
        self._recorded[key.name] = value

    def prove_item(self, key: Proof[Any], name: str, value: Any) -> None:
        """Records `value` as `name` within the object under `key` (`MEMORY`, `"input x"`, its label)."""
        proofs.declared(key)
        if not key.holds_item(value):
            raise ProofTypeError(f"{key.wrong_type(value)} (as an item)")
        items = self._recorded.setdefault(key.name, {})
        if not isinstance(items, dict):
            raise ProofTypeError(f"evidence {key.name!r} was proved whole ({items!r:.80}): it takes no item now")
        items[name] = value

    def tally(self, key: Proof[int], amount: int) -> None:
        """Adds `amount` to the count under `key` (`BYTES_COMPARED` over several reads)."""
        self.prove(key, (self.get(key) or 0) + amount)

    def get(self, key: Proof[V]) -> V | None:
        """What the check proved of `key` so far (None: nothing)."""
        value: V | None = self._recorded.get(proofs.declared(key).name)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, Proof) and key.name in self._recorded

    def __bool__(self) -> bool:
        return bool(self._recorded)

    def proven(self) -> Proven:
        """What the check proved, as its result's details carry it."""
        return Proven({proofs.DECLARED[name]: value for name, value in self._recorded.items()})

    def compare(self, expected: tensors.Bytes | list[str], actual: tensors.Bytes | list[str]) -> tensors.ByteDiff | None:
        """`tensors.compare`, counting what was compared: `bytes_compared` (`strings_compared`
        for string tensors), whether or not they were equal."""
        self.tally(proofs.STRINGS_COMPARED if isinstance(expected, list) else proofs.BYTES_COMPARED, len(expected))
        return tensors.compare(expected, actual)

