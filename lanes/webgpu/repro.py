#!/usr/bin/env python3
"""Standalone reproducers (no kit imports) of the WebGPU plugin EP's stress-tier findings, each mode
beside its lawful twin. Each registers the EP library once: `sessions` in Python's onnxruntime only,
the others in the wheel's C library only (Python's onnxruntime is imported to find that library and
never registers the EP there).

    python repro.py sessions [serial]   two sessions of Add+Relu run at once from two threads, 24 runs
                                        each; `serial`: one thread after the other (the twin)
    python repro.py threads [N]         N threads (default 4) each CopyTensors 16 float32 tensors of
                                        64 KiB cpu>default>cpu at once, 20 rounds; N=1 is the twin
    python repro.py oversized           one uint8 tensor of 4 GiB + 4 KiB + 3 bytes from the shared
                                        allocator, filled with CopyTensors cpu>default and read back
    python repro.py small               the same with 4 KiB + 3 bytes (the twin)
    python repro.py stats [cpu]         AllocatorGetStats of the EP device's shared allocator (a finding
                                        against onnxruntime 1.32); `cpu`: of onnxruntime's CPU allocator

Run it inside the software GPU (`lanes/softgpu/exec .lanes/venvs/webgpu/bin/python lanes/webgpu/repro.py
MODE`) or on a machine with a GPU. Exit 0: every result right (for `stats`, the call returned); an
AssertionError or a signal otherwise.
"""
import ctypes
import os
import sys
import threading

import numpy as np
import onnxruntime as ort
import onnxruntime_ep_webgpu as webgpu

P, SIZE = ctypes.c_void_p, ctypes.c_size_t
# OrtApi slot indices, from onnxruntime_c_api.h (the table only grows at its end)
SLOT = {"GetErrorMessage": 2, "CreateEnv": 3, "CreateTensorAsOrtValue": 48, "CreateTensorWithDataAsOrtValue": 49,
        "CreateCpuMemoryInfo": 69, "GetAllocatorWithDefaultOptions": 78, "ReleaseValue": 96,
        "RegisterExecutionProviderLibrary": 301, "GetEpDevices": 303, "EpDevice_EpName": 312, "AllocatorGetStats": 319,
        "EpDevice_MemoryInfo": 374, "GetSharedAllocator": 376, "CopyTensors": 386}
ELEMENT = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2}


def at_once(work, count):
    """work(t) on `count` threads started together; an AssertionError naming every failure."""
    failures = []

    def guarded(t):
        try:
            work(t)
        except BaseException as exc:  # reported by the main thread
            failures.append(f"thread {t}: {exc}")

    workers = [threading.Thread(target=guarded, args=(t,)) for t in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not failures, "; ".join(failures)


class CApi:
    """The wheel's C library with the EP registered in an environment of its own; the EP device's
    DEFAULT shared allocator; tensors and CopyTensors."""

    def __init__(self):
        capi_dir = os.path.join(os.path.dirname(ort.__file__), "capi")
        lib = ctypes.CDLL(os.path.join(capi_dir, sorted(f for f in os.listdir(capi_dir) if f.startswith("libonnxruntime.so"))[0]))
        lib.OrtGetApiBase.restype = ctypes.POINTER(P * 2)
        self.api = ctypes.cast(ctypes.CFUNCTYPE(P, ctypes.c_uint32)(lib.OrtGetApiBase().contents[0])(24), ctypes.POINTER(P))
        self.env = P()
        self("CreateEnv", ctypes.c_int(3), ctypes.c_char_p(b"repro"), ctypes.byref(self.env))
        self("RegisterExecutionProviderLibrary", self.env, ctypes.c_char_p(b"webgpu"), ctypes.c_char_p(webgpu.get_library_path().encode()))
        devices, found = ctypes.POINTER(P)(), SIZE()
        self("GetEpDevices", self.env, ctypes.byref(devices), ctypes.byref(found))
        name = self.fn("EpDevice_EpName", ctypes.c_char_p, P)
        device = next(devices[i] for i in range(found.value) if name(devices[i]) == webgpu.get_ep_name().encode())
        self.allocator = P()
        self("GetSharedAllocator", self.env, P(self.fn("EpDevice_MemoryInfo", P, P, ctypes.c_int)(device, 0)), ctypes.byref(self.allocator))
        self.cpu_info = P()
        self("CreateCpuMemoryInfo", ctypes.c_int(0), ctypes.c_int(0), ctypes.byref(self.cpu_info))
        self.release = self.fn("ReleaseValue", None, P)

    def fn(self, name, restype, *argtypes):
        return ctypes.CFUNCTYPE(restype, *argtypes)(self.api[SLOT[name]])

    def __call__(self, name, *args):  # a status-returning function: an AssertionError with its message
        status = self.fn(name, P, *[type(a) if isinstance(a, ctypes._SimpleCData) else P for a in args])(*args)
        if status:
            raise AssertionError(name + ": " + self.fn("GetErrorMessage", ctypes.c_char_p, P)(status).decode())

    def device_tensor(self, count, dtype):
        value = P()
        self("CreateTensorAsOrtValue", self.allocator, (ctypes.c_int64 * 1)(count), SIZE(1), ctypes.c_int(ELEMENT[np.dtype(dtype)]),
             ctypes.byref(value))
        return value

    def host_tensor(self, array):
        value = P()
        self("CreateTensorWithDataAsOrtValue", self.cpu_info, P(array.ctypes.data), SIZE(array.nbytes), (ctypes.c_int64 * 1)(array.size),
             SIZE(1), ctypes.c_int(ELEMENT[array.dtype]), ctypes.byref(value))
        return value

    def copy(self, sources, destinations):
        n = len(sources)
        self("CopyTensors", self.env, (P * n)(*sources), (P * n)(*destinations), None, SIZE(n))


def sessions(serial):
    from onnx import TensorProto, helper

    runs, shape = 24, [256, 512]
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], "add_relu",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("a", "b")],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    ort.register_execution_provider_library("webgpu", webgpu.get_library_path())
    device = next(d for d in ort.get_ep_devices() if d.ep_name == webgpu.get_ep_name())
    made = []
    for _ in range(2):
        options = ort.SessionOptions()
        options.add_provider_for_devices([device], {})
        made.append(ort.InferenceSession(model.SerializeToString(), options))

    def work(t):
        rng = np.random.default_rng(t)
        for run in range(runs):
            a, b = rng.standard_normal(shape, dtype=np.float32), rng.standard_normal(shape, dtype=np.float32)
            (y,) = made[t].run(None, {"a": a, "b": b})
            assert np.allclose(y, np.maximum(a + b, 0)), f"session {t}, run {run}: wrong output"

    if serial:
        for t in range(2):
            work(t)
    else:
        at_once(work, 2)
    print(f"OK: 2 sessions, {runs} runs each, {'one after the other' if serial else 'at once'}: every output right")


