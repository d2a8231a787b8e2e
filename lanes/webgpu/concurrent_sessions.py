#!/usr/bin/env python3
"""Standalone reproducer (no kit imports, Python API only): two sessions of one model on the WebGPU
plugin EP, run at once from two threads, each with inputs of its own.

    python concurrent_sessions.py           both threads run at once: fails with onnxruntime-ep-webgpu 0.4.0
    python concurrent_sessions.py serial    the same runs one thread after the other: the twin, passes

Run it inside the software GPU (`lanes/softgpu/exec python lanes/webgpu/concurrent_sessions.py`) or
on a machine with a GPU. Exit 0: every run gave numpy's result; an AssertionError or a signal otherwise.
"""
import sys
import threading

import numpy as np
import onnxruntime as ort
import onnxruntime_ep_webgpu as webgpu
from onnx import TensorProto, helper

RUNS, SHAPE = 24, [256, 512]
graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], "add_relu",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in ("a", "b")],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 10
ort.register_execution_provider_library("webgpu", webgpu.get_library_path())
device = next(d for d in ort.get_ep_devices() if d.ep_name == webgpu.get_ep_name())


def session():
    options = ort.SessionOptions()
    options.add_provider_for_devices([device], {})
    return ort.InferenceSession(model.SerializeToString(), options)


sessions = [session(), session()]
failures = []


def work(t):
    rng = np.random.default_rng(t)
    try:
        for run in range(RUNS):
            a, b = rng.standard_normal(SHAPE, dtype=np.float32), rng.standard_normal(SHAPE, dtype=np.float32)
            (y,) = sessions[t].run(None, {"a": a, "b": b})
            assert np.allclose(y, np.maximum(a + b, 0)), f"session {t}, run {run}: wrong output"
    except BaseException as exc:  # reported by the main thread
        failures.append(f"session {t}: {exc}")


if sys.argv[1:] == ["serial"]:
    for t in range(2):
        work(t)
else:
    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
assert not failures, "; ".join(failures)
print(f"OK: 2 sessions, {RUNS} runs each, {'one after the other' if sys.argv[1:] == ['serial'] else 'at once'}: every output right")
