"""A Vulkan producer of exportable memory, through ctypes on the system's `libvulkan.so.1`.

The import family needs memory that something other than onnxruntime made: this module
allocates host-visible memory that Vulkan may export as an opaque file descriptor
(`VK_KHR_external_memory_fd`), fills it and reads it back through Vulkan's own mapping, and hands
out a new fd per import. ctypes, like the C path of `conformance.testbed.interop.capi`, so that installing
the kit needs no compiler and no Vulkan headers; the handful of constants used are the values
of Debian's `libvulkan-dev` (`vulkan_core.h`), and a test compares them with that header where it
is at hand. The loader and the driver (lavapipe in lanes/softgpu, the GPU's own driver on
hardware) come from the machine.

Where there is no loader, no device, or no device that exports opaque fds, `open_producer` raises
`NoProducer` with the reason: the import checks are then not_run with it. On a machine with GPUs
the producer must be the EP's own GPU (an opaque fd is shared only within one device and driver):
`choose` matches a device UUID, or the EP device's PCI bus id (`VK_EXT_pci_bus_info`).
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

from conformance.errors import KitError
from conformance.testbed.interop.mapping import Mapped

# vulkan_core.h values (checked against the header by tests/test_interop.py)
VK_SUCCESS = 0
VK_STRUCTURE_TYPE_APPLICATION_INFO = 0
VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO = 2
VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO = 3
VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO = 5
VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2 = 1000059001
VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES = 1000071004
VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT = 1000212000
VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO = 1000072002
VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR = 1000074000
VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR = 1000074002
VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT = 0x00000001
VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT = 0x00000002
VK_MEMORY_PROPERTY_HOST_COHERENT_BIT = 0x00000004
VK_API_VERSION_1_1 = (1 << 22) | (1 << 12)
VK_WHOLE_SIZE = (1 << 64) - 1
EXTENSION = b"VK_KHR_external_memory_fd"
PCI_BUS_INFO = b"VK_EXT_pci_bus_info"

_u32, _u64, _ptr = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p


class _AppInfo(ctypes.Structure):
    _fields_ = [("sType", _u32), ("pNext", _ptr), ("pApplicationName", ctypes.c_char_p), ("applicationVersion", _u32),
                ("pEngineName", ctypes.c_char_p), ("engineVersion", _u32), ("apiVersion", _u32)]


class _InstanceInfo(ctypes.Structure):
    _fields_ = [("sType", _u32), ("pNext", _ptr), ("flags", _u32), ("pApplicationInfo", ctypes.POINTER(_AppInfo)),
                ("enabledLayerCount", _u32), ("ppEnabledLayerNames", _ptr), ("enabledExtensionCount", _u32),
                ("ppEnabledExtensionNames", _ptr)]


class _QueueInfo(ctypes.Structure):
    _fields_ = [("sType", _u32), ("pNext", _ptr), ("flags", _u32), ("queueFamilyIndex", _u32), ("queueCount", _u32),
                ("pQueuePriorities", ctypes.POINTER(ctypes.c_float))]


class _DeviceInfo(ctypes.Structure):
    _fields_ = [("sType", _u32), ("pNext", _ptr), ("flags", _u32), ("queueCreateInfoCount", _u32),
                ("pQueueCreateInfos", ctypes.POINTER(_QueueInfo)), ("enabledLayerCount", _u32), ("ppEnabledLayerNames", _ptr),
                ("enabledExtensionCount", _u32), ("ppEnabledExtensionNames", ctypes.POINTER(ctypes.c_char_p)), ("pEnabledFeatures", _ptr)]


class _IdProperties(ctypes.Structure):
    _fields_ = [("sType", _u32), ("pNext", _ptr), ("deviceUUID", ctypes.c_uint8 * 16), ("driverUUID", ctypes.c_uint8 * 16),
                ("deviceLUID", ctypes.c_uint8 * 8), ("deviceNodeMask", _u32), ("deviceLUIDValid", _u32)]


class _PciBusInfo(ctypes.Structure):
    _fields_ = [("sType", _u32), ("pNext", _ptr), ("pciDomain", _u32), ("pciBus", _u32), ("pciDevice", _u32), ("pciFunction", _u32)]


class _Properties2(ctypes.Structure):
    # VkPhysicalDeviceProperties is 824 bytes on x86-64; only deviceName (offset 20) is read.
    _fields_ = [("sType", _u32), ("pNext", _ptr), ("properties", ctypes.c_uint8 * 824)]


class _MemoryType(ctypes.Structure):
    _fields_ = [("propertyFlags", _u32), ("heapIndex", _u32)]


class _MemoryHeap(ctypes.Structure):
    _fields_ = [("size", _u64), ("flags", _u32)]


class _MemoryProperties(ctypes.Structure):
    _fields_ = [("memoryTypeCount", _u32), ("memoryTypes", _MemoryType * 32), ("memoryHeapCount", _u32), ("memoryHeaps", _MemoryHeap * 16)]


class _ExportInfo(ctypes.Structure):
    _fields_ = [("sType", _u32), ("pNext", _ptr), ("handleTypes", _u32)]


class _ImportFdInfo(ctypes.Structure):
    _fields_ = [("sType", _u32), ("pNext", _ptr), ("handleType", _u32), ("fd", ctypes.c_int)]


class _AllocateInfo(ctypes.Structure):
    _fields_ = [("sType", _u32), ("pNext", _ptr), ("allocationSize", _u64), ("memoryTypeIndex", _u32)]


class _GetFdInfo(ctypes.Structure):
    _fields_ = [("sType", _u32), ("pNext", _ptr), ("memory", _u64), ("handleType", _u32)]


class NoProducer(KitError):
    """No Vulkan device here exports opaque fds; the message says what is missing."""


class VulkanError(KitError, RuntimeError):
    def __init__(self, call: str, result: int):
        super().__init__(f"{call} returned VkResult {result}")
        self.call, self.result = call, result


@dataclass
class Allocation:
    """One exportable allocation: `size` bytes at Vulkan's mapping `address`."""
    memory: int
    size: int
    address: int


