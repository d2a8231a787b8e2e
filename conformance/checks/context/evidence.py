"""What the running check proved, as data: the bytes it compared, the memory infos it saw, the
nodes that ran on the EP, the addresses it saw kept. The runner puts it into a pass's details
(`Details.evidence`) and refuses a pass that recorded none: a check that proved nothing has
not passed."""

from __future__ import annotations

from typing import Any

from conformance.testbed import tensors


class Evidence:
    def __init__(self) -> None:
        self.recorded: dict[str, Any] = {}

    def clear(self) -> None:
        """A new check starts: it has proved nothing yet."""
        self.recorded = {}

    def prove(self, key: str, value: Any) -> None:
        """Records that the check established `key` (`"address_kept"`, True), replacing what the
        key held. Values are small and plain (counts, names, labels): they go into report.json."""
        self.recorded[key] = value

    def prove_item(self, key: str, name: str, value: Any) -> None:
        """Records `value` as `name` within the dict under `key` (`"memory"`, `"input x"`, its label)."""
        self.recorded.setdefault(key, {})[name] = value

    def tally(self, key: str, amount: int) -> None:
        """Adds `amount` to the count under `key` (`"bytes_compared"` over several reads)."""
        self.recorded[key] = self.recorded.get(key, 0) + amount

    def compare(self, expected: tensors.Bytes | list[str], actual: tensors.Bytes | list[str]) -> tensors.ByteDiff | None:
        """`tensors.compare`, counting what was compared: `bytes_compared` (`strings_compared`
        for string tensors), whether or not they were equal."""
        self.tally("strings_compared" if isinstance(expected, list) else "bytes_compared", len(expected))
        return tensors.compare(expected, actual)
