"""Find, load and describe the EP under test.

Built-in providers are found by alias or provider name, plugin EP packages through their
`get_library_path()` / `get_ep_name()`, and an unreleased library through `--ep-library`.
`describe()` reports what each EP device advertises (`conformance.facts.EpFacts`). This module runs inside the
worker process; it knows nothing of contracts or reports.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance import apis
from conformance.findings import message_line
from conformance.catalogue.contracts import Catalogue, EpSpec
from conformance.options import reason_of
from conformance.errors import KitError
from conformance.facts import DeviceFacts, EpFacts, HardwareFacts, MemoryFacts, OnnxruntimeFacts, PackageFacts

ONNXRUNTIME_FLAVOURS = (
    "onnxruntime (CPU; `pip install ort-ep-conformance[cpu]`)",
    "onnxruntime-gpu (CUDA, TensorRT)",
    "onnxruntime-openvino (OpenVINO)",
    "onnxruntime-webgpu, or onnxruntime with onnxruntime-ep-webgpu (WebGPU)",
    "onnxruntime-directml (DirectML, Windows)",
    "onnxruntime-qnn (QNN)",
)


class EpUnavailable(KitError):
    """The EP cannot be used here; the message says why and what to do."""


def import_onnxruntime():
    try:
        import onnxruntime
    except ImportError as exc:
        flavours = "\n  ".join(ONNXRUNTIME_FLAVOURS)
        raise EpUnavailable(
            f"onnxruntime is not importable ({exc}). Install exactly one flavour, each in its own "
            f"virtual environment (they overwrite each other):\n  {flavours}"
        ) from None
    return onnxruntime


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class EpTarget:
    requested: str
    provider: str
    spec: EpSpec | None
    devices: list[Any]
    options: dict[str, str]
    library: str | None = None
    library_sha256: str | None = None
    registration: str | None = None
    plugin_module: str | None = None
    facts: EpFacts | None = None  # what describe() found, once a worker or runner loaded the EP
    unusable: str | None = None  # why the EP cannot run here although the build lists it

    def has_api(self, name: str) -> bool:
        """Whether the onnxruntime the EP was described under has API `name` (False before it is described)."""
        return self.facts is not None and self.facts.has_api(name)

    def device_facts(self, index: int) -> DeviceFacts:
        """What EP device `index` advertises, as describe() found it."""
        if self.facts is None:
            raise KitError(f"EP {self.requested} was not described yet: load it (Runner) before asking its devices' facts")
        return self.facts.devices[index]

    @property
    def provider_options(self) -> dict[str, str]:
        """The --ep-option values for the provider itself."""
        return {k: v for k, v in self.options.items() if not k.startswith("session.")}

    @property
    def session_config(self) -> dict[str, str]:
        """The --ep-option values whose keys start with 'session.': session config entries."""
        return {k: v for k, v in self.options.items() if k.startswith("session.")}

    @property
    def label(self) -> str:
        if self.spec:
            return self.spec.name
        name = self.provider
        for suffix in ("ExecutionProvider", "_EP"):
            name = name[: -len(suffix)] if name.endswith(suffix) else name
        return name.lower() or self.requested.lower()

    def device_label(self, index: int) -> str:
        return self.label if len(self.devices) <= 1 else f"{self.label}{index}"


def installed_plugin_modules() -> list[str]:
    """Top-level modules of installed packages that look like plugin EP packages."""
    import importlib.metadata  # only here: importing it is about 20 ms of a worker's start-up

    found = set()
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("-", "_")
        if name.startswith("onnxruntime_ep_") or name == "onnxruntime_ggml":
            top = (dist.read_text("top_level.txt") or name).split()
            found.update(top or [name])
    return sorted(found)


def _plugin(module_name: str) -> tuple[str, str]:
    """(library path, EP name) of a plugin EP package. onnxruntime's own packages expose
    get_library_path()/get_ep_name(); onnxruntime-ggml exposes library_path() and EP_NAME."""
    module = importlib.import_module(module_name)
    if hasattr(module, "get_library_path"):
        return module.get_library_path(), module.get_ep_name()
    return module.library_path(), module.EP_NAME


def _module_of(library: str) -> str | None:
    """The installed plugin package module whose library `library` is, if any."""
    for module_name in installed_plugin_modules():
        try:
            path, _ = _plugin(module_name)
            if os.path.samefile(path, library):
                return module_name
        except Exception:  # a broken package, or a path that is not there
            continue
    return None


def plugin_package(module_name: str) -> PackageFacts | None:
    """The distribution that installed plugin module `module_name`, and its version."""
    import importlib.metadata  # only here: see installed_plugin_modules

    for dist in importlib.metadata.packages_distributions().get(module_name, []):
        try:
            return PackageFacts(dist, importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def as_installed(ort, catalogue: Catalogue, spec: EpSpec | None) -> EpSpec | None:
    """The spec of the EP as it is installed here: an EP that ships both built into an
    onnxruntime build and as a plugin package (OpenVINO) is the plugin where this build does not
    list the provider and the plugin package is installed (`--ep=openvino` with
    onnxruntime-ep-openvino); otherwise `spec` itself. Each has its own spec: their memory
    models differ."""
    if spec is None or spec.plugin_module or spec.provider in ort.get_available_providers():
        return spec
    plugin = next((ep for ep in catalogue.eps if ep.provider == spec.provider and ep.plugin_module), None)
    if plugin is None or importlib.util.find_spec(plugin.plugin_module) is None:  # type: ignore[arg-type]
        return spec
    return plugin


def resolve(name: str, catalogue: Catalogue, *, library: str | None = None, options: dict[str, str] | None = None) -> EpTarget:
    ort = import_onnxruntime()
    module = _module_of(library) if library else None  # the library of an installed plugin package is that package's EP
    spec = catalogue.ep_spec(name) if library else as_installed(ort, catalogue, catalogue.ep_spec(name))
    if module:
        spec = next((ep for ep in catalogue.eps if ep.plugin_module == module and spec is not None and ep.provider == spec.provider), spec)
    provider = spec.provider if spec else name
    target = EpTarget(name, provider, spec, [], dict(options or {}))
    listed_before = {d.ep_name for d in ort.get_ep_devices()} if library else set()
    if library:
        registration = f"conformance-{os.path.basename(library)}"
        _register_library(ort, target, library, registration=registration)
        added = {d.ep_name for d in ort.get_ep_devices()} - listed_before
        if provider not in added and added == {registration}:
            # An EP that takes its registration name as its own (onnxruntime-ggml): registered
            # again under the name asked for, as its package registers it.
            ort.unregister_execution_provider_library(registration)
            _register_library(ort, target, library, registration=provider)
        target.plugin_module = module
    elif spec and spec.plugin_module:
        try:
            path, ep_name = _plugin(spec.plugin_module)
        except ImportError:
            raise EpUnavailable(f"EP '{name}' comes from a plugin package that is not installed: {install_hint(spec)}") from None
        target.plugin_module = spec.plugin_module
        target.provider = ep_name
        _register_library(ort, target, path, registration=ep_name)
    elif not _listed(ort, provider):
        for module_name in installed_plugin_modules():
            try:
                path, ep_name = _plugin(module_name)
            except Exception:  # a broken third-party package must not stop the search
                continue
            if ep_name.lower() in (name.lower(), provider.lower()):
                target.plugin_module, target.provider = module_name, ep_name
                _register_library(ort, target, path, registration=ep_name)
                break
    target.devices = [d for d in ort.get_ep_devices() if d.ep_name == target.provider]
    provided = sorted({d.ep_name for d in ort.get_ep_devices()} - listed_before) if library else []
    if library and (target.provider in listed_before or not target.devices):
        # --ep-library=LIB --ep X --ep cpu: LIB is registered in every EP's worker, but it is the
        # library of the EP whose devices it added, not of the CPU EP, whose contracts are then
        # not the plugin library's (lifecycle.*, import.* of a plugin EP).
        target.library = target.library_sha256 = target.registration = None
    if not target.devices and target.provider not in ort.get_available_providers():
        raise EpUnavailable(unknown_ep_message(name, catalogue, ort, library, provided))
    if not target.devices:
        target.unusable = fallback_reason(ort, target)
    return target


def fallback_reason(ort, target: EpTarget) -> str | None:
    """Why a built-in provider that the build lists cannot run here, or None when it can.

    onnxruntime-gpu lists CUDAExecutionProvider on a machine without a GPU or CUDA libraries;
    a session asked for it logs an error and silently runs on the CPU EP (microsoft/onnxruntime
    issue 23372). The session's own provider list is what tells: a provider missing from it
    was never created."""
    options = ort.SessionOptions()
    options.log_severity_level = 4  # the kit reports the fallback itself
    try:
        session = ort.InferenceSession(probe_model(), options, providers=[(target.provider, target.provider_options)])
    except Exception as exc:
        return f"a session for {target.provider} could not be created: {message_line(exc)}"
    if target.provider not in session.get_providers():
        package = package_name(ort)
        return (f"{target.provider} is listed by {package} {ort.__version__} but is not functional here: a session "
                f"created for it silently fell back to {', '.join(session.get_providers())} (its hardware or libraries are missing)")
    return None


def _listed(ort, provider: str) -> bool:
    return provider in ort.get_available_providers() or any(d.ep_name == provider for d in ort.get_ep_devices())


def _register_library(ort, target: EpTarget, path: str, registration: str) -> None:
    if not os.path.exists(path):
        raise EpUnavailable(f"EP library not found: {path}")
    if not os.path.isfile(path):
        raise EpUnavailable(f"EP library {path} is not a file (a shared library is expected)")
    target.library = os.path.abspath(path)
    try:
        target.library_sha256 = sha256_of(path)
    except OSError as exc:
        raise EpUnavailable(f"EP library {path} cannot be read: {reason_of(exc)}") from None
    target.registration = registration
    try:
        ort.register_execution_provider_library(registration, target.library)
    except Exception as exc:  # onnxruntime raises its own exception types here
        raise EpUnavailable(f"onnxruntime could not load EP library {path}: {exc}") from None


def available(catalogue: Catalogue, ort=None) -> list[str]:
    """EP names usable here: built-in providers, EP devices, and installed plugin packages."""
    ort = ort or import_onnxruntime()
    names = set(ort.get_available_providers()) | {d.ep_name for d in ort.get_ep_devices()}
    for module_name in installed_plugin_modules():
        try:
            names.add(_plugin(module_name)[1])
        except Exception:
            continue
    labelled = []
    for provider in sorted(names):
        spec = catalogue.ep_spec(provider)
        labelled.append(f"{spec.name} ({provider})" if spec else provider)
    return labelled


def unknown_ep_message(name: str, catalogue: Catalogue, ort, library: str | None, provided: list[str] | None = None) -> str:
    """Why EP `name` is not here, its first line whole on its own (`ort-conformance init` gives
    that line alone); `provided`: the EPs whose devices `library` added, when one was registered."""
    spec = catalogue.ep_spec(name)
    if spec and not library:
        lines = [f"EP '{name}' ({spec.provider}) is not in this onnxruntime build ({package_name(ort)} {ort.__version__}): "
                 + install_hint(spec)]
    elif library and provided:
        lines = [f"unknown EP '{name}': library {library} provides {', '.join(provided)}, no EP of that name"]
    elif library:
        lines = [f"EP library {library} lists no EP device here: its factories' GetSupportedDevices gave none for this machine's devices"]
    else:
        lines = [f"unknown EP '{name}'"]
    lines.append(f"available here (onnxruntime {ort.__version__}): " + ", ".join(available(catalogue, ort)))
    if spec:
        lines.append(f"'{name}' is {spec.summary.rstrip('.')}")
    else:
        hints = [f"{ep.name}: {', '.join(ep.packages)}" for ep in catalogue.eps if ep.packages]
        lines.append("EPs the kit knows and the packages that provide them:\n  " + "\n  ".join(hints))
    lines.append("a plugin EP library of your own: --ep-library=PATH --ep EP_NAME")
    return "\n".join(lines)


def install_hint(spec: EpSpec) -> str:
    if not spec.packages:
        return "no PyPI package provides it; see its spec: " + spec.summary
    if spec.plugin_module:
        return f"pip install {' '.join(p for p in spec.packages if p != 'onnxruntime')} (a plugin package, beside onnxruntime)"
    return (f"pip install {' or '.join(spec.packages)}, in a virtual environment of its own "
            "(onnxruntime builds overwrite each other's `onnxruntime` package)")


# --- what the EP advertises -----------------------------------------------------------------


def memory_label(facts: MemoryFacts | dict[str, Any] | None) -> str:
    """How reports and messages name a memory: 'WebGPU_Buf (gpu, vendor 0x0000, device 0, default)'.
    The parent's readers (reports, drafts, the fleet table) still hold memories as their wire
    dicts, read here through the record."""
    memory = MemoryFacts.from_wire(facts)
    if memory is None:
        return "plain CPU memory"
    return f"{memory.name} ({memory.device_type}, vendor 0x{memory.vendor_id:04x}, device {memory.device_id}, {memory.device_mem_type})"


def memory_facts(ort, info) -> MemoryFacts | None:
    if info is None:
        return None
    return MemoryFacts(info.name, int(info.device_id), int(info.device_vendor_id), info.device_mem_type.name.lower(),
                       info.allocator_type.name.lower(), info.mem_type.name.lower(), memory_device_type(ort, info))


def memory_device_type(ort, info) -> str:
    """cpu, gpu or npu. OrtMemoryInfo does not expose its device type in Python, so the kit
    allocates one byte from it and asks the value (`device_name()` says 'cuda' for any
    GPU-typed memory); when allocation fails it falls back to the name onnxruntime gives
    CPU memory."""
    import numpy  # here, not at the top: the pytest process imports this module for reports

    try:
        value = ort.OrtValue.ortvalue_from_shape_and_type([1], numpy.uint8, memory_info=info)
        device = value.device_name().lower()
    except Exception:
        return "cpu" if info.name.lower() == "cpu" else "unknown"
    return DEVICE_NAMES.get(device, device)


# What OrtValue.device_name() says, by hardware type (it names the first EP of each kind).
DEVICE_NAMES = {"cpu": "cpu", "cuda": "gpu", "gpu": "gpu", "webgpu": "gpu", "dml": "gpu", "migraphx": "gpu", "npu": "npu", "cann": "npu"}


def spec_used(spec: EpSpec) -> str:
    """Where the EP's spec was written, and the shipped spec it replaces when a vendor's does."""
    return f"{spec.location}" + (f" (overrides the shipped {spec.overrides.path})" if spec.overrides else "")


def describe(target: EpTarget) -> EpFacts:
    ort = import_onnxruntime()
    devices = []
    for index, device in enumerate(target.devices):
        hardware = device.device
        devices.append(DeviceFacts(
            index, target.device_label(index), device.ep_name, device.ep_vendor, dict(device.ep_metadata), dict(device.ep_options),
            HardwareFacts(hardware.type.name.lower(), hardware.vendor, int(hardware.vendor_id), int(hardware.device_id)),
            default_memory=memory_facts(ort, device.memory_info(ort.OrtDeviceMemoryType.DEFAULT)),
            host_accessible_memory=memory_facts(ort, device.memory_info(ort.OrtDeviceMemoryType.HOST_ACCESSIBLE))))
    if not devices:
        # A built-in provider that get_ep_devices() does not list (older builds, or hardware
        # absent): checks create sessions with providers=[...] and learn memory from them.
        devices.append(DeviceFacts(0, target.label, target.provider))
    return EpFacts(
        requested=target.requested,
        provider=target.provider,
        label=target.label,
        declared=target.spec is not None,
        spec=spec_used(target.spec) if target.spec else None,
        library=target.library,
        library_sha256=target.library_sha256,
        plugin_module=target.plugin_module,
        plugin_package=plugin_package(target.plugin_module) if target.plugin_module else None,
        ep_device=bool(target.devices),
        unusable=target.unusable,
        options=target.options,
        devices=tuple(devices),
        onnxruntime=OnnxruntimeFacts(ort.__version__, package_name(ort), ort.get_build_info()),
        api=apis.support(ort),
    )


def package_name(ort) -> str:
    """The distribution that installed the onnxruntime module in use, from the dist-info folder
    beside it (not from importlib.metadata, which would also find a flavour installed elsewhere
    on the path, and whose import is about 20 ms of a worker's start-up)."""
    module_file = getattr(ort, "__file__", None)
    site = Path(module_file).resolve().parent.parent if module_file else None
    installed = {folder.name.split("-")[0].lower().replace("_", "-") for folder in site.glob("onnxruntime*.dist-info")} if site else set()
    for dist in ("onnxruntime-gpu", "onnxruntime-openvino", "onnxruntime-webgpu", "onnxruntime-directml", "onnxruntime-qnn", "onnxruntime"):
        if dist in installed:
            return dist
    return getattr(ort, "package_name", "onnxruntime")


def probe_model() -> bytes:
    """One float Identity node, opset 13, IR version 8: a model every provider takes. Written
    without onnx (onnx_wire), whose import the packaging checks would otherwise pay."""
    from conformance.testbed import onnx_wire

    value = {name: onnx_wire.value_info(name, 1, [1]) for name in ("x", "y")}  # 1: TensorProto.FLOAT
    return onnx_wire.model([onnx_wire.node("Identity", ["x"], ["y"])], "probe", [value["x"]], [value["y"]], [], ir_version=8, opset=13)
