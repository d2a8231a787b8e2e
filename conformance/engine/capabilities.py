"""The copy-capability matrix: which copy directions work, found by trying.

For every EP device, every (source, destination) pair among CPU memory, the device's DEFAULT
memory, its HOST_ACCESSIBLE memory and the DEFAULT memory of other EP devices present is tried
with `copy_tensors` on real bytes into a sentinel-filled destination. Each pair is:

- `supported`: the bytes arrived intact;
- `broken`: the copy claimed success but the bytes differ;
- `unverified`: the copy claimed success, but no way back to the CPU could read the bytes to check them;
- `required_but_missing`: refused, though the contract requires it (non-CPU DEFAULT memory);
- `not_required`: refused, and no copy is needed (both ends are CPU-visible memory);
- `unsupported`: refused, and no contract requires it.

Each pair also carries its throughput in GB/s per size class (`bandwidth.SIZE_CLASSES`), for
`copy_tensors` where the pair is supported and for `update_inplace(OrtValue)` where onnxruntime
does it, beside the host's memcpy of the same sizes (`host_memcpy`). The timing is short and
bounded (`THROUGHPUT_BUDGET_SECONDS` per device); a size that would not fit in what is left of
it is `null`. These figures inform; no contract is decided on them here.

Computed inside a worker (conformance.engine.serve); the parent's driver that asks workers for it is
conformance.run.probing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance.testbed import bandwidth, tensors
from conformance.calls import Call
from conformance.findings import message_line
from conformance.facts import MemoryFacts, memory_wire
from conformance.testbed.eps import memory_facts
from conformance.testbed.interop.probe import import_capabilities

PROBE_BYTES = 4096
THROUGHPUT_BUDGET_SECONDS = 1.5
LARGE_BYTES = 16 * bandwidth.MIB  # from here a copy is bound by bandwidth, not by each call's latency
STATUSES = ("supported", "unverified", "broken", "required_but_missing", "not_required", "unsupported")


@dataclass(frozen=True)
class Endpoint:
    """One memory to copy from and to: its name in the matrix, its memory info (None for plain
    CPU memory), whether the CPU reads it directly, and its facts for the report."""

    name: str
    info: Any
    cpu_visible: bool
    facts: MemoryFacts | None


def memory_endpoints(ctx) -> list[Endpoint]:
    endpoints = [Endpoint("cpu", None, True, None)]
    for kind in ("default", "host_accessible"):
        facts = ctx.memory_facts(kind)
        if facts is not None and not (kind == "default" and facts.on_cpu):
            endpoints.append(Endpoint(kind, ctx.memory_info(kind), kind == "host_accessible", facts))
    return endpoints + _other_devices(ctx)


def _other_devices(ctx) -> list[Endpoint]:
    """The DEFAULT memory of every other EP device present, of another EP or another device
    of this one (a second GPU), each once; named `<EP>:<memory name>:<device id>`."""
    seen = [f.identity() for f in (ctx.memory_facts("default"), ctx.memory_facts("host_accessible")) if f]
    others = []
    for device in ctx.ort.get_ep_devices():
        info = device.memory_info(ctx.ort.OrtDeviceMemoryType.DEFAULT)
        if info is None:
            continue
        facts = memory_facts(ctx.ort, info)
        assert facts is not None, "info is not None"
        if facts.identity() in seen:
            continue  # this device's own memory, or one already listed
        seen.append(facts.identity())
        others.append(Endpoint(f"{device.ep_name}:{facts.name}:{facts.device_id}", info, facts.on_cpu, facts))
    return others


def _required(ctx, source: str, destination: str) -> bool:
    device_default = not ctx.is_cpu_memory("default")
    if device_default and (source, destination) in (("cpu", "default"), ("default", "cpu"), ("default", "default")):
        return True
    declared = ctx.target.spec.copy_directions if ctx.target.spec and ctx.target.spec.copy_directions else ()
    return (source, destination) in declared


def _value(ctx, endpoint: Endpoint, storage: np.ndarray):
    dtype = tensors.DTYPES["uint8"]
    if endpoint.info is None:
        return ctx.wrap_cpu(storage, dtype)
    with ctx.calling(Call("allocate", endpoint.name)):
        return ctx.ort.OrtValue.ortvalue_from_shape_and_type(list(storage.shape), np.uint8, memory_info=endpoint.info)


def _try(ctx, source_end: Endpoint, destination_end: Endpoint) -> tuple[str, str]:
    """('copied' | 'unverified' | 'wrong_bytes' | 'refused', detail)."""
    dtype = tensors.DTYPES["uint8"]
    data = tensors.sample(dtype, (PROBE_BYTES,), seed=13)
    try:
        source = _value(ctx, source_end, data)
        if source_end.info is not None:
            ctx.copy([ctx.wrap_cpu(data, dtype)], [source], f"cpu>{source_end.name}")
        landing = tensors.sentinel(dtype, (PROBE_BYTES,), 0x5A)
        destination = _value(ctx, destination_end, landing)
    except Exception as exc:
        return "refused", f"could not set up the source or destination: {exc}"
    try:
        ctx.copy([source], [destination], f"{source_end.name}>{destination_end.name}")
    except Exception as exc:
        return "refused", message_line(exc)
    if destination_end.info is not None:
        landing = tensors.sentinel(dtype, (PROBE_BYTES,), 0xA5)
        try:
            ctx.copy([destination], [ctx.wrap_cpu(landing, dtype)], f"{destination_end.name}>cpu")
        except Exception as exc:
            return "unverified", f"the copy returned, but its result could not be read back to check it: {exc}"
    diff = tensors.compare(data.tobytes(), landing.tobytes())
    return ("wrong_bytes", diff.describe()) if diff else ("copied", f"{PROBE_BYTES} bytes intact")


def capability_matrix(ctx, sizes=None) -> dict[str, Any]:
    endpoints = memory_endpoints(ctx)
    pairs = []
    for source in endpoints:
        for destination in endpoints:
            result, detail = _try(ctx, source, destination)
            required = _required(ctx, source.name, destination.name)
            if result == "copied":
                status = "supported"
            elif result == "unverified":
                status = "unverified"
            elif result == "wrong_bytes":
                status = "broken"
            elif required:
                status = "required_but_missing"
            elif source.cpu_visible and destination.cpu_visible:
                status = "not_required"
            else:
                status = "unsupported"
            pair = {"source": source.name, "destination": destination.name, "status": status, "required": required, "detail": detail}
            if status == "not_required":
                # Said in the kit's words: onnxruntime's own refusal ("... not supported") reads
                # like a defect to an application author, where nothing is wrong.
                pair.update(detail=not_required_detail(source.name, destination.name), refusal=detail)
            pairs.append(pair)
    sizes = bandwidth.SIZE_CLASSES if sizes is None else tuple(sizes)
    return {
        "ep": ctx.target.provider,
        "device": ctx.facts.label,
        "memories": {e.name: memory_wire(e.facts) for e in endpoints},
        "pairs": pairs,
        "host_memcpy": _time_copies(ctx, {e.name: e.info for e in endpoints}, pairs, sizes),
        "imports": imports_or_why_not(ctx),
    }


def imports_or_why_not(ctx) -> dict[str, Any]:
    """The interop API's answer (conformance/testbed/interop/probe.py), or, where asking it raised,
    a `not_run` answer naming what could not be computed and why: the copy matrix computed
    before it is kept, whatever the import question does. (A call quarantined after a crash
    is not an exception here: it stops the probe as everywhere else.)"""
    try:
        return import_capabilities(ctx)
    except Exception as exc:
        return {"status": "not_run", "reason": f"the import capabilities could not be computed: {message_line(exc)}",
                "handle_types": [], "tensor_memory": None, "copies": []}


def not_required_detail(source: str, destination: str) -> str:
    ends = f"{source} memory is" if source == destination else f"{source} and {destination} memory are"
    return (f"no copy needed: {ends} read by the CPU directly, so an application uses the bytes in place (or copies them "
            "on the host); copy_tensors declines such a pair, and no contract asks it to")


def _time_copies(ctx, infos: dict[str, Any], pairs: list[dict[str, Any]], sizes: tuple[int, ...]) -> dict[str, float]:
    """pair['throughput'][method][size label] = GB/s, within the time budget (None past it);
    returns host memcpy's GB/s at each size.

    Size by size, every pair and method at one size before the next size, so that a budget
    spent on a slow device leaves the large sizes unmeasured, not whole directions. The
    measurements of a size share its host arrays (bandwidth.HostBuffers)."""
    if not sizes:
        return {}
    deadline = time.monotonic() + THROUGHPUT_BUDGET_SECONDS
    for pair in pairs:
        methods = ("copy_tensors", "update_inplace") if pair["status"] == "supported" else ("update_inplace",)
        pair["throughput"] = {method: {} for method in methods}
    memcpy = {}
    for nbytes in sizes:
        label = bandwidth.size_label(nbytes)
        host = bandwidth.HostBuffers(nbytes)
        # One copy of a bandwidth-bound size lasts milliseconds and varies less than a few
        # microseconds' copies do: the best of two trials there, of three below.
        trials = 2 if nbytes >= LARGE_BYTES else 3
        for pair in pairs:
            for method, figures in list(pair["throughput"].items()):
                # Timed when its warm-up and one trial fit, at the speed of the largest size
                # timed so far: a small size's figure is bound by each call's latency, and would
                # predict a large copy many times slower than it is.
                timed = [f for f in figures.values() if f]
                expected = 2 * nbytes / (timed[-1] * 1e9) if timed else 0.0
                if time.monotonic() + expected > deadline:
                    figures[label] = None
                    continue
                with ctx.calling(Call(f"{method} ortvalue" if method == "update_inplace" else method, f"{pair['source']}>{pair['destination']}")):
                    measured = bandwidth.throughput(ctx, infos[pair["source"]], infos[pair["destination"]], method, nbytes,
                                                    trials=trials, budget=max(0.0, min(0.2, deadline - time.monotonic())), host=host)
                if "error" in measured:
                    del pair["throughput"][method]  # onnxruntime does not copy this way
                else:
                    figures[label] = measured["gbps"]
        memcpy[label] = bandwidth.significant(bandwidth.host_memcpy(nbytes, trials=trials, budget=0.05, host=host))
    return memcpy
