#!/usr/bin/env python3
"""Shows that each of RefDev's stress fault modes bites: the same demonstration in two children,
one with ORT_REFDEV_FAULT=MODE and one without, and the figures of each.

Uses only onnxruntime, numpy and onnx (onnx for race-kernel's model). Copies go through
onnxruntime's C API with ctypes, which releases the GIL during the call, so that copies from
several threads really overlap (the Python `copy_tensors` holds the GIL). Examples:

    python stress_smoke.py --fault race      # 4 threads copying at once: wrong bytes with the fault, none without
    python stress_smoke.py --all             # every stress mode but size32
    python stress_smoke.py --all --large     # size32 too: about 8.5 GiB of memory for a minute

Modes and what each demonstration shows:
  leak         RSS growth per CopyTensors call over 2,000 calls, after 200 to warm up
  race         4 threads, each copying its own byte pattern CPU->RefDev->CPU: wrong bytes
  race-kernel  4 threads, each running its own Add+Relu session on its own inputs: wrong outputs
  affinity     a copy on the registering thread works; a copy on a new thread fails
  size32       a 4 GiB + 4 KiB + 3 byte CPU->RefDev copy: destination bytes left unwritten
  nth          ORT_REFDEV_NTH (default 8000) copies work; the next copy and an allocation fail

Exit status: 0 when every mode showed its misbehaviour with the fault and none without it, 1
otherwise; a mode skipped for want of memory counts as neither.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LIB = os.path.join(HERE, "build", "libort_refdev_ep.so")
EP_NAME = "RefDevExecutionProvider"
KEY = 0x5A  # RefDev stores DEFAULT-memory bytes XOR this key
MODES = ["leak", "race", "race-kernel", "affinity", "size32", "nth"]
P = ctypes.c_void_p
UINT8 = 2  # ONNXTensorElementDataType

# OrtApi slot indices, from onnxruntime_c_api.h: the table only grows at its end, so they hold in
# every version that has the function (C API 23, onnxruntime 1.23, has them all).
SLOT = {"GetErrorMessage": 2, "CreateEnv": 3, "CreateTensorAsOrtValue": 48, "CreateTensorWithDataAsOrtValue": 49,
        "GetTensorMutableData": 51, "CreateCpuMemoryInfo": 69, "ReleaseEnv": 92, "ReleaseStatus": 93, "ReleaseValue": 96,
        "RegisterExecutionProviderLibrary": 301, "GetEpDevices": 303, "EpDevice_EpName": 312, "EpDevice_MemoryInfo": 374,
        "GetSharedAllocator": 376, "CopyTensors": 386}
API_VERSION = 23


class OrtError(RuntimeError):
    pass


class CApi:
    """The C library of the installed onnxruntime wheel, an environment with RefDev registered
    in it on the calling thread, and RefDev's DEFAULT allocator."""

    def __init__(self, lib_path):
        import onnxruntime as ort

        capi = os.path.join(os.path.dirname(ort.__file__), "capi")
        name = sorted(f for f in os.listdir(capi) if f.startswith("libonnxruntime.so"))[0]
        lib = ctypes.CDLL(os.path.join(capi, name))
        lib.OrtGetApiBase.restype = ctypes.POINTER(P * 2)
        self.api = ctypes.cast(ctypes.CFUNCTYPE(P, ctypes.c_uint32)(lib.OrtGetApiBase().contents[0])(API_VERSION), ctypes.POINTER(P))
        self._message = ctypes.CFUNCTYPE(ctypes.c_char_p, P)(self.api[SLOT["GetErrorMessage"]])
        self._release_status = ctypes.CFUNCTYPE(None, P)(self.api[SLOT["ReleaseStatus"]])
        self.release_value = ctypes.CFUNCTYPE(None, P)(self.api[SLOT["ReleaseValue"]])
        # built once: CFUNCTYPE calls release the GIL, which is what lets threads overlap in them
        self._copy = ctypes.CFUNCTYPE(P, P, P, P, P, ctypes.c_size_t)(self.api[SLOT["CopyTensors"]])
        self.env = P()
        self.call("CreateEnv", ctypes.c_int(3), ctypes.c_char_p(b"stress-smoke"), ctypes.byref(self.env))
        # a relative path would be taken relative to the C library's folder
        path = os.path.abspath(lib_path).encode()
        self.call("RegisterExecutionProviderLibrary", self.env, ctypes.c_char_p(b"refdev"), ctypes.c_char_p(path))
        devices, count = ctypes.POINTER(P)(), ctypes.c_size_t()
        self.call("GetEpDevices", self.env, ctypes.byref(devices), ctypes.byref(count))
        name_of = ctypes.CFUNCTYPE(ctypes.c_char_p, P)(self.api[SLOT["EpDevice_EpName"]])
        device = [devices[i] for i in range(count.value) if name_of(devices[i]) == EP_NAME.encode()][0]
        info = ctypes.CFUNCTYPE(P, P, ctypes.c_int)(self.api[SLOT["EpDevice_MemoryInfo"]])(device, 0)  # DEFAULT
        self.allocator = P()
        self.call("GetSharedAllocator", self.env, P(info), ctypes.byref(self.allocator))
        self.cpu_info = P()
        self.call("CreateCpuMemoryInfo", ctypes.c_int(0), ctypes.c_int(0), ctypes.byref(self.cpu_info))

    def _checked(self, name, status):
        if status:
            message = self._message(status).decode(errors="replace")
            self._release_status(status)
            raise OrtError(f"{name}: {message}")

    def call(self, name, *args):
        function = ctypes.CFUNCTYPE(P, *[type(a) if isinstance(a, ctypes._SimpleCData) else P for a in args])
        self._checked(name, function(self.api[SLOT[name]])(*args))

    def device_tensor(self, nbytes):
        value = P()
        self.call("CreateTensorAsOrtValue", self.allocator, (ctypes.c_int64 * 1)(nbytes), ctypes.c_size_t(1), ctypes.c_int(UINT8),
                  ctypes.byref(value))
        return value

    def cpu_tensor(self, array):
        """An OrtValue over a numpy uint8 array's bytes, no copy (the array must outlive it)."""
        value = P()
        self.call("CreateTensorWithDataAsOrtValue", self.cpu_info, P(array.ctypes.data), ctypes.c_size_t(array.nbytes),
                  (ctypes.c_int64 * 1)(array.size), ctypes.c_size_t(1), ctypes.c_int(UINT8), ctypes.byref(value))
        return value

    def copy(self, src, dst):
        self._checked("CopyTensors", self._copy(self.env, (P * 1)(src), (P * 1)(dst), None, 1))

    def address(self, value):
        address = P()
        self.call("GetTensorMutableData", value, ctypes.byref(address))
        return address.value


