#!/usr/bin/env python3
"""Standalone smoke test for the RefDev reference plugin EP (libort_refdev_ep.so).

Uses only onnxruntime, numpy and onnx. Examples:

    python smoke.py                      # run every check in this process (fault as in the environment)
    python smoke.py --fault corrupt      # run the checks in a child with ORT_REFDEV_FAULT=corrupt
    python smoke.py --all                # every fault mode, each in a child with a timeout; prints a table
    python smoke.py --host-accessible    # also advertise the HOST_ACCESSIBLE memory (ORT_REFDEV_HOST_ACCESSIBLE=1)

Exit status: 0 when every check passed (with --fault/--all: when every mode showed the misbehaviour
it is meant to show), 1 otherwise, 2 when the library could not be registered.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LIB = os.path.join(HERE, "build", "libort_refdev_ep.so")
EP_NAME = "RefDevExecutionProvider"
EP_VENDOR = "ort-ep-conformance"
VENDOR_ID = 0xC0DE
KEY = 0x5A  # RefDev stores DEFAULT-memory bytes XOR this key


def fault_modes():
    """The EP's fault modes, read from its k_fault_names array (faults.c beside this file) so
    that a new mode is never left out; all but unregister-crash, which smoke.py never provokes:
    it does not unregister the library."""
    source = os.path.join(HERE, "faults.c")
    try:
        with open(source) as f:
            names = re.search(r"k_fault_names\[\w*\]\s*=\s*\{(.*?)\};", f.read(), re.S)
    except OSError as e:
        sys.exit(f"smoke.py: cannot read the fault modes: {e}")
    if names is None:
        sys.exit(f"smoke.py: cannot read the fault modes: no k_fault_names array in {source}")
    return [mode for mode in re.findall(r'"([^"]+)"', names.group(1)) if mode != "unregister-crash"]


FAULT_MODES = fault_modes()

# What each fault mode is meant to make visible: the checks that must fail, or how the child dies.
EXPECTED = {
    "none": set(),
    "no-data-transfer": {"copy.h2d"},
    "corrupt": {"copy.h2d"},
    "short-copy": {"copy.h2d"},
    "no-d2d": {"copy.d2d"},
    "no-d2h": {"copy.d2h"},
    "no-h2d": {"copy.h2d"},
    "wrong-memory": {"device.memory_infos"},
    "cpu-default": {"alloc.default_is_device"},
    "host-accessible-inputs": None,  # the intended violation is impossible with API 23: see README
    "alloc-fail": {"alloc.default"},
    "abort": "SIGABRT",
    "hang": "timeout",
    "slow-d2d": {"perf.d2d_no_host_staging"},
    "claim-nothing": {"session.assignment"},
    "wrong-compute": {"session.values"},
    "kernel-fails": {"session.run"},  # the session's fallback is disabled: the kernel's error shows
    # Seen only through a HOST_ACCESSIBLE value bound with IOBinding, which smoke.py never binds;
    # the kit's iobinding.host-accessible-in-place catches it (tests/test_refdev.py).
    "host-accessible-as-device": None,
    # Imports: smoke.py imports nothing (onnxruntime's Python API has no interop); the kit's
    # import family catches them on the software GPU (tests/test_interop.py).
    "import-copy": None,
    "import-misread": None,
    "import-no-bounds": None,
    "import-denies": None,
    # Only the record of the kernels' inputs (ORT_REFDEV_INPUT_LOG) is wrong, which smoke.py never
    # reads; the kit's placement.kernel-inputs catches it (tests/test_refdev.py).
    "misplaced-inputs": None,
    # The asynchronous device's ordering faults: they make the device asynchronous, where
    # smoke.py's checks wait as they should; async_smoke.py shows what each breaks.
    "drop-stream": None,
    "no-wait": None,
    "no-drain": None,
    "early-return": None,
    # One element past a CPU destination lands in the slack of numpy's allocation, where
    # smoke.py does not look; the kit's guard memory (conformance/testbed/guard.py) sees it.
    "overrun": None,
    # Every Nth copy of the process goes wrong (or aborts): which smoke check that is depends on
    # how many copies came before it. The kit's reruns tell such a case flaky (tests/test_reruns.py).
    "intermittent": None,
    "intermittent-abort": None,
    # Only runs on empty tensors fail, which smoke.py never makes; the kit's session.empty-tensors
    # catches it (tests/test_refdev.py).
    "empty-fails": None,
    # Stress faults: harmless to smoke.py's single-threaded small copies and runs, so every check
    # passes as in `none`; refdev/stress_smoke.py shows what each breaks (many threads at once, a
    # copy from another thread, thousands of calls, a copy past 4 GiB).
    "leak": set(),
    "race": set(),
    "race-kernel": set(),
    "affinity": set(),
    "size32": set(),
    "nth": set(),
    # Lawful: the allocators implement no GetStats (the header allows NULL); smoke.py never asks
    # for statistics. The kit's C path must not ask AllocatorGetStats then (tests/test_endurance.py).
    "no-stats": set(),
}


# ----------------------------------------------------------------------------------------------
# the checks (run in the process that has the library registered)
# ----------------------------------------------------------------------------------------------

class Checks:
    def __init__(self):
        self.results = []  # (name, ok, detail)

    def record(self, name, ok, detail=""):
        self.results.append((name, ok, detail))
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)

    def run(self, name, fn):
        try:
            out = fn()
        except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
            msg = f"{type(e).__name__}: {e}".replace("\n", " ")
            self.record(name, False, msg[:400])
            return None
        if isinstance(out, tuple):
            ok, detail = out
        else:
            ok, detail = bool(out), ""
        self.record(name, ok, detail)
        return ok

    @property
    def failed(self):
        return [n for n, ok, _ in self.results if not ok]


def build_model(with_unclaimed=False):
    import onnx
    from onnx import TensorProto, helper

    shape = [2, 3]
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, shape)
    z = helper.make_tensor_value_info("Z", TensorProto.FLOAT, shape)
    nodes = [helper.make_node("Add", ["X", "Y"], ["S"], name="add0")]
    if with_unclaimed:
        nodes.append(helper.make_node("Mul", ["S", "Y"], ["M"], name="mul0"))  # not claimed: CPU
        nodes.append(helper.make_node("Relu", ["M"], ["Z"], name="relu0"))
    else:
        nodes.append(helper.make_node("Relu", ["S"], ["Z"], name="relu0"))
    graph = helper.make_graph(nodes, "refdev_smoke", [x, y], [z])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model.SerializeToString()


def run_checks(lib_path):
    import numpy as np
    import onnxruntime as ort

    print(f"onnxruntime {ort.__version__}; library {lib_path}; "
          f"ORT_REFDEV_FAULT={os.environ.get('ORT_REFDEV_FAULT', '')!r}; "
          f"ORT_REFDEV_HOST_ACCESSIBLE={os.environ.get('ORT_REFDEV_HOST_ACCESSIBLE', '')!r}", flush=True)
    c = Checks()
    try:
        ort.register_execution_provider_library("refdev", lib_path)
    except Exception as e:  # noqa: BLE001
        c.record("register", False, f"{type(e).__name__}: {e}")
        return c, 2
    c.record("register", True)

    devs = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
    if not c.run("device.present", lambda: (len(devs) == 1, f"{len(devs)} OrtEpDevice(s) for {EP_NAME}")):
        return c, 1
    dev = devs[0]
    DEFAULT = ort.OrtDeviceMemoryType.DEFAULT
    HOST = ort.OrtDeviceMemoryType.HOST_ACCESSIBLE

    def describe(mi):
        if mi is None:
            return "None"
        return (f"name={mi.name} device_mem_type={mi.device_mem_type.name} vendor=0x{mi.device_vendor_id:X} "
                f"device_id={mi.device_id} allocator={mi.allocator_type.name} mem_type={mi.mem_type.name}")

    print(f"  ep_device: ep_name={dev.ep_name} ep_vendor={dev.ep_vendor} hw_type={dev.device.type.name} "
          f"hw_vendor={dev.device.vendor} metadata={dict(dev.ep_metadata)}", flush=True)
    mi_default = dev.memory_info(DEFAULT)
    mi_host = dev.memory_info(HOST)
    print(f"  memory_info(DEFAULT): {describe(mi_default)}", flush=True)
    print(f"  memory_info(HOST_ACCESSIBLE): {describe(mi_host)}", flush=True)

    def check_memory_infos():
        problems = []
        if dev.ep_vendor != EP_VENDOR:
            problems.append(f"ep_vendor {dev.ep_vendor!r}")
        if mi_default is None:
            problems.append("no DEFAULT memory info")
        else:
            if mi_default.name != "RefDev":
                problems.append(f"DEFAULT name {mi_default.name!r}")
            if mi_default.device_vendor_id != VENDOR_ID:
                problems.append(f"DEFAULT vendor 0x{mi_default.device_vendor_id:X} != 0x{VENDOR_ID:X}")
            if mi_default.device_mem_type != DEFAULT:
                problems.append(f"DEFAULT memory info has device_mem_type {mi_default.device_mem_type.name}")
        want_host = os.environ.get("ORT_REFDEV_HOST_ACCESSIBLE") == "1"
        if want_host and mi_host is None:
            problems.append("ORT_REFDEV_HOST_ACCESSIBLE=1 but no HOST_ACCESSIBLE memory info")
        if mi_host is not None and mi_host.device_vendor_id != VENDOR_ID:
            problems.append(f"HOST_ACCESSIBLE vendor 0x{mi_host.device_vendor_id:X}")
        return (not problems, "; ".join(problems) or "DEFAULT RefDev vendor 0xC0DE as declared")

    c.run("device.memory_infos", check_memory_infos)
    if mi_default is None:
        return c, 1

    shape = [3, 5]
    holder = {}

    def alloc_default():
        v = ort.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, memory_info=mi_default)
        if v.data_ptr() == 0:
            return False, "ortvalue_from_shape_and_type returned a value with data_ptr()==0 (allocation failed)"
        holder["dev"] = v
        return True, f"data_ptr=0x{v.data_ptr():x} device_name={v.device_name()}"

    if c.run("alloc.default", alloc_default):
        device_value_checks(c, ort, np, dev, mi_default, mi_host, holder, shape)
    else:
        print("  (copy and update_inplace checks skipped: no RefDev value)", flush=True)
    session_checks(c, ort, np, dev, DEFAULT, holder)
    return c, (0 if not c.failed else 1)


def device_value_checks(c, ort, np, dev, mi_default, mi_host, holder, shape):
    data = (np.arange(15, dtype=np.float32).reshape(shape) - 7.25) * np.float32(1.5)
    data[0, 0] = -0.0
    data[0, 1] = np.float32(1e-42)  # subnormal
    data[0, 2] = np.float32("nan")
    nbytes = data.nbytes

    def cpu_value(arr=None):
        if arr is None:
            return ort.OrtValue.ortvalue_from_shape_and_type(shape, np.float32)
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(arr))

    def bytes_of_cpu(v):
        return v.numpy().tobytes()

    dv = holder["dev"]
    c.run("alloc.default_is_device",
          lambda: (dv.device_name() != "cpu", f"RefDev DEFAULT value reports device_name={dv.device_name()!r}"))

    if mi_host is not None:
        def alloc_host():
            hv = ort.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, memory_info=mi_host)
            holder["host"] = hv
            return True, f"data_ptr=0x{hv.data_ptr():x} device_name={hv.device_name()}"
        c.run("alloc.host_accessible", alloc_host)

    src = cpu_value(data)
    scrambled = bytes(b ^ KEY for b in data.tobytes())

    # The smoke test knows the virtual device's storage scheme (bytes XOR 0x5A in host memory), so
    # each copy direction is checked on its own: device bytes are peeked/poked directly.
    def peek(v):
        return ctypes.string_at(v.data_ptr(), nbytes)

    def poke(v, raw):
        ctypes.memmove(v.data_ptr(), raw, nbytes)

    def new_dev():
        v = ort.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, memory_info=mi_default)
        if v.data_ptr() == 0:
            raise RuntimeError("allocation returned data_ptr()==0")
        return v

    def h2d():
        ort.copy_tensors([src], [dv], None)
        raw = peek(dv)
        return raw == scrambled, "CPU->RefDev: device bytes " + ("hold the data" if raw == scrambled else "WRONG")

    c.run("copy.h2d", h2d)

    def raw_scrambled():
        raw = peek(dv)
        return (raw != data.tobytes(), "raw RefDev bytes " +
                ("differ from the true bytes (scrambled)" if raw != data.tobytes() else "equal the true bytes"))

    c.run("device.raw_bytes_scrambled", raw_scrambled)

    def d2d():
        a, b = new_dev(), new_dev()
        poke(a, scrambled)
        ort.copy_tensors([a], [b], None)
        holder["dev2"] = b
        return peek(b) == scrambled, "RefDev->RefDev: device bytes " + ("equal" if peek(b) == scrambled else "WRONG")

    c.run("copy.d2d", d2d)

    def d2h():
        a = new_dev()
        poke(a, scrambled)
        back = cpu_value()
        ort.copy_tensors([a], [back], None)
        ok = bytes_of_cpu(back) == data.tobytes()
        return ok, "RefDev->CPU: host bytes " + ("equal" if ok else "WRONG")

    c.run("copy.d2h", d2h)

    def roundtrip():
        a, b = new_dev(), new_dev()
        back = cpu_value()
        ort.copy_tensors([src], [a], None)
        ort.copy_tensors([a], [b], None)
        ort.copy_tensors([b], [back], None)
        ok = bytes_of_cpu(back) == data.tobytes()
        return ok, "CPU->RefDev->RefDev->CPU through copy_tensors only: " + ("bit-exact" if ok else "DIFFERS")

    c.run("copy.roundtrip", roundtrip)

    if holder.get("host") is not None:
        hv = holder["host"]

        def host_checks():
            ort.copy_tensors([src], [hv], None)
            plain = peek(hv) == data.tobytes()
            aliased = hv.numpy().tobytes() == data.tobytes()
            d = new_dev()
            ort.copy_tensors([hv], [d], None)
            h2 = ort.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, memory_info=mi_host)
            ort.copy_tensors([d], [h2], None)
            via_dev = peek(h2) == data.tobytes()
            ok = plain and aliased and via_dev
            return ok, (f"CPU->RefDevHost stores plain bytes={plain}; numpy()={aliased}; "
                        f"RefDevHost->RefDev->RefDevHost exact={via_dev}")

        c.run("host_accessible.copies", host_checks)

    def numpy_of_device():
        v = new_dev()
        poke(v, scrambled)
        arr = v.numpy()
        return arr.tobytes() == data.tobytes(), "OrtValue.numpy() of a RefDev value"

    c.run("value.numpy", numpy_of_device)

    def mismatch():
        bad = ort.OrtValue.ortvalue_from_shape_and_type([7], np.float32, memory_info=mi_default)
        try:
            ort.copy_tensors([src], [bad], None)
        except Exception as e:  # noqa: BLE001
            return True, f"refused: {str(e)[:160]}"
        return False, "a 60-byte source was copied into a 28-byte destination without an error"

    c.run("copy.size_mismatch_refused", mismatch)

    def update_in_place(source, note=""):
        target = ort.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, memory_info=mi_default)
        p = target.data_ptr()
        target.update_inplace(source)
        back = cpu_value()
        ort.copy_tensors([target], [back], None)
        ok_ptr = target.data_ptr() == p
        ok_val = bytes_of_cpu(back) == data.tobytes()
        return ok_ptr and ok_val, f"data_ptr kept={ok_ptr} values exact={ok_val}{note}"

    c.run("update_inplace.numpy", lambda: update_in_place(data))
    c.run("update_inplace.ortvalue", lambda: update_in_place(holder.get("dev2") or dv, " (RefDev->RefDev)"))

    def stream():
        s = dev.create_sync_stream()
        tgt = ort.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, memory_info=mi_default)
        ort.copy_tensors([src], [tgt], s)
        back = cpu_value()
        ort.copy_tensors([tgt], [back], s)
        # A copy on a stream is complete once the stream is synchronised; releasing it is the only
        # way onnxruntime's Python has (the asynchronous device, ORT_REFDEV_ASYNC=1, needs it).
        del s
        return bytes_of_cpu(back) == data.tobytes(), "create_sync_stream() + copies on the stream, read once it is released"

    c.run("stream.copy", stream)

    def perf():
        n = 4 << 20  # 4 MiB
        big = np.random.default_rng(0).standard_normal(n // 4).astype(np.float32)
        a = ort.OrtValue.ortvalue_from_shape_and_type([n // 4], np.float32, memory_info=mi_default)
        b = ort.OrtValue.ortvalue_from_shape_and_type([n // 4], np.float32, memory_info=mi_default)
        host = ort.OrtValue.ortvalue_from_shape_and_type([n // 4], np.float32)
        a.update_inplace(big)

        def best(fn, reps=5):
            ts = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            return min(ts)

        t_d2d = best(lambda: b.update_inplace(a))
        t_rt = best(lambda: (ort.copy_tensors([a], [host], None), ort.copy_tensors([host], [b], None)))
        ok = t_d2d <= 2.0 * t_rt
        return ok, f"update_inplace RefDev->RefDev {t_d2d * 1e3:.2f} ms vs RefDev->CPU->RefDev {t_rt * 1e3:.2f} ms"

    c.run("perf.d2d_no_host_staging", perf)


def session_checks(c, ort, np, dev, DEFAULT, holder):
    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    y = np.array([[0.5, 0.5, -4.0], [1.0, -7.0, 6.5]], np.float32)

    def make_session(model_bytes):
        so = ort.SessionOptions()
        so.add_provider_for_devices([dev], {})
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        # No fallback: Python's InferenceSession would rerun a failed kernel on the CPU EP.
        sess = ort.InferenceSession(model_bytes, sess_options=so, enable_fallback=0)
        sess.disable_fallback()
        return sess

    def assignment(sess):
        out = {}
        for a in sess.get_provider_graph_assignment_info():
            for node in a.get_nodes():
                out[node.name] = a.ep_name
        return out

    def session_create():
        holder["sess"] = make_session(build_model())
        return True, f"providers={holder['sess'].get_providers()}"

    if c.run("session.create", session_create):
        sess = holder["sess"]

        def assigned():
            got = assignment(sess)
            ok = got.get("add0") == EP_NAME and got.get("relu0") == EP_NAME
            return ok, f"{got}"

        c.run("session.assignment", assigned)

        def run_session():
            holder["out"] = sess.run(None, {"X": x, "Y": y})[0]
            return True, ""

        if c.run("session.run", run_session):
            want = np.maximum(x + y, 0)
            got = holder["out"]
            c.run("session.values", lambda: (np.array_equal(got, want), f"got {got.ravel().tolist()} "
                                                                          f"want {want.ravel().tolist()}"))

    def fallback():
        s2 = make_session(build_model(with_unclaimed=True))
        got = assignment(s2)
        out = s2.run(None, {"X": x, "Y": y})[0]
        want = np.maximum((x + y) * y, 0)
        ok = (got.get("mul0") == "CPUExecutionProvider" and got.get("add0") == EP_NAME
              and got.get("relu0") == EP_NAME and np.array_equal(out, want))
        return ok, f"{got}; values {'exact' if np.array_equal(out, want) else 'WRONG'}"

    c.run("session.cpu_fallback_for_unclaimed_node", fallback)

    sess = holder.get("sess")
    if sess is not None:
        def io_infos():
            # Last on purpose: where onnxruntime cannot resolve a location it hands back null memory
            # infos, and touching one kills the process (seen with fault host-accessible-inputs).
            ins = sess.get_input_memory_infos()
            outs = sess.get_output_memory_infos()

            def d(m):
                return f"{m.name}/{m.device_mem_type.name}/0x{m.device_vendor_id:X}"
            desc = "inputs=[" + ", ".join(d(m) for m in ins) + "] outputs=[" + ", ".join(d(m) for m in outs) + "]"
            bad = [d(m) for m in ins if m.device_mem_type != DEFAULT]
            return not bad, desc + (f"; inputs not on CPU/DEFAULT memory: {bad}" if bad else "")

        c.run("session.io_memory_infos", io_infos)


# ----------------------------------------------------------------------------------------------
# parent side: one child per fault mode
# ----------------------------------------------------------------------------------------------

def run_child(lib, mode, timeout, host_accessible):
    env = dict(os.environ)
    env["ORT_REFDEV_FAULT"] = mode
    if host_accessible:
        env["ORT_REFDEV_HOST_ACCESSIBLE"] = "1"
    cmd = [sys.executable, "-u", os.path.abspath(__file__), "--child", "--lib", lib]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        out = p.stdout.decode(errors="replace")
        rc = p.returncode
        how = f"exit {rc}" if rc >= 0 else f"killed by {signal.Signals(-rc).name}"
    except subprocess.TimeoutExpired as e:
        out = (e.output or b"").decode(errors="replace")
        rc = None
        how = f"timeout after {timeout:.0f} s (killed)"
    elapsed = time.monotonic() - t0
    failed = [ln[5:].split(":")[0] for ln in out.splitlines() if ln.startswith("FAIL ")]
    return {"mode": mode, "rc": rc, "how": how, "output": out, "failed": failed, "elapsed": elapsed}


def intended(res):
    """True/False, or None where smoke.py cannot see the mode's intended misbehaviour."""
    exp = EXPECTED.get(res["mode"])
    if exp is None:
        return None
    if exp == "SIGABRT":
        return res["rc"] == -signal.SIGABRT
    if exp == "timeout":
        return res["rc"] is None
    if res["rc"] is None or res["rc"] < 0:
        return False
    if not exp:
        return res["rc"] == 0 and not res["failed"]
    return exp.issubset(set(res["failed"]))