class Producer(Mapped):
    """A Vulkan device that allocates, fills, reads and exports memory. `name` and `uuid` say
    which device (the UUID matches a GPU EP's device on hardware)."""

    handle_type = "vk_memory_opaque_fd"

    def __init__(self, vk: ctypes.CDLL, instance: int | None, physical: int | None, device: int | None, memory_type: int, name: str, uuid: bytes):
        # handles as c_void_p: a bare int would be passed as a 32-bit C int
        self._vk, self.instance, self.physical, self.device = vk, _ptr(instance), _ptr(physical), _ptr(device)
        self.memory_type, self.name, self.uuid = memory_type, name, uuid
        get = vk.vkGetDeviceProcAddr
        get.restype, get.argtypes = _ptr, [_ptr, ctypes.c_char_p]
        address = get(device, b"vkGetMemoryFdKHR")
        if not address:
            raise NoProducer(f"{name}: vkGetMemoryFdKHR is missing although {EXTENSION.decode()} was enabled")
        self._get_fd = ctypes.CFUNCTYPE(ctypes.c_int, _ptr, ctypes.POINTER(_GetFdInfo), ctypes.POINTER(ctypes.c_int))(address)
        self._allocations: list[Allocation] = []

    def allocate(self, size: int, *, exportable: bool = True) -> Allocation:
        export = _ExportInfo(VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO, None, VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT)
        info = _AllocateInfo(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, ctypes.cast(ctypes.pointer(export), _ptr) if exportable else None,
                             size, self.memory_type)
        memory = _u64()
        _call(self._vk, "vkAllocateMemory", self.device, ctypes.byref(info), None, ctypes.byref(memory))
        address = _ptr()
        _call(self._vk, "vkMapMemory", self.device, memory, _u64(0), _u64(VK_WHOLE_SIZE), _u32(0), ctypes.byref(address))
        assert address.value is not None, "vkMapMemory succeeded: the mapping has an address"
        allocation = Allocation(memory.value, size, address.value)
        self._allocations.append(allocation)
        return allocation

    def export_fd(self, allocation: Allocation) -> int:
        """A new opaque fd of the allocation; the caller owns it (an import may take it)."""
        info = _GetFdInfo(VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR, None, allocation.memory, VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT)
        fd = ctypes.c_int(-1)
        result = self._get_fd(self.device, ctypes.byref(info), ctypes.byref(fd))
        if result != VK_SUCCESS:
            raise VulkanError("vkGetMemoryFdKHR", result)
        return fd.value

    def export(self, allocation: Allocation) -> int:
        """The native handle of an opaque-fd descriptor: a new fd for every import."""
        return self.export_fd(allocation)

    def free(self, allocation: Allocation) -> None:
        if allocation in self._allocations:
            self._allocations.remove(allocation)
            self._void("vkUnmapMemory", self.device, _u64(allocation.memory))
            self._void("vkFreeMemory", self.device, _u64(allocation.memory), None)

    def close(self) -> None:
        for allocation in list(self._allocations):
            self.free(allocation)
        self._void("vkDestroyDevice", self.device, None)
        self._void("vkDestroyInstance", self.instance, None)

    def _void(self, name: str, *args) -> None:
        function = getattr(self._vk, name)
        function.restype = None
        function(*args)