def overlapping_pairs(intervals):
    """Pairs of calls from different threads whose (start, end) intervals intersect."""
    intervals = sorted(intervals)
    pairs = 0
    for i, (_, end, thread) in enumerate(intervals):
        for other_start, _, other_thread in intervals[i + 1:]:
            if other_start >= end:
                break
            pairs += other_thread != thread
    return pairs


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# ----------------------------------------------------------------------------------------------
# the demonstrations (each in its own child); each returns its figures and `bad`, whether the
# misbehaviour showed
# ----------------------------------------------------------------------------------------------

def demo_leak(lib):
    import numpy as np

    c = CApi(lib)
    source = np.arange(4096, dtype=np.uint8)
    src, dst = c.cpu_tensor(source), c.device_tensor(source.nbytes)
    for _ in range(200):  # warm-up: onnxruntime's and the allocator's first-use memory
        c.copy(src, dst)
    calls, before = 2000, rss_bytes()
    for _ in range(calls):
        c.copy(src, dst)
    per_call = (rss_bytes() - before) / calls
    # 1 KiB a call (2 MiB over the loop): far above what a good build grows by (nothing, as
    # measured), far below the smallest leak the mode is run with here (4 KiB, `tensor`)
    return {"calls": calls, "rss_growth_bytes": rss_bytes() - before, "growth_per_call_bytes": round(per_call),
            "bad": per_call > 1024}


def demo_race(lib):
    import numpy as np

    c = CApi(lib)
    threads, rounds, nbytes = 4, 100, 64 * 1024
    barrier = threading.Barrier(threads)
    intervals, wrong = [], [0] * threads
    wrong_rounds, lock, errors = [0] * threads, threading.Lock(), []

    def worker(t):
        # each thread its own pattern, so bytes of another thread's copy are always wrong here
        pattern = ((np.arange(nbytes) * (2 * t + 3) + 17 * t + 1) % 256).astype(np.uint8)
        landing = np.zeros(nbytes, np.uint8)
        src, dev, back = c.cpu_tensor(pattern), c.device_tensor(nbytes), c.cpu_tensor(landing)
        mine = []
        barrier.wait()
        try:
            for _ in range(rounds):
                for a, b in ((src, dev), (dev, back)):
                    t0 = time.monotonic_ns()
                    c.copy(a, b)
                    mine.append((t0, time.monotonic_ns(), t))
                bad = int(np.count_nonzero(landing != pattern))
                wrong[t] += bad
                wrong_rounds[t] += bad > 0
                landing[:] = 0
        except OrtError as e:
            errors.append(str(e))
        with lock:
            intervals.extend(mine)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    return {"threads": threads, "round_trips_per_thread": rounds, "bytes_per_copy": nbytes, "calls": len(intervals),
            "overlapping_pairs": overlapping_pairs(intervals), "wrong_bytes": sum(wrong), "wrong_round_trips": sum(wrong_rounds),
            "bytes_checked": threads * rounds * nbytes, "errors": errors[:3], "bad": sum(wrong) > 0}


