"""What an EP and its devices advertise, as typed records: `EpFacts`, its `DeviceFacts` and
their `MemoryFacts`.

The worker describes the EP it loaded (`conformance.testbed.eps.describe`) and answers the
parent's init request with it; the parent keeps it for the report (report.json's `eps` and
`devices`), applicability and waivers. `to_wire` is that JSON, key for key as report.schema.json
and the worker protocol have it; `from_wire` reads it back, tolerant of an older or partial
file's (a key missing takes its empty value, a memory or hardware that is no object is None, a
device that is no object is skipped) so that a reader of files on disk never raises on them.

A leaf: every floor that handles facts names these types, the catalogue's selectors included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MEMORY_KINDS = ("default", "host_accessible")


@dataclass(frozen=True)
class MemoryFacts:
    """One OrtMemoryInfo as the kit reports it: its name, device id and vendor id, which memory of
    the device (`device_mem_type`: default or host_accessible), the allocator and memory types
    onnxruntime gives it, and the hardware type it lives on (`device_type`: cpu, gpu, npu, or
    unknown; eps.memory_device_type says how the kit learns it)."""

    name: str
    device_id: int
    vendor_id: int
    device_mem_type: str
    allocator_type: str = ""
    mem_type: str = ""
    device_type: str = "unknown"

    @property
    def on_cpu(self) -> bool:
        return self.device_type == "cpu"

    def identity(self) -> tuple[str, str, int, int, str]:
        """What tells two memories apart: the same identity is the same memory of the same device."""
        return (self.name, self.device_type, self.vendor_id, self.device_id, self.device_mem_type)

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "device_id": self.device_id, "vendor_id": self.vendor_id, "device_mem_type": self.device_mem_type,
                "allocator_type": self.allocator_type, "mem_type": self.mem_type, "device_type": self.device_type}

    @classmethod
    def from_wire(cls, wire: Any) -> MemoryFacts | None:
        """None for plain CPU memory (null on the wire) and for what is no object."""
        if isinstance(wire, MemoryFacts):
            return wire
        if not isinstance(wire, dict):
            return None
        return cls(_text(wire.get("name")), _int(wire.get("device_id")), _int(wire.get("vendor_id")), _text(wire.get("device_mem_type")),
                   _text(wire.get("allocator_type")), _text(wire.get("mem_type")), _text(wire.get("device_type")) or "unknown")


def memory_wire(memory: MemoryFacts | None) -> dict[str, Any] | None:
    """A memory's facts as a violation or evidence carries them (None: plain CPU memory)."""
    return None if memory is None else memory.to_wire()


@dataclass(frozen=True)
class HardwareFacts:
    """The OrtHardwareDevice under an EP device: its type (cpu, gpu, npu), vendor and ids."""

    type: str
    vendor: str = ""
    vendor_id: int = 0
    device_id: int = 0

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.type, "vendor": self.vendor, "vendor_id": self.vendor_id, "device_id": self.device_id}

    @classmethod
    def from_wire(cls, wire: Any) -> HardwareFacts | None:
        if not isinstance(wire, dict):
            return None
        return cls(_text(wire.get("type")), _text(wire.get("vendor")), _int(wire.get("vendor_id")), _int(wire.get("device_id")))


@dataclass(frozen=True)
class DeviceFacts:
    """One EP device: its index among the EP's, the kit's label for it, the EP's name, vendor,
    metadata and options as the device gives them, its hardware (None for a built-in provider
    get_ep_devices() does not list) and its memories (`memory`: by kind, None where the device
    has none of that kind or its memory is plain CPU memory)."""

    index: int
    label: str
    ep_name: str = ""
    ep_vendor: str | None = None
    ep_metadata: dict[str, str] = field(default_factory=dict)
    ep_options: dict[str, str] = field(default_factory=dict)
    hardware: HardwareFacts | None = None
    default_memory: MemoryFacts | None = None
    host_accessible_memory: MemoryFacts | None = None

    def memory(self, kind: str) -> MemoryFacts | None:
        """The facts of memory `kind` (default or host_accessible; cpu is plain CPU memory: None)."""
        return {"default": self.default_memory, "host_accessible": self.host_accessible_memory}.get(kind)

    @property
    def ep_version(self) -> str | None:
        """The version the EP's metadata gives, where it gives one."""
        return self.ep_metadata.get("version")

    def to_wire(self) -> dict[str, Any]:
        return {"index": self.index, "label": self.label, "ep_name": self.ep_name, "ep_vendor": self.ep_vendor,
                "ep_metadata": dict(self.ep_metadata), "ep_options": dict(self.ep_options),
                "hardware": self.hardware.to_wire() if self.hardware else None,
                "memory": {kind: memory_wire(self.memory(kind)) for kind in MEMORY_KINDS}}

    @classmethod
    def from_wire(cls, wire: Any, index: int = 0) -> DeviceFacts | None:
        if isinstance(wire, DeviceFacts):
            return wire
        if not isinstance(wire, dict):
            return None
        memory = wire.get("memory")
        memory = memory if isinstance(memory, dict) else {}
        return cls(_int(wire.get("index"), index), _text(wire.get("label")), _text(wire.get("ep_name")),
                   wire.get("ep_vendor") if isinstance(wire.get("ep_vendor"), str) else None,
                   _strings(wire.get("ep_metadata")), _strings(wire.get("ep_options")), HardwareFacts.from_wire(wire.get("hardware")),
                   MemoryFacts.from_wire(memory.get("default")), MemoryFacts.from_wire(memory.get("host_accessible")))