def _call(vk: ctypes.CDLL, name: str, *args) -> None:
    function = getattr(vk, name)
    function.restype = ctypes.c_int
    result = function(*args)
    if result != VK_SUCCESS:
        raise VulkanError(name, result)


def _device_extensions(vk: ctypes.CDLL, physical: int) -> set[bytes]:
    count = _u32()
    _call(vk, "vkEnumerateDeviceExtensionProperties", _ptr(physical), None, ctypes.byref(count), None)
    # VkExtensionProperties: char extensionName[256]; uint32_t specVersion
    buffer = (ctypes.c_char * (260 * count.value))()
    _call(vk, "vkEnumerateDeviceExtensionProperties", _ptr(physical), None, ctypes.byref(count), buffer)
    raw = bytes(buffer)
    return {raw[i * 260:i * 260 + 256].split(b"\0", 1)[0] for i in range(count.value)}


def _identity(vk: ctypes.CDLL, physical: int, extensions: set[bytes]) -> tuple[str, bytes, str | None]:
    """Name, UUID and PCI bus id ('0000:65:00.0'; None where the driver does not say) of a device."""
    pci = _PciBusInfo(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT, None)
    has_pci = PCI_BUS_INFO in extensions
    ids = _IdProperties(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES, ctypes.cast(ctypes.pointer(pci), _ptr) if has_pci else None)
    properties = _Properties2(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, ctypes.cast(ctypes.pointer(ids), _ptr))
    function = vk.vkGetPhysicalDeviceProperties2
    function.restype = None
    function(_ptr(physical), ctypes.byref(properties))
    name = bytes(properties.properties[20:276]).split(b"\0", 1)[0].decode(errors="replace")
    bus = f"{pci.pciDomain:04x}:{pci.pciBus:02x}:{pci.pciDevice:02x}.{pci.pciFunction:x}" if has_pci else None
    return name, bytes(ids.deviceUUID), bus


@dataclass(frozen=True)
class Candidate:
    """A Vulkan device as the producer choice sees it."""
    index: int
    name: str
    uuid: bytes
    pci_bus_id: str | None
    exports: bool  # VK_KHR_external_memory_fd and host-visible, coherent memory


def choose(candidates: list[Candidate], uuid: bytes | None = None, pci_bus_id: str | None = None) -> Candidate:
    """The producer for an EP device: the exporting device with that UUID, else the one on that
    PCI bus (the EP device's hardware `pci_bus_id`; memory is only shared within one GPU), else,
    where neither is known, the first exporting device. NoProducer says why there is none."""
    exporting = [c for c in candidates if c.exports]
    names = ", ".join(c.name for c in candidates) or "none"
    if uuid is not None:
        found = [c for c in exporting if c.uuid == uuid]
        if not found:
            raise NoProducer(f"no Vulkan device with UUID {uuid.hex()} exports opaque fds; devices: {names}")
        return found[0]
    if pci_bus_id:
        wanted = pci_bus_id.lower()
        found = [c for c in exporting if c.pci_bus_id == wanted]
        if found:
            return found[0]
        if any(c.pci_bus_id for c in candidates):
            raise NoProducer(f"no Vulkan device on PCI bus {wanted} (the EP device's) exports opaque fds; devices: "
                             + ", ".join(f"{c.name} ({c.pci_bus_id or 'no PCI bus id'})" for c in candidates))
        # no driver here says where its device is (lavapipe, under a made-up PCI id): the first
    if not exporting:
        raise NoProducer(f"no Vulkan device exports opaque fds from host-visible memory ({EXTENSION.decode()}); devices: {names}")
    return exporting[0]


