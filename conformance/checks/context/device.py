"""The EP device a check runs on: shared, as one object, by the parts of the check context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance import apis
from conformance.catalogue import versions
from conformance.facts import DeviceFacts
from conformance.testbed.eps import EpTarget
from conformance.findings import NotApplicable, NotRun


@dataclass
class DeviceUnderTest:
    """`device`: the OrtEpDevice, or None for a built-in provider get_ep_devices() does not list
    (a check that drops the library's devices sets it to None too); `facts`: what it advertises,
    as `eps.describe` gives it."""

    ort: Any
    target: EpTarget
    index: int
    device: Any
    facts: DeviceFacts

    @classmethod
    def of(cls, ort, target: EpTarget, index: int) -> "DeviceUnderTest":
        return cls(ort, target, index, target.devices[index] if target.devices else None, target.device_facts(index))

    def memory_info(self, kind: str):
        """The OrtMemoryInfo of a memory kind (cpu, default, host_accessible); None means plain CPU memory."""
        if kind == "cpu" or self.device is None:
            return None
        types = {"default": self.ort.OrtDeviceMemoryType.DEFAULT, "host_accessible": self.ort.OrtDeviceMemoryType.HOST_ACCESSIBLE}
        return self.device.memory_info(types[kind])

    def require_api(self, name: str, lacking: str) -> None:
        """When this onnxruntime build lacks API `name` (see `conformance.apis`): NotApplicable
        where the build is older than the API (the case is above the API level the run
        certifies), else NotRun, saying the build `lacking` (e.g. 'has no copy_tensors') and the
        version that has it."""
        if not self.target.has_api(name):
            version = self.ort.__version__
            if not versions.at_least(version, apis.since(name)):
                raise NotApplicable(f"{versions.below_api_level(apis.since(name), version, (name,))} (this build {lacking})")
            raise NotRun(f"onnxruntime {version} {lacking} (needs >= {apis.since(name)})")