def yes_no(v):
    return "n/a" if v is None else ("yes" if v else "NO")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=DEFAULT_LIB, help="path of libort_refdev_ep.so")
    ap.add_argument("--fault", choices=FAULT_MODES, help="run the checks in a child with ORT_REFDEV_FAULT=MODE")
    ap.add_argument("--all", action="store_true", help="run every fault mode, each in a child")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per child (hang mode uses 15)")
    ap.add_argument("--host-accessible", action="store_true", help="set ORT_REFDEV_HOST_ACCESSIBLE=1")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    lib = os.path.abspath(args.lib)
    if not os.path.exists(lib):
        print(f"smoke.py: {lib} not found; build it with `make -C refdev`", file=sys.stderr)
        return 2

    if args.child or (args.fault is None and not args.all):
        if args.host_accessible:
            os.environ["ORT_REFDEV_HOST_ACCESSIBLE"] = "1"
        checks, rc = run_checks(lib)
        print(f"RESULT: {len(checks.results) - len(checks.failed)} passed, {len(checks.failed)} failed"
              + (f" ({', '.join(checks.failed)})" if checks.failed else ""), flush=True)
        return rc

    modes = FAULT_MODES if args.all else [args.fault]
    results = []
    for mode in modes:
        timeout = min(args.timeout, 15.0) if mode == "hang" else args.timeout
        res = run_child(lib, mode, timeout, args.host_accessible)
        results.append(res)
        if not args.all:
            print(res["output"], end="")
        print(f"[{mode}] child {res['how']} in {res['elapsed']:.1f} s; failed checks: "
              f"{', '.join(res['failed']) or '-'}; intended misbehaviour seen: {yes_no(intended(res))}",
              flush=True)
    if args.all:
        print("\n| mode | child | failed checks | intended misbehaviour seen |")
        print("| --- | --- | --- | --- |")
        for r in results:
            print(f"| `{r['mode']}` | {r['how']} | {', '.join(f'`{f}`' for f in r['failed']) or '-'} | "
                  f"{yes_no(intended(r))} |")
    return 0 if all(intended(r) is not False for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