def _host_visible_type(vk: ctypes.CDLL, physical: int) -> int | None:
    properties = _MemoryProperties()
    function = vk.vkGetPhysicalDeviceMemoryProperties
    function.restype = None
    function(_ptr(physical), ctypes.byref(properties))
    wanted = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
    for index in range(properties.memoryTypeCount):
        if properties.memoryTypes[index].propertyFlags & wanted == wanted:
            return index
    return None


def load_loader() -> ctypes.CDLL:
    try:
        return ctypes.CDLL("libvulkan.so.1")
    except OSError as exc:
        raise NoProducer(f"no Vulkan loader (libvulkan.so.1): {exc}") from None


def open_producer(uuid: bytes | None = None, pci_bus_id: str | None = None) -> Producer:
    """A producer on the Vulkan device `choose` picks."""
    vk = load_loader()
    app = _AppInfo(VK_STRUCTURE_TYPE_APPLICATION_INFO, None, b"ort-ep-conformance", 1, b"ort-ep-conformance", 1, VK_API_VERSION_1_1)
    info = _InstanceInfo(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, None, 0, ctypes.pointer(app), 0, None, 0, None)
    instance = _ptr()
    try:
        _call(vk, "vkCreateInstance", ctypes.byref(info), None, ctypes.byref(instance))
    except VulkanError as exc:
        raise NoProducer(f"vkCreateInstance failed (no Vulkan driver?): VkResult {exc.result}") from None
    try:
        count = _u32()
        _call(vk, "vkEnumeratePhysicalDevices", instance, ctypes.byref(count), None)
        physicals = (_ptr * count.value)()
        if count.value:
            _call(vk, "vkEnumeratePhysicalDevices", instance, ctypes.byref(count), physicals)
        candidates, memory_types = [], {}
        for index, physical in enumerate(physicals):
            extensions = _device_extensions(vk, physical)
            name, device_uuid, bus = _identity(vk, physical, extensions)
            memory_types[index] = _host_visible_type(vk, physical)
            candidates.append(Candidate(index, name, device_uuid, bus, EXTENSION in extensions and memory_types[index] is not None))
        chosen = choose(candidates, uuid, pci_bus_id)
    except (NoProducer, VulkanError):
        function = vk.vkDestroyInstance
        function.restype = None
        function(instance, None)
        raise
    physical = physicals[chosen.index]
    priority = ctypes.c_float(1.0)
    queue = _QueueInfo(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, None, 0, 0, 1, ctypes.pointer(priority))
    enabled = (ctypes.c_char_p * 1)(EXTENSION)
    device_info = _DeviceInfo(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, None, 0, 1, ctypes.pointer(queue), 0, None, 1, enabled, None)
    device = _ptr()
    _call(vk, "vkCreateDevice", _ptr(physical), ctypes.byref(device_info), None, ctypes.byref(device))
    memory_type = memory_types[chosen.index]
    assert memory_type is not None, "choose() takes only a device with a host-visible memory type"
    return Producer(vk, instance.value, physical, device.value, memory_type, chosen.name, chosen.uuid)


def import_fd(producer: Producer, fd: int, size: int) -> Allocation:
    """Imports an opaque fd into the producer's own device (a dup of it: lavapipe closes the fd
    it is given even when the import fails) and maps it: how refdev's importer reads such memory,
    here for the kit's tests of the driver."""
    duplicate = os.dup(fd)
    imported = _ImportFdInfo(VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR, None, VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT, duplicate)
    info = _AllocateInfo(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, ctypes.cast(ctypes.pointer(imported), _ptr), size, producer.memory_type)
    memory = _u64()
    try:
        _call(producer._vk, "vkAllocateMemory", producer.device, ctypes.byref(info), None, ctypes.byref(memory))
    except VulkanError:
        try:
            os.close(duplicate)
        except OSError:
            pass
        raise
    address = _ptr()
    _call(producer._vk, "vkMapMemory", producer.device, memory, _u64(0), _u64(VK_WHOLE_SIZE), _u32(0), ctypes.byref(address))
    assert address.value is not None, "vkMapMemory succeeded: the mapping has an address"
    allocation = Allocation(memory.value, size, address.value)
    producer._allocations.append(allocation)
    return allocation
