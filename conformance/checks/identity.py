"""Identity: what each accessor says of a memory is what the EP device advertised for it.

The reference is the EP device's memory info read through the C API (EpDevice_MemoryInfo and
the MemoryInfoGet* functions, from the onnxruntime library of the same wheel, in an environment
of its own): its name, device type, memory type, vendor and device id. Python's
OrtEpDevice.memory_info() must say the same; OrtValue.device_name() of a value allocated there
must name its device type (or the EP family of that vendor's devices, e.g. 'cuda' for NVIDIA's
GPUs); and a session input or output onnxruntime places in that memory must carry the same
memory info. Python's OrtMemoryInfo has no device type, and its OrtValue no memory info, so
device_name() is the only word Python gives on where a value is.
"""

from __future__ import annotations

from typing import Any, Iterator

from conformance.testbed import tensors
from conformance.calls import Call
from conformance.checks.registry import check
from conformance.findings import NotApplicable, Violation
from conformance.testbed.interop import capi as C
from conformance.testbed.interop import rig
from conformance.checks.context import CheckContext
from conformance import proofs

# What OrtValue.device_name() may say beside the device type: the name of the EP family that a
# vendor's devices of that type belong to (PCI vendor ids: NVIDIA 0x10de, Huawei 0x19e5).
VENDOR_NAMES = {("gpu", 0x10DE): {"cuda"}, ("npu", 0x19E5): {"cann"}}
PLAIN_CPU_NAMES = {"cpu"}  # the memory info name of onnxruntime's CPU allocator ('Cpu')


def device_names(device_type: str, vendor_id: int, memory_name: str = "") -> set[str]:
    """The device type, the EP family of that vendor's devices, or the family the memory info's
    own name begins with (WebGPU's 'WebGPU_Buf' is 'webgpu' memory): each names the memory truly."""
    family = memory_name.lower().split("_")[0]
    return {device_type} | VENDOR_NAMES.get((device_type, vendor_id), set()) | ({family} if family else set())


def _python_identity(info) -> dict[str, Any]:
    return {"name": info.name, "memory_type": info.device_mem_type.name.lower(), "vendor_id": int(info.device_vendor_id),
            "device_id": int(info.device_id)}


def _differences(said: dict[str, Any], advertised: dict[str, Any]) -> str:
    return ", ".join(f"{key} {said[key]!r} (advertised {advertised[key]!r})" for key in said if said[key] != advertised[key])


def label(facts: dict[str, Any]) -> str:
    return f"{facts['name']} ({facts['device_type']}, vendor 0x{facts['vendor_id']:04x}, device {facts['device_id']}, {facts['memory_type']})"


@check("memory-info.identity", apis=("memory_info_alloc",))
def identity(ctx: CheckContext, memory: str, recipe: str = "relu") -> Iterator[Violation]:
    ctx.require_memory(memory)
    info = ctx.memory_info(memory)
    if info is None:
        raise NotApplicable(f"the EP device advertises no {memory.upper()} memory info: its values are plain CPU memory, named by nothing of the EP")
    api, _env, device = rig.c_device(ctx)
    with ctx.calling(Call("EpDevice_MemoryInfo", memory)):
        advertised = C.ep_device_memory(api, device, memory)
    snippet = _snippet(ctx, memory, advertised)
    ctx.attempt(f"reading what the accessors say of {memory} memory", snippet)
    if advertised is None:
        yield Violation(f"OrtEpDevice.memory_info({memory.upper()}) gives a memory info that the C API's EpDevice_MemoryInfo does not",
                        expected="the same memory info through both", actual=f"Python: {info.name}; C: none", reproducer=snippet)
        return
    ctx.prove(proofs.ADVERTISED, label(advertised))
    said = _python_identity(info)
    if _differences(said, advertised):
        yield Violation(f"OrtEpDevice.memory_info({memory.upper()}) says {_differences(said, advertised)}", expected=label(advertised),
                        actual=str(said), reproducer=snippet)
    value = ctx.allocate(memory, tensors.DTYPES["float32"], (2,))
    with ctx.calling(Call("OrtValue.device_name", memory)):
        name = value.device_name()
    names = device_names(advertised["device_type"], advertised["vendor_id"], advertised["name"])
    ctx.prove(proofs.DEVICE_NAME, name)
    if name.lower() not in names:
        yield Violation(f"device_name() of a value in {memory} memory ({label(advertised)}) says {name!r}",
                        expected=" or ".join(repr(n) for n in sorted(names)), actual=repr(name), reproducer=snippet)
    yield from _session_identities(ctx, memory, advertised, recipe, snippet)


