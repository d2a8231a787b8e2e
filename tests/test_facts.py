"""The EP and device facts as records (conformance.facts): their JSON is the shape the worker
protocol and report.json have always had, they read back what they wrote, and they read an
older or damaged file's without raising."""

from __future__ import annotations

import pytest

from conformance.facts import DeviceFacts, EpFacts, HardwareFacts, MemoryFacts, OnnxruntimeFacts, PackageFacts
from conformance.findings import Violation

GPU_MEMORY = MemoryFacts("DevMem", device_id=0, vendor_id=0xACE, device_mem_type="default", allocator_type="ort_device_allocator",
                         mem_type="default", device_type="gpu")
HOST_MEMORY = MemoryFacts("DevHost", device_id=0, vendor_id=0xACE, device_mem_type="host_accessible", device_type="gpu")
DEVICE = DeviceFacts(0, "acme", "AcmeExecutionProvider", "Acme", {"version": "1.2"}, {"mode": "fast"}, HardwareFacts("gpu", "Acme", 0xACE, 7),
                     GPU_MEMORY, HOST_MEMORY)
EP = EpFacts("acme", "AcmeExecutionProvider", "acme", declared=True, spec="specs/eps/acme.yaml", library="/x/libacme.so",
             library_sha256="ab" * 32, plugin_module="acme_ep", plugin_package=PackageFacts("acme-ep", "1.2"), ep_device=True,
             options={"mode": "fast"}, devices=(DEVICE,), onnxruntime=OnnxruntimeFacts("1.23.0", "onnxruntime", "build"),
             api={"copy_tensors": True, "memory_info_alloc": False})

# The keys the worker's init reply and report.json's `eps`/`devices` have carried; a record that
# wrote another shape would break every reader of older reports and every older worker.
EP_KEYS = ["requested", "provider", "label", "declared", "spec", "library", "library_sha256", "plugin_module", "plugin_package", "ep_device",
           "unusable", "options", "devices", "onnxruntime", "api"]
DEVICE_KEYS = ["index", "label", "ep_name", "ep_vendor", "ep_metadata", "ep_options", "hardware", "memory"]
MEMORY_KEYS = ["name", "device_id", "vendor_id", "device_mem_type", "allocator_type", "mem_type", "device_type"]


def test_the_facts_are_written_in_the_shape_readers_have_always_read_and_read_back_the_same():
    wire = EP.to_wire()
    assert list(wire) == EP_KEYS and list(wire["devices"][0]) == DEVICE_KEYS
    assert list(wire["devices"][0]["memory"]["default"]) == MEMORY_KEYS
    assert wire["devices"][0]["hardware"] == {"type": "gpu", "vendor": "Acme", "vendor_id": 0xACE, "device_id": 7}
    assert wire["plugin_package"] == {"name": "acme-ep", "version": "1.2"} and wire["onnxruntime"]["version"] == "1.23.0"
    assert EpFacts.from_wire(wire) == EP
    plain = DeviceFacts(0, "cpu", "CPUExecutionProvider")
    assert plain.to_wire()["memory"] == {"default": None, "host_accessible": None} and plain.to_wire()["hardware"] is None
    assert DeviceFacts.from_wire(plain.to_wire()) == plain


def test_the_cpu_eps_description_reads_back_as_it_was_written():
    pytest.importorskip("onnxruntime")
    from conformance.catalogue.spec import load_catalogue
    from conformance.testbed import eps

    target = eps.resolve("cpu", load_catalogue())
    described = eps.describe(target)
    assert described.provider == "CPUExecutionProvider" and described.devices and described.onnxruntime is not None
    assert list(described.to_wire()) == EP_KEYS
    assert EpFacts.from_wire(described.to_wire()) == described


@pytest.mark.parametrize("damaged", [None, "text", 3, ["a list"]])
def test_what_is_no_object_is_no_facts(damaged):
    assert EpFacts.from_wire(damaged) is None
    assert DeviceFacts.from_wire(damaged) is None
    assert MemoryFacts.from_wire(damaged) is None
    assert HardwareFacts.from_wire(damaged) is None


def test_a_damaged_or_older_file_reads_as_what_it_holds_and_empty_values_for_the_rest():
    wire = EP.to_wire()
    wire["devices"] = ["not a device", {"label": 5, "index": "one", "memory": {"default": "nonsense", "host_accessible": {"name": "Host"}},
                                        "ep_metadata": ["not", "a", "map"]}]
    wire["api"] = "all of them"
    del wire["onnxruntime"], wire["options"]
    ep = EpFacts.from_wire(wire)
    assert ep is not None and ep.api == {} and ep.onnxruntime is None and ep.options == {}
    (device,) = ep.devices  # the string is skipped: it is no device
    assert (device.index, device.label, device.ep_metadata, device.default_memory) == (1, "", {}, None)
    assert device.host_accessible_memory == MemoryFacts("Host", 0, 0, "", device_type="unknown")
    assert not ep.has_api("copy_tensors")


def test_a_violation_carries_the_memories_it_names_as_their_json():
    violation = Violation("wrong", memory={"source": GPU_MEMORY, "destination": None})
    assert violation.memory == {"source": GPU_MEMORY.to_wire(), "destination": None}
    assert Violation("wrong", memory={"source": GPU_MEMORY.to_wire()}).memory == {"source": GPU_MEMORY.to_wire()}
