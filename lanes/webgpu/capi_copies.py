#!/usr/bin/env python3
"""Standalone reproducer (no kit imports): the WebGPU plugin EP's CopyTensors through onnxruntime's
C API, with the EP library registered once, in the wheel's C library only (Python's onnxruntime is
imported to find that library and never registers the EP).

    python capi_copies.py threads [N]   N threads (default 4) each copy 16 float32 tensors of
                                        64 KiB cpu>default>cpu at once, 20 rounds; N=1 is the twin
    python capi_copies.py oversized     one uint8 tensor of 4 GiB + 4 KiB + 3 bytes from the shared
                                        allocator, filled with CopyTensors cpu>default and read back
    python capi_copies.py small         the same with 4 KiB + 3 bytes: the twin
    python capi_copies.py stats [cpu]   AllocatorGetStats of the EP device's shared allocator; with
                                        `cpu`, of onnxruntime's own CPU allocator: the twin

Run it inside the software GPU (`lanes/softgpu/exec python lanes/webgpu/capi_copies.py ...`) or on
a machine with a GPU. Exit 0: every copy right (or, for `stats`, the call returned); an
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
        "CreateCpuMemoryInfo": 69, "ReleaseValue": 96, "GetAllocatorWithDefaultOptions": 78,
        "RegisterExecutionProviderLibrary": 301, "GetEpDevices": 303, "EpDevice_EpName": 312, "AllocatorGetStats": 319,
        "EpDevice_MemoryInfo": 374, "GetSharedAllocator": 376, "CopyTensors": 386}
CAPI = os.path.join(os.path.dirname(ort.__file__), "capi")
lib = ctypes.CDLL(os.path.join(CAPI, sorted(f for f in os.listdir(CAPI) if f.startswith("libonnxruntime.so"))[0]))
lib.OrtGetApiBase.restype = ctypes.POINTER(P * 2)
api = ctypes.cast(ctypes.CFUNCTYPE(P, ctypes.c_uint32)(lib.OrtGetApiBase().contents[0])(24), ctypes.POINTER(P))


def fn(name, restype, *argtypes):
    return ctypes.CFUNCTYPE(restype, *argtypes)(api[SLOT[name]])


def capi(name, *args):
    status = fn(name, P, *[type(a) if isinstance(a, ctypes._SimpleCData) else P for a in args])(*args)
    if status:
        raise AssertionError(name + ": " + fn("GetErrorMessage", ctypes.c_char_p, P)(status).decode())


env = P()
capi("CreateEnv", ctypes.c_int(3), ctypes.c_char_p(b"repro"), ctypes.byref(env))
capi("RegisterExecutionProviderLibrary", env, ctypes.c_char_p(b"webgpu"), ctypes.c_char_p(webgpu.get_library_path().encode()))
devices, found = ctypes.POINTER(P)(), SIZE()
capi("GetEpDevices", env, ctypes.byref(devices), ctypes.byref(found))
device = next(devices[i] for i in range(found.value) if fn("EpDevice_EpName", ctypes.c_char_p, P)(devices[i]) == webgpu.get_ep_name().encode())
allocator = P()
capi("GetSharedAllocator", env, P(fn("EpDevice_MemoryInfo", P, P, ctypes.c_int)(device, 0)), ctypes.byref(allocator))  # DEFAULT
cpu_info = P()
capi("CreateCpuMemoryInfo", ctypes.c_int(0), ctypes.c_int(0), ctypes.byref(cpu_info))
release = fn("ReleaseValue", None, P)
ELEMENT = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2}


def device_tensor(count, dtype):
    value = P()
    capi("CreateTensorAsOrtValue", allocator, (ctypes.c_int64 * 1)(count), SIZE(1), ctypes.c_int(ELEMENT[np.dtype(dtype)]), ctypes.byref(value))
    return value


def host_tensor(array):
    value = P()
    capi("CreateTensorWithDataAsOrtValue", cpu_info, P(array.ctypes.data), SIZE(array.nbytes), (ctypes.c_int64 * 1)(array.size),
         SIZE(1), ctypes.c_int(ELEMENT[array.dtype]), ctypes.byref(value))
    return value


def copy(sources, destinations):
    n = len(sources)
    capi("CopyTensors", env, (P * n)(*sources), (P * n)(*destinations), None, SIZE(n))


def threads(count):
    pairs, rounds, elements = 16, 20, 16384
    failures = []

    def work(t):
        try:
            rng = np.random.default_rng(t)
            sources = [rng.random(elements, dtype=np.float32) for _ in range(pairs)]
            landings = [np.full(elements, -1, np.float32) for _ in range(pairs)]
            hosts_in, hosts_out = [host_tensor(a) for a in sources], [host_tensor(a) for a in landings]
            middles = [device_tensor(elements, np.float32) for _ in range(pairs)]
            for r in range(rounds):
                for a in sources:
                    a += 1
                for a in landings:
                    a[:] = -1
                copy(hosts_in, middles)
                copy(middles, hosts_out)
                for p in range(pairs):
                    assert np.array_equal(sources[p], landings[p]), f"thread {t}, round {r}, pair {p}: wrong bytes"
            for v in hosts_in + hosts_out + middles:
                release(v)
        except BaseException as exc:  # reported by the main thread
            failures.append(f"thread {t}: {exc}")

    workers = [threading.Thread(target=work, args=(t,)) for t in range(count)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not failures, "; ".join(failures)
    print(f"OK: {count} thread(s) at once, {pairs} pairs a call, {rounds} rounds: every copy right")


def one_tensor(nbytes):
    source = np.frombuffer(np.random.default_rng(1).bytes(4096), np.uint8)
    big = np.zeros(nbytes, np.uint8)
    big[:4096], big[-4096:] = source, source[::-1]
    middle = device_tensor(nbytes, np.uint8)
    print(f"allocated {nbytes:,} bytes from the shared allocator; CopyTensors cpu>default", flush=True)
    copy([host_tensor(big)], [middle])
    landing = np.zeros(nbytes, np.uint8)
    print("CopyTensors default>cpu", flush=True)
    copy([middle], [host_tensor(landing)])
    assert np.array_equal(landing[:4096], big[:4096]) and np.array_equal(landing[-4096:], big[-4096:]), "wrong bytes at the ends"
    print(f"OK: {nbytes:,} bytes copied there and back")


def stats(of_cpu):
    chosen = allocator
    if of_cpu:
        chosen = P()
        capi("GetAllocatorWithDefaultOptions", ctypes.byref(chosen))
    pairs = P()
    print("AllocatorGetStats of " + ("onnxruntime's CPU allocator" if of_cpu else "the WebGPU device's shared allocator"), flush=True)
    capi("AllocatorGetStats", chosen, ctypes.byref(pairs))  # the header: empty pairs where the allocator has no GetStats
    print("OK: AllocatorGetStats returned")


mode = sys.argv[1] if len(sys.argv) > 1 else "threads"
if mode == "threads":
    threads(int(sys.argv[2]) if len(sys.argv) > 2 else 4)
elif mode in ("oversized", "small"):
    one_tensor((4 << 30 if mode == "oversized" else 0) + 4096 + 3)
elif mode == "stats":
    stats(sys.argv[2:] == ["cpu"])
else:
    sys.exit(f"unknown mode {mode!r}: threads [N], oversized, small, stats [cpu]")