def _session_identities(ctx: CheckContext, memory: str, advertised: dict[str, Any], recipe: str, snippet: str) -> Iterator[Violation]:
    """A session input or output in this memory (not plain CPU memory, the memory type the
    same) carries the advertised memory info."""
    info = ctx.session(recipe, tensors.DTYPES["float32"], (2, 3))
    ctx.require_nodes_on_ep(info)
    snippet = ctx.snippets.script(
        f"the session's inputs and outputs in {memory.upper()} memory carry the memory info the EP device advertised",
        f"{ctx.session_snippet(info.model_path)}\nADVERTISED = {advertised!r}  # read through the C API's EpDevice_MemoryInfo\n"
        "for which, infos in (('input', s.get_input_memory_infos()), ('output', s.get_output_memory_infos())):\n"
        "    for m in infos:\n"
        "        said = dict(name=m.name, memory_type=m.device_mem_type.name.lower(), vendor_id=m.device_vendor_id, device_id=m.device_id)\n"
        "        if said['name'].lower() != 'cpu' and said['memory_type'] == ADVERTISED['memory_type']:\n"
        "            assert all(said[k] == ADVERTISED[k] for k in said), f'session {which}: expected {ADVERTISED}, got {said}'")
    for which, infos in (("input", info.session.get_input_memory_infos()), ("output", info.session.get_output_memory_infos())):
        for index, mi in enumerate(infos):
            said = _python_identity(mi)
            if said["name"].lower() in PLAIN_CPU_NAMES or said["memory_type"] != advertised["memory_type"]:
                continue
            ctx.prove_item(proofs.SESSION_MEMORY, f"{which} {index}", said["name"])
            if _differences(said, advertised):
                yield Violation(f"session {which} {index}'s memory info says {_differences(said, advertised)}", expected=label(advertised),
                                actual=str(said), reproducer=snippet)


def _snippet(ctx: CheckContext, memory: str, advertised: dict[str, Any] | None) -> str:
    """Python's accessors against what the C API read of the EP device's memory info."""
    kind = memory.upper()
    if advertised is None:
        return ctx.snippets.script(f"OrtEpDevice.memory_info({kind}) and the C API agree",
                                   f"assert {kind} is None, 'the C API says the EP device has no {kind} memory info'")
    names = sorted(device_names(advertised["device_type"], advertised["vendor_id"], advertised["name"]))
    body = [f"ADVERTISED = {advertised!r}  # the EP device's memory info, as the C API's EpDevice_MemoryInfo and MemoryInfoGet* read it",
            f"said = dict(name={kind}.name, memory_type={kind}.device_mem_type.name.lower(), vendor_id={kind}.device_vendor_id, device_id={kind}.device_id)",
            "assert all(said[k] == ADVERTISED[k] for k in said), f'OrtEpDevice.memory_info: expected {ADVERTISED}, got {said}'",
            f"v = works('allocating', ort.OrtValue.ortvalue_from_shape_and_type, [2], np.float32, memory_info={kind})",
            f"NAMES = {names!r}  # the device type, the EP family of that vendor's devices or of the memory's name",
            f"assert v.device_name().lower() in NAMES, f'device_name() of a value in {kind} memory: expected one of {{NAMES}}, got {{v.device_name()!r}}'",
            "print('the accessors name the memory the EP advertised')"]
    return ctx.snippets.script(f"the accessors of {kind} memory report what the EP device advertised", "\n".join(body))