def threads(count):
    c, pairs, rounds, elements = CApi(), 16, 20, 16384

    def work(t):
        rng = np.random.default_rng(t)
        sources = [rng.random(elements, dtype=np.float32) for _ in range(pairs)]
        landings = [np.full(elements, -1, np.float32) for _ in range(pairs)]
        hosts_in, hosts_out = [c.host_tensor(a) for a in sources], [c.host_tensor(a) for a in landings]
        middles = [c.device_tensor(elements, np.float32) for _ in range(pairs)]
        for r in range(rounds):
            for a in sources:
                a += 1
            for a in landings:
                a[:] = -1
            c.copy(hosts_in, middles)
            c.copy(middles, hosts_out)
            for p in range(pairs):
                assert np.array_equal(sources[p], landings[p]), f"round {r}, pair {p}: wrong bytes"
        for v in hosts_in + hosts_out + middles:
            c.release(v)

    at_once(work, count)
    print(f"OK: {count} thread(s) at once, {pairs} pairs a call, {rounds} rounds: every copy right")


def one_tensor(nbytes):
    c = CApi()
    source = np.zeros(nbytes, np.uint8)
    source[:4096] = np.frombuffer(np.random.default_rng(1).bytes(4096), np.uint8)
    source[-4096:] = source[:4096][::-1].copy()
    middle = c.device_tensor(nbytes, np.uint8)
    print(f"allocated {nbytes:,} bytes from the shared allocator; CopyTensors cpu>default", flush=True)
    c.copy([c.host_tensor(source)], [middle])
    landing = np.zeros(nbytes, np.uint8)
    print("CopyTensors default>cpu", flush=True)
    c.copy([middle], [c.host_tensor(landing)])
    assert np.array_equal(landing[:4096], source[:4096]) and np.array_equal(landing[-4096:], source[-4096:]), "wrong bytes at the ends"
    print(f"OK: {nbytes:,} bytes copied there and back")


def stats(of_cpu):
    c = CApi()
    chosen = c.allocator
    if of_cpu:
        chosen = P()
        c("GetAllocatorWithDefaultOptions", ctypes.byref(chosen))
    pairs = P()
    print("AllocatorGetStats of " + ("onnxruntime's CPU allocator" if of_cpu else "the WebGPU device's shared allocator"), flush=True)
    c("AllocatorGetStats", chosen, ctypes.byref(pairs))  # the header: empty pairs where the allocator has no GetStats
    print("OK: AllocatorGetStats returned")


mode, rest = (sys.argv[1] if len(sys.argv) > 1 else ""), sys.argv[2:]
if mode == "sessions":
    sessions(rest == ["serial"])
elif mode == "threads":
    threads(int(rest[0]) if rest else 4)
elif mode in ("oversized", "small"):
    one_tensor((4 << 30 if mode == "oversized" else 0) + 4096 + 3)
elif mode == "stats":
    stats(rest == ["cpu"])
else:
    sys.exit(f"usage: repro.py sessions [serial] | threads [N] | oversized | small | stats [cpu] (not {mode!r})")
