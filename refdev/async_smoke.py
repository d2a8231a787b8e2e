#!/usr/bin/env python3
"""Standalone smoke test of RefDev's asynchronous device (ORT_REFDEV_ASYNC=1) and its async faults.

Uses only onnxruntime, numpy and onnx (and smoke.py beside it for the model). Examples:

    python async_smoke.py                     # the cases in this process, ORT_REFDEV_ASYNC=1
    python async_smoke.py --fault no-drain    # the cases in a child with ORT_REFDEV_FAULT=no-drain
    python async_smoke.py --all               # the good build and every async fault, each in a child

Each case states what a correct asynchronous EP gives; every async fault mode must make its own
case(s) fail (EXPECTED below), the good build none. Queued work that nobody waits for is held
back ORT_REFDEV_ASYNC_DELAY_MS (the library's own 1000 ms unless --delay says), far longer than
the few microseconds between a call returning and the read that should have waited, so a missing
wait shows every time; work something waits for runs at once.

Exit status: 0 when every case passed (with --fault/--all: when every mode failed the cases it is
meant to fail, and only those), 1 otherwise, 2 when the library could not be registered.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import smoke  # noqa: E402  (the model and the library's path)

EP_NAME = smoke.EP_NAME
ASYNC_FAULTS = ("drop-stream", "no-wait", "no-drain", "early-return")
# the library's own list (faults.c, read by smoke.py) must name them
assert set(ASYNC_FAULTS) <= set(smoke.FAULT_MODES), "faults.c lacks an async fault mode"

# The cases each mode fails, every time (the good build, "none", fails none). A mode's own case
# comes first; the others fail with it because a run needs the ordering the mode breaks.
EXPECTED = {
    "none": set(),
    # the copies leave the stream: not drained by its release (its own case), and not ordered
    # with the kernels that read what they upload (a session's inputs, IOBinding's bound inputs)
    "drop-stream": {"stream.copies-after-release", "iobinding.cpu-input", "session.values", "session.cross-device-values"},
    # the host does not wait for the device's Add before the CPU's Mul reads the sum
    "no-wait": {"session.cross-device-values"},
    # nothing is drained: neither the stream's release (its own case) nor the end of a run
    "no-drain": {"stream.copies-after-release", "session.values", "session.cross-device-values", "iobinding.cpu-input"},
    # copies with no stream return before they land (its own case); onnxruntime copies the sum
    # to the CPU's Mul with no stream
    "early-return": {"copy.no-stream", "session.cross-device-values"},
}


def run_cases(lib_path):
    import numpy as np
    import onnxruntime as ort

    print(f"onnxruntime {ort.__version__}; library {lib_path}; ORT_REFDEV_ASYNC={os.environ.get('ORT_REFDEV_ASYNC', '')!r}; "
          f"ORT_REFDEV_ASYNC_DELAY_MS={os.environ.get('ORT_REFDEV_ASYNC_DELAY_MS', '')!r}; "
          f"ORT_REFDEV_FAULT={os.environ.get('ORT_REFDEV_FAULT', '')!r}", flush=True)
    c = smoke.Checks()
    try:
        ort.register_execution_provider_library("refdev", lib_path)
    except Exception as e:  # noqa: BLE001
        c.record("register", False, f"{type(e).__name__}: {e}")
        return c, 2
    devs = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
    if len(devs) != 1:
        c.record("device.present", False, f"{len(devs)} OrtEpDevice(s) for {EP_NAME}")
        return c, 1
    dev = devs[0]
    mi = dev.memory_info(ort.OrtDeviceMemoryType.DEFAULT)
    shape = (64, 33)
    data = (np.arange(64 * 33, dtype=np.float32).reshape(shape) - 1000.0) * np.float32(0.75)
    sentinel = np.frombuffer(b"\xa5\xa5\xa5\xa5", np.float32)[0]
    # Buffers a faulty device may still write after the check has looked: kept to the end of the
    # process, so that a late write never lands in memory handed back to the allocator.
    keep = []

    def device_value():
        v = ort.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, memory_info=mi)
        keep.append(v)
        return v

    def landing():
        arr = np.full(shape, sentinel, np.float32)
        v = ort.OrtValue.ortvalue_from_numpy(arr)
        keep.append((arr, v))
        return arr, v

    def wrong_bytes(arr):
        return int(np.count_nonzero(arr.view(np.uint8) != data.view(np.uint8)))

    def stream_round_trip():
        stream = dev.create_sync_stream()
        d = device_value()
        arr, back = landing()
        ort.copy_tensors([ort.OrtValue.ortvalue_from_numpy(data)], [d], stream)
        ort.copy_tensors([d], [back], stream)
        return stream, arr

    def read_before_wait():
        # A correct asynchronous device has not run the copies yet: the host buffer still holds
        # the sentinel. This is what the kit's streams.sync-stream reads (its mistake, not the EP's).
        stream, arr = stream_round_trip()
        untouched = int(np.count_nonzero(arr.view(np.uint8) == 0xA5))
        keep.append(stream)  # released at exit, after the read
        return untouched == arr.nbytes, f"{untouched} of {arr.nbytes} bytes still the sentinel right after the copies were queued"

    c.run("stream.read-before-wait", read_before_wait)

    def after_release():
        # Releasing the stream is the only wait onnxruntime 1.32's Python has for it.
        stream, arr = stream_round_trip()
        t0 = time.perf_counter()
        del stream
        waited = (time.perf_counter() - t0) * 1e3
        bad = wrong_bytes(arr)
        return bad == 0, f"{bad} of {arr.nbytes} bytes wrong after the stream's release (which took {waited:.1f} ms)"

    c.run("stream.copies-after-release", after_release)

    def no_stream():
        # A copy with no stream is complete when copy_tensors returns.
        d = device_value()
        arr, back = landing()
        ort.copy_tensors([ort.OrtValue.ortvalue_from_numpy(data)], [d], None)
        ort.copy_tensors([d], [back], None)
        bad = wrong_bytes(arr)
        return bad == 0, f"{bad} of {arr.nbytes} bytes wrong right after two copies with no stream"

    c.run("copy.no-stream", no_stream)

    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    y = np.array([[0.5, 0.5, -4.0], [1.0, -7.0, 6.5]], np.float32)

    def make_session(model_bytes):
        so = ort.SessionOptions()
        so.add_provider_for_devices([dev], {})
        sess = ort.InferenceSession(model_bytes, sess_options=so, enable_fallback=0)
        sess.disable_fallback()
        keep.append(sess)
        return sess

    def values(got, want):
        return np.array_equal(got, want), f"got {got.ravel().tolist()} want {want.ravel().tolist()}"

    def session_values():
        # Add and Relu on the EP's stream; the outputs are complete when run returns.
        out = make_session(smoke.build_model()).run(None, {"X": x, "Y": y})[0]
        keep.append(out)
        return values(out, np.maximum(x + y, 0))

    c.run("session.values", session_values)

    def cross_device():
        # Add on RefDev, Mul on the CPU, Relu on RefDev: the CPU waits (a notification) for the
        # device's Add before it reads the sum.
        out = make_session(smoke.build_model(with_unclaimed=True)).run(None, {"X": x, "Y": y})[0]
        keep.append(out)
        return values(out, np.maximum((x + y) * y, 0))

    c.run("session.cross-device-values", cross_device)

    def iobinding_cpu_input():
        # bind_cpu_input copies onto the session's stream, ahead of the kernels that read it
        # (the onnxruntime 32643 shape, where the upload left the stream).
        sess = make_session(smoke.build_model())
        io = sess.io_binding()
        keep.append(io)
        io.bind_cpu_input("X", x)
        io.bind_cpu_input("Y", y)
        io.bind_output("Z")
        sess.run_with_iobinding(io)
        out = io.copy_outputs_to_cpu()[0]
        keep.append(out)
        return values(out, np.maximum(x + y, 0))

    c.run("iobinding.cpu-input", iobinding_cpu_input)
    # What a faulty device still holds may land after the buffers go: it writes RefDev memory only,
    # whose frees wait for it (README.md), so nothing here waits for it.
    return c, (0 if not c.failed else 1)


def run_child(lib, mode, delay, timeout):
    env = dict(os.environ)
    env["ORT_REFDEV_ASYNC"] = "1"
    env.pop("ORT_REFDEV_ASYNC_DELAY_MS", None)
    if delay is not None:
        env["ORT_REFDEV_ASYNC_DELAY_MS"] = str(delay)
    env["ORT_REFDEV_FAULT"] = "" if mode == "none" else mode
    cmd = [sys.executable, "-u", os.path.abspath(__file__), "--child", "--lib", lib]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        out, how = p.stdout.decode(errors="replace"), f"exit {p.returncode}"
        crashed = p.returncode < 0 or p.returncode == 2
    except subprocess.TimeoutExpired as e:
        out, how, crashed = (e.output or b"").decode(errors="replace"), f"timeout after {timeout:.0f} s", True
    failed = {ln[5:].split(":")[0] for ln in out.splitlines() if ln.startswith("FAIL ")}
    return {"mode": mode, "how": how, "output": out, "failed": failed, "crashed": crashed,
            "elapsed": time.monotonic() - t0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=smoke.DEFAULT_LIB, help="path of libort_refdev_ep.so")
    ap.add_argument("--fault", choices=ASYNC_FAULTS, help="run the cases in a child with ORT_REFDEV_FAULT=MODE")
    ap.add_argument("--all", action="store_true", help="the good build and every async fault, each in a child")
    ap.add_argument("--delay", type=int, help="ORT_REFDEV_ASYNC_DELAY_MS for the cases: how long work nobody waits for is held "
                                              "back (default: the library's own, 1000 ms)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per child")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    lib = os.path.abspath(args.lib)
    if not os.path.exists(lib):
        print(f"async_smoke.py: {lib} not found; build it with `make -C refdev`", file=sys.stderr)
        return 2

    if args.child or (args.fault is None and not args.all):
        if not args.child:
            os.environ["ORT_REFDEV_ASYNC"] = "1"
            if args.delay is not None:
                os.environ.setdefault("ORT_REFDEV_ASYNC_DELAY_MS", str(args.delay))
        checks, rc = run_cases(lib)
        print(f"RESULT: {len(checks.results) - len(checks.failed)} passed, {len(checks.failed)} failed"
              + (f" ({', '.join(checks.failed)})" if checks.failed else ""), flush=True)
        return rc

    modes = ["none", *ASYNC_FAULTS] if args.all else [args.fault]
    results = []
    for mode in modes:
        res = run_child(lib, mode, args.delay, args.timeout)
        res["as_meant"] = not res["crashed"] and res["failed"] == EXPECTED[mode]
        results.append(res)
        if not args.all:
            print(res["output"], end="")
        print(f"[{mode}] child {res['how']} in {res['elapsed']:.1f} s; failed: {', '.join(sorted(res['failed'])) or '-'}; "
              f"as meant: {'yes' if res['as_meant'] else 'NO'}", flush=True)
    if args.all:
        print("\n| mode | child | failed cases | as meant |")
        print("| --- | --- | --- | --- |")
        for r in results:
            print(f"| `{r['mode']}` | {r['how']} | {', '.join(f'`{f}`' for f in sorted(r['failed'])) or '-'} | "
                  f"{'yes' if r['as_meant'] else 'NO'} |")
    return 0 if all(r["as_meant"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
