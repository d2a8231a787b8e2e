"""What every producer shares: its allocations are mapped into this process (`address`, `size`),
so it fills and reads them with plain memory moves. A leaf, like the producers that use it: the
import family's reproducers carry its source with theirs."""

import ctypes


class Mapped:
    """write/read of an allocation that has `address` and `size` (bytes)."""

    def write(self, allocation, data: bytes, offset: int = 0) -> None:
        if offset + len(data) > allocation.size:
            raise ValueError(f"{len(data)} bytes at {offset} do not fit an allocation of {allocation.size}")
        ctypes.memmove(allocation.address + offset, data, len(data))

    def read(self, allocation, size=None, offset: int = 0) -> bytes:
        return ctypes.string_at(allocation.address + offset, allocation.size - offset if size is None else size)