def build_model(n):
    import onnx
    from onnx import TensorProto, helper

    x, y, z = (helper.make_tensor_value_info(name, TensorProto.FLOAT, [n]) for name in "XYZ")
    nodes = [helper.make_node("Add", ["X", "Y"], ["S"], name="add0"), helper.make_node("Relu", ["S"], ["Z"], name="relu0")]
    model = helper.make_model(helper.make_graph(nodes, "race_kernel", [x, y], [z]), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model.SerializeToString()


def demo_race_kernel(lib):
    import numpy as np
    import onnxruntime as ort

    ort.register_execution_provider_library("refdev", lib)
    device = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME][0]
    threads, runs, n = 4, 40, 64 * 1024
    model = build_model(n)
    barrier = threading.Barrier(threads)
    intervals, wrong, wrong_runs, lock, errors = [], [0] * threads, [0] * threads, threading.Lock(), []

    def session():
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        so.add_provider_for_devices([device], {})
        sess = ort.InferenceSession(model, sess_options=so)
        sess.disable_fallback()  # a failing kernel must not be rerun on the CPU EP
        return sess

    def worker(t):
        sess = session()  # its own session on the same EP device
        x = np.linspace(-1.0, 1.0, n, dtype=np.float32) * (t + 1)
        y = np.full(n, 0.25 * t, np.float32)
        want = np.maximum(x + y, 0)
        mine = []
        barrier.wait()
        try:
            for _ in range(runs):
                t0 = time.monotonic_ns()
                got = sess.run(None, {"X": x, "Y": y})[0]  # releases the GIL
                mine.append((t0, time.monotonic_ns(), t))
                bad = int(np.count_nonzero(got != want))
                wrong[t] += bad
                wrong_runs[t] += bad > 0
        except Exception as e:  # noqa: BLE001 - reported as figures, not raised
            errors.append(f"{type(e).__name__}: {e}")
        with lock:
            intervals.extend(mine)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    return {"threads": threads, "runs_per_thread": runs, "elements": n, "runs": len(intervals),
            "overlapping_pairs": overlapping_pairs(intervals), "wrong_elements": sum(wrong), "wrong_runs": sum(wrong_runs),
            "errors": errors[:3], "bad": sum(wrong) > 0 or bool(errors)}


def demo_affinity(lib):
    import numpy as np

    c = CApi(lib)  # registered on this (the main) thread
    source = np.arange(256, dtype=np.uint8)
    src, dst = c.cpu_tensor(source), c.device_tensor(source.nbytes)
    result = {}

    def attempt(where):
        try:
            c.copy(src, dst)
            result[where] = "ok"
        except OrtError as e:
            result[where] = str(e)
        if where == "new_thread":
            result["new_thread_id"] = threading.get_native_id()

    attempt("registering_thread")
    th = threading.Thread(target=attempt, args=("new_thread",))
    th.start()
    th.join()
    result["bad"] = result["registering_thread"] == "ok" and result["new_thread"] != "ok"
    result["message_names_thread"] = f"thread {result['new_thread_id']}" in result["new_thread"]
    return result


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def demo_size32(lib):
    import numpy as np

    nbytes = (4 << 30) + 4096 + 3
    needed = 2 * nbytes + (512 << 20)  # source, destination, the runtime and the checks
    if mem_available() < needed:
        return {"skipped": f"needs {needed / 2**30:.1f} GiB, {mem_available() / 2**30:.1f} GiB available"}
    c = CApi(lib)
    source = np.empty(nbytes, np.uint8)
    # (i % 251) + 1: never 0, so a destination byte the copy left unwritten (a true 0) is wrong
    block = 251 << 18
    tile = (np.arange(block) % 251 + 1).astype(np.uint8)
    for start in range(0, nbytes, block):
        source[start:start + block] = tile[:min(block, nbytes - start)]
    t0 = time.monotonic()
    dst = c.device_tensor(nbytes)
    src = c.cpu_tensor(source)
    c.copy(src, dst)
    copied = time.monotonic() - t0
    # RefDev's DEFAULT memory is host memory holding every byte XOR 0x5A: read it in place
    device = np.frombuffer((ctypes.c_uint8 * nbytes).from_address(c.address(dst)), np.uint8)
    wrong, first_wrong, step = 0, None, 64 << 20
    for start in range(0, nbytes, step):
        mismatch = (device[start:start + step] ^ KEY) != source[start:start + step]
        count = int(np.count_nonzero(mismatch))
        if count and first_wrong is None:
            first_wrong = start + int(np.argmax(mismatch))
        wrong += count
    return {"bytes": nbytes, "wrong_bytes": wrong, "first_wrong_byte": first_wrong, "right_bytes": nbytes - wrong,
            "copy_seconds": round(copied, 1), "bad": wrong > 0}


