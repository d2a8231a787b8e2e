"""A producer of host memory for HOST_ALLOCATION imports (ORT_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION,
onnxruntime >= 1.30): page-aligned anonymous mappings, through ctypes on libc.

It has the interface of `conformance.testbed.interop.vulkan.Producer` (allocate, write, read,
export, free, close), so the import checks run on either. The handle it exports is the
allocation's address, which the caller keeps owning: an import can take nothing from it.
Nothing past an allocation is mapped (`HEADROOM` bytes are reserved after it, then unmapped), so
an importer that checks what it is given can tell a size past the allocation from a real one,
as a host-memory registration of unmapped pages fails. Needs no graphics API: it runs on every
Linux machine.
"""

from __future__ import annotations

import ctypes
import mmap
from dataclasses import dataclass

from conformance.testbed.interop.mapping import Mapped

HEADROOM = 2 << 20  # bytes left unmapped after each allocation (more than any size past it the checks ask)
_MAP_FAILED = ctypes.c_void_p(-1).value


@dataclass
class Allocation:
    """`size` bytes at the page-aligned `address`, of a mapping of `mapped` bytes."""
    memory: int
    size: int
    address: int
    mapped: int


class HostProducer(Mapped):
    """Anonymous host mappings; `handle_type` is what the descriptor names."""

    handle_type = "host_allocation"
    name = "host memory (mmap)"

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._mmap, self._munmap = libc.mmap, libc.munmap
        self._mmap.restype = ctypes.c_void_p
        self._mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        self._munmap.restype = ctypes.c_int
        self._munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self._allocations: list[Allocation] = []

    def allocate(self, size: int) -> Allocation:
        page = mmap.PAGESIZE
        mapped = -(-size // page) * page
        address = self._mmap(None, mapped + HEADROOM, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        if address in (None, _MAP_FAILED):
            raise MemoryError(f"mmap of {mapped + HEADROOM} bytes failed (errno {ctypes.get_errno()})")
        self._munmap(address + mapped, HEADROOM)  # what follows the allocation is not mapped
        allocation = Allocation(address, size, address, mapped)
        self._allocations.append(allocation)
        return allocation

    def export(self, allocation: Allocation) -> int:
        """The native handle of a HOST_ALLOCATION descriptor: the address itself."""
        return allocation.address

    def free(self, allocation: Allocation) -> None:
        if allocation in self._allocations:
            self._allocations.remove(allocation)
            self._munmap(allocation.address, allocation.mapped)

    def close(self) -> None:
        for allocation in list(self._allocations):
            self.free(allocation)
