#!/usr/bin/env python3
"""Smoke test for the software-GPU lane (WebGPU plugin EP on Mesa lavapipe).

Run it inside the lane:

    lanes/softgpu/exec /path/to/venv/bin/python lanes/softgpu/smoke.py

Needs only onnxruntime, onnxruntime_ep_webgpu, onnx and numpy. Checks that the
WebGPU plugin EP lists a device, reports its memory infos, runs an Add node
(verified through the session's graph assignment info), and that WebGPU
OrtValues can be allocated, copied (CPU->GPU, GPU->GPU, GPU->CPU) byte-exact
and updated in place without moving. Exit code 0 only if every check held.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import traceback

import numpy as np
import onnx
import onnxruntime as ort
import onnxruntime_ep_webgpu as webgpu_ep
from onnx import TensorProto, helper

EP_NAME = webgpu_ep.get_ep_name()
DTYPES = [np.float32, np.float16, np.int64, np.uint8, np.bool_]
SHAPES = [(), (0,), (5, 7, 3), (2, 3, 4, 5)]

results: list[tuple[str, bool, str]] = []


def check(name: str, ok: bool, detail: str = "") -> bool:
    results.append((name, ok, detail))
    print(f"  [{'PASS' if ok else 'FAIL'}] {name}{(': ' + detail) if detail else ''}", flush=True)
    return ok


def attempt(name: str, fn) -> bool:
    """Run fn(); a raised exception is a failed check with its message."""
    try:
        ok, detail = fn()
    except Exception as exc:  # noqa: BLE001 - every failure becomes a report line
        msg = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        return check(name, False, msg[:400])
    return check(name, ok, detail)


def describe_memory_info(mi) -> str:
    if mi is None:
        return "None"
    return (
        f"name={mi.name!r} device_mem_type={mi.device_mem_type.name} "
        f"device_vendor_id=0x{mi.device_vendor_id:04x} device_id={mi.device_id} "
        f"mem_type={mi.mem_type.name} allocator_type={mi.allocator_type.name}"
    )


def sample(shape, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return (rng.standard_normal(size=shape) * 100).astype(dtype)


def cpu_value_from(arr: np.ndarray):
    return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(arr))


def cpu_empty(shape, dtype):
    return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype)


def gpu_empty(shape, dtype, mem_info):
    return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, memory_info=mem_info)


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def main() -> int:
    print("software-GPU smoke test (WebGPU plugin EP on a software Vulkan device; not real GPU hardware)")
    print(f"  onnxruntime {ort.__version__}, onnxruntime-ep-webgpu "
          f"{importlib.metadata.version('onnxruntime-ep-webgpu')}, onnx {onnx.__version__}, numpy {np.__version__}")
    print(f"  ORT_CONFORMANCE_SOFTWARE_GPU={os.environ.get('ORT_CONFORMANCE_SOFTWARE_GPU')!r} "
          f"mesa={os.environ.get('SOFTGPU_MESA_VERSION')!r}")

    ort.register_execution_provider_library(EP_NAME, webgpu_ep.get_library_path())

    print("EP devices:")
    devices = ort.get_ep_devices()
    for d in devices:
        hw = d.device
        print(f"  ep={d.ep_name} ep_vendor={d.ep_vendor!r} device_type={hw.type.name} "
              f"vendor={hw.vendor!r} vendor_id=0x{hw.vendor_id:04x} device_id=0x{hw.device_id:04x}")
        if hw.metadata:
            print(f"    hw metadata: {dict(hw.metadata)}")
        if d.ep_metadata:
            print(f"    ep metadata: {dict(d.ep_metadata)}")
        for mt in (ort.OrtDeviceMemoryType.DEFAULT, ort.OrtDeviceMemoryType.HOST_ACCESSIBLE):
            print(f"    memory_info({mt.name}): {describe_memory_info(d.memory_info(mt))}")

    webgpu = [d for d in devices if d.ep_name == EP_NAME]
    if not check("WebGPU EP device listed", bool(webgpu),
                 f"{len(webgpu)} device(s)" if webgpu else
                 "no WebGPU EP device (no GPU in /sys/class/drm, or no usable Vulkan adapter)"):
        return 1
    dev = webgpu[0]
    gpu_mem = dev.memory_info(ort.OrtDeviceMemoryType.DEFAULT)
    if not check("WebGPU DEFAULT memory info present", gpu_mem is not None, describe_memory_info(gpu_mem)):
        return 1

    # ------------------------------------------------------------ session
    print("Session (Add):")
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"], name="add0")],
        "softgpu_add",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)

    def run_session():
        so = ort.SessionOptions()
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        so.add_provider_for_devices([dev], {})
        sess = ort.InferenceSession(model.SerializeToString(), sess_options=so)
        print(f"    providers: {sess.get_providers()}")
        for kind, infos in (("inputs", sess.get_input_memory_infos()), ("outputs", sess.get_output_memory_infos())):
            for mi in infos:
                print(f"    {kind} memory: {describe_memory_info(mi)}")
        assigned = {}
        for sg in sess.get_provider_graph_assignment_info():
            for node in sg.get_nodes():
                assigned[node.name] = sg.ep_name
        print(f"    node assignment: {assigned}")
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = np.full((2, 3), 0.5, dtype=np.float32)
        (c,) = sess.run(None, {"a": a, "b": b})
        ok = assigned.get("add0") == EP_NAME and np.array_equal(c, a + b)
        return ok, f"add0 on {assigned.get('add0')}, result {'matches' if np.array_equal(c, a + b) else 'WRONG'}"

    attempt("Add node runs on WebGpuExecutionProvider with the right result", run_session)

    # ------------------------------------------------------------ allocation
    def alloc():
        v = gpu_empty((2, 3), np.float32, gpu_mem)
        flag = getattr(v, "_is_webgpu_buffer", "?")
        flag = flag() if callable(flag) else flag
        return v.is_tensor() and v.data_ptr() != 0, (
            f"shape={v.shape()} type={v.data_type()} device_name={v.device_name()!r} "
            f"_is_webgpu_buffer={flag}")

    attempt("allocate a WebGPU OrtValue from memory_info(DEFAULT)", alloc)

    # ------------------------------------------------------------ copies
    print("copy_tensors CPU->GPU->GPU->CPU (byte-exact):")
    for dtype in DTYPES:
        for shape in SHAPES:
            def copies(dtype=dtype, shape=shape):
                src = sample(shape, dtype, seed=len(shape) * 7 + np.dtype(dtype).itemsize)
                g1 = gpu_empty(shape, dtype, gpu_mem)
                g2 = gpu_empty(shape, dtype, gpu_mem)
                out = cpu_empty(shape, dtype)
                ort.copy_tensors([cpu_value_from(src)], [g1])   # CPU -> GPU
                ort.copy_tensors([g1], [g2])                    # GPU -> GPU
                ort.copy_tensors([g2], [out])                   # GPU -> CPU
                got = out.numpy()
                # also GPU -> CPU straight from the first value
                out1 = cpu_empty(shape, dtype)
                ort.copy_tensors([g1], [out1])
                ok = same_bytes(src, got) and same_bytes(src, out1.numpy())
                return ok, f"{src.nbytes} bytes"
            attempt(f"{np.dtype(dtype).name:8s} shape={shape}", copies)

    # ------------------------------------------------------------ update_inplace
    print("update_inplace:")
    shape = (3, 5)
    for dtype in DTYPES:
        def from_numpy(dtype=dtype):
            v = gpu_empty(shape, dtype, gpu_mem)
            ptr = v.data_ptr()
            src = sample(shape, dtype, seed=11)
            v.update_inplace(src)
            out = cpu_empty(shape, dtype)
            ort.copy_tensors([v], [out])
            return v.data_ptr() == ptr and same_bytes(src, out.numpy()), f"data_ptr kept={v.data_ptr() == ptr}"

        def from_ortvalue(dtype=dtype):
            dst = gpu_empty(shape, dtype, gpu_mem)
            ptr = dst.data_ptr()
            src = sample(shape, dtype, seed=12)
            other = gpu_empty(shape, dtype, gpu_mem)
            ort.copy_tensors([cpu_value_from(src)], [other])
            dst.update_inplace(other)
            out = cpu_empty(shape, dtype)
            ort.copy_tensors([dst], [out])
            return dst.data_ptr() == ptr and same_bytes(src, out.numpy()), f"data_ptr kept={dst.data_ptr() == ptr}"

        attempt(f"{np.dtype(dtype).name:8s} from numpy", from_numpy)
        attempt(f"{np.dtype(dtype).name:8s} from a WebGPU OrtValue", from_ortvalue)

    failed = [r for r in results if not r[1]]
    print(f"summary: {len(results) - len(failed)}/{len(results)} checks passed")
    for name, _, detail in failed:
        print(f"  failed: {name}: {detail}")
    return 0 if not failed else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        sys.exit(1)