@dataclass(frozen=True)
class OnnxruntimeFacts:
    """The onnxruntime a worker loaded: its version, the distribution that installed it, and
    get_build_info()'s text."""

    version: str = ""
    package: str = ""
    build: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {"version": self.version, "package": self.package, "build": self.build}

    @classmethod
    def from_wire(cls, wire: Any) -> OnnxruntimeFacts | None:
        if not isinstance(wire, dict):
            return None
        return cls(_text(wire.get("version")), _text(wire.get("package")), _text(wire.get("build")))


@dataclass(frozen=True)
class PackageFacts:
    """The distribution that installed a plugin EP's Python module, and its version."""

    name: str
    version: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}

    @classmethod
    def from_wire(cls, wire: Any) -> PackageFacts | None:
        if not isinstance(wire, dict):
            return None
        return cls(_text(wire.get("name")), _text(wire.get("version")))


@dataclass(frozen=True)
class EpFacts:
    """An EP as its worker described it: the name asked for, its provider and label, whether the
    catalogue declares it and which spec file did, its library (and digest) or Python plugin
    module and the distribution that installed that, whether get_ep_devices() lists it (`ep_device`), why it cannot run here
    (`unusable`), the --ep-option values, its devices (at least one), the onnxruntime loaded
    (None where no worker said, as before the EP is probed) and which of the kit's APIs that
    build has (`api`, conformance.apis' names)."""

    requested: str
    provider: str
    label: str
    declared: bool = False
    spec: str | None = None
    library: str | None = None
    library_sha256: str | None = None
    plugin_module: str | None = None
    plugin_package: PackageFacts | None = None
    ep_device: bool = True  # as readers have taken facts that do not say (an EP not yet probed)
    unusable: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    devices: tuple[DeviceFacts, ...] = ()
    onnxruntime: OnnxruntimeFacts | None = None
    api: dict[str, bool] = field(default_factory=dict)

    def has_api(self, name: str) -> bool:
        """Whether this onnxruntime build has API `name` (False where the facts do not say)."""
        return bool(self.api.get(name))

    @property
    def onnxruntime_version(self) -> str | None:
        return self.onnxruntime.version if self.onnxruntime else None

    def to_wire(self) -> dict[str, Any]:
        return {"requested": self.requested, "provider": self.provider, "label": self.label, "declared": self.declared, "spec": self.spec,
                "library": self.library, "library_sha256": self.library_sha256, "plugin_module": self.plugin_module,
                "plugin_package": self.plugin_package.to_wire() if self.plugin_package else None, "ep_device": self.ep_device,
                "unusable": self.unusable, "options": dict(self.options),
                "devices": [device.to_wire() for device in self.devices],
                "onnxruntime": self.onnxruntime.to_wire() if self.onnxruntime else None, "api": dict(self.api)}

    @classmethod
    def from_wire(cls, wire: Any) -> EpFacts | None:
        """None for what is no object."""
        if isinstance(wire, EpFacts):
            return wire
        if not isinstance(wire, dict):
            return None
        devices, api = wire.get("devices"), wire.get("api")
        devices, api = devices if isinstance(devices, list) else [], api if isinstance(api, dict) else {}
        return cls(_text(wire.get("requested")), _text(wire.get("provider")), _text(wire.get("label")), bool(wire.get("declared")),
                   _optional_text(wire.get("spec")), _optional_text(wire.get("library")), _optional_text(wire.get("library_sha256")),
                   _optional_text(wire.get("plugin_module")), PackageFacts.from_wire(wire.get("plugin_package")), bool(wire.get("ep_device", True)),
                   _optional_text(wire.get("unusable")), _strings(wire.get("options")),
                   tuple(device for index, item in enumerate(devices) if (device := DeviceFacts.from_wire(item, index)) is not None),
                   OnnxruntimeFacts.from_wire(wire.get("onnxruntime")), {str(name): bool(has) for name, has in api.items()})


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _optional_text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