def demo_nth(lib):
    import numpy as np

    c = CApi(lib)
    handles = int(os.environ.get("ORT_REFDEV_NTH") or 8000)
    source = np.arange(16, dtype=np.uint8)
    src, dst = c.cpu_tensor(source), c.device_tensor(source.nbytes)
    first_failure, message = None, None
    for call in range(1, handles + 2):
        try:
            c.copy(src, dst)
        except OrtError as e:
            first_failure, message = call, str(e)
            break
    # An allocator's Alloc that returns NULL does not make CreateTensorAsOrtValue fail
    # (onnxruntime 1.32): the value comes back with no data, which is how the failure shows.
    try:
        value = c.device_tensor(64)
        allocation = "ok" if c.address(value) else "a value with NULL data (Alloc returned NULL)"
        c.release_value(value)
    except OrtError as e:
        allocation = str(e)
    return {"pool": handles, "calls": handles + 1, "first_failed_call": first_failure, "message": message,
            "allocation_after": allocation, "bad": first_failure == handles + 1}


DEMOS = {"leak": demo_leak, "race": demo_race, "race-kernel": demo_race_kernel, "affinity": demo_affinity,
         "size32": demo_size32, "nth": demo_nth}


# ----------------------------------------------------------------------------------------------
# parent side: for each mode, a child with the fault and one without
# ----------------------------------------------------------------------------------------------

def run_child(lib, demo, fault, timeout):
    env = {k: v for k, v in os.environ.items() if k != "ORT_REFDEV_FAULT"}
    if fault:
        env["ORT_REFDEV_FAULT"] = fault
    cmd = [sys.executable, "-u", os.path.abspath(__file__), "--child", demo, "--lib", lib]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    out = p.stdout.decode(errors="replace")
    lines = [ln[7:] for ln in out.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        return {"error": f"child exit {p.returncode}: {out.strip()[-600:]}"}
    result = json.loads(lines[-1])
    result["seconds"] = round(time.monotonic() - t0, 1)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=DEFAULT_LIB, help="path of libort_refdev_ep.so")
    ap.add_argument("--fault", choices=MODES, action="append", help="a mode to demonstrate (repeatable)")
    ap.add_argument("--all", action="store_true", help="every mode but size32 (with --large, size32 too)")
    ap.add_argument("--large", action="store_true", help="with --all: also size32 (about 8.5 GiB of memory)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per child")
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    lib = os.path.abspath(args.lib)
    if not os.path.exists(lib):
        print(f"stress_smoke.py: {lib} not found; build it with `make -C refdev`", file=sys.stderr)
        return 2
    if args.child:
        print("RESULT " + json.dumps(DEMOS[args.child](lib)), flush=True)
        return 0
    modes = [m for m in MODES if m != "size32" or args.large] if args.all else (args.fault or [])
    if not modes:
        ap.error("name a mode with --fault, or --all")
    verdicts = []
    for mode in modes:
        faulty = run_child(lib, mode, mode, args.timeout)
        good = run_child(lib, mode, None, args.timeout)
        print(f"[{mode}] with the fault: {json.dumps(faulty)}", flush=True)
        print(f"[{mode}] without it:     {json.dumps(good)}", flush=True)
        # a child that could not run (no memory for size32) decides nothing; one that failed is a NO
        skipped = "skipped" in faulty or "skipped" in good
        bites = None if skipped else bool(faulty.get("bad")) and good.get("bad") is False
        print(f"[{mode}] bites: {'n/a' if bites is None else ('yes' if bites else 'NO')}", flush=True)
        verdicts.append(bites)
    return 0 if all(v is not False for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
