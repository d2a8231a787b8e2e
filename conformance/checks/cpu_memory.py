"""CPU memory everywhere: every public path that copies between CPU values works with no EP in
it, and every CPU-side write path works on the EP's HOST_ACCESSIBLE memory.

Both are onnxruntime's promises, not the EP's: a copy between two CPU values is onnxruntime's
own CPU copy, and HOST_ACCESSIBLE memory is by its definition memory the CPU writes directly.
The checks touch no memory and no session of the EP under test for the CPU paths (sessions are
the CPU EP's alone); a HOST_ACCESSIBLE destination is read back through its `data_ptr()`, which
is what the CPU sees there, never through the EP's CopyTensors.
"""

from __future__ import annotations

import os
from pathlib import Path
import ctypes
from typing import Iterator

import numpy as np

from conformance.testbed import tensors
from conformance.calls import Call
from conformance.checks.registry import check
from conformance.checks.context import steps
from conformance.checks.context.snippets import Snippets
from conformance.findings import NotApplicable, Violation
from conformance.checks.context import CheckContext
from conformance import proofs

SHAPE = (3, 5)
SENTINEL = 0x5A


def _numpy_type(dtype: str) -> tensors.DType:
    dt = tensors.DTYPES[dtype]
    if not dt.numpy_native:
        raise NotApplicable(f"{dt.name} has no numpy type: update_inplace(numpy) and numpy() cannot express it")
    return dt


def _cpu_bytes(value) -> bytes:
    """What the CPU sees at the value's address, exactly tensor_size_in_bytes() bytes."""
    size = value.tensor_size_in_bytes()
    return ctypes.string_at(value.data_ptr(), size) if size else b""


def _identity_on_cpu(ctx: CheckContext, dt: tensors.DType):
    """A session of the identity model on the CPU EP alone (no EP under test in it), one per
    element type and worker."""
    return ctx.cpu_session("identity", dt, SHAPE)


def _cpu_path(ctx: CheckContext, path: str, dt: tensors.DType, values: np.ndarray) -> tensors.Bytes | list[str]:
    """Does `path` from `values` into CPU memory; returns the bytes it delivered."""
    ort = ctx.ort
    landing = tensors.sentinel(dt, SHAPE, SENTINEL)
    with ctx.calling(Call(path, "cpu>cpu")):
        if path == "copy_tensors":
            ctx.require_api("copy_tensors", "has no copy_tensors")
            ort.copy_tensors([ctx.wrap_cpu(values, dt)], [ctx.wrap_cpu(landing, dt)], None)
        elif path == "update_inplace-numpy":
            ctx.wrap_cpu(landing, dt).update_inplace(values)
        elif path == "update_inplace-ortvalue":
            ctx.require_api("update_inplace_ortvalue", "has no update_inplace(OrtValue), added by PR #28256")
            ctx.wrap_cpu(landing, dt).update_inplace(ctx.wrap_cpu(values, dt))
        elif path == "ortvalue_from_numpy":
            return _cpu_bytes(ort.OrtValue.ortvalue_from_numpy(values, "cpu", 0))
        elif path in ("iobinding", "iobinding-ortvalue"):
            info = _identity_on_cpu(ctx, dt)
            binding = info.session.io_binding()
            if path == "iobinding":
                binding.bind_cpu_input("x", values)
                binding.bind_output("y", "cpu")
                info.session.run_with_iobinding(binding)
                return tensors.payload(binding.copy_outputs_to_cpu()[0], dt)
            binding.bind_ortvalue_input("x", ctx.wrap_cpu(values, dt))
            binding.bind_ortvalue_output("y", ctx.wrap_cpu(landing, dt))
            info.session.run_with_iobinding(binding)
        else:
            raise ValueError(f"unknown CPU copy path {path!r}")
    return tensors.payload(landing, dt)


@check("cpu-memory.copy-paths")
def copy_paths(ctx: CheckContext, path: str, dtype: str) -> Iterator[Violation]:
    dt = _numpy_type(dtype)
    values = tensors.sample(dt, SHAPE, seed=12)
    snippet = _cpu_path_script(ctx.snippets, path, dt, SHAPE, ctx.models.get("identity", dt, SHAPE)[1] if path.startswith("iobinding") else None)
    ctx.attempt(f"{path} between CPU values", snippet)
    got = _cpu_path(ctx, path, dt, values)
    ctx.prove(proofs.MEMORY, {"source": "plain CPU memory", "destination": "plain CPU memory"})
    diff = ctx.compare(tensors.payload(values, dt), got)
    if diff:
        yield Violation(f"{path} between CPU values did not deliver the source bytes: {diff.describe()}", expected="byte-identical destination",
                        actual=diff.describe(), reproducer=snippet)


@check("cpu-memory.host-accessible-writes")
def host_accessible_writes(ctx: CheckContext, path: str, dtype: str) -> Iterator[Violation]:
    ctx.require_memory("host_accessible")
    dt = _numpy_type(dtype)
    values = tensors.sample(dt, SHAPE, seed=13)
    model = ctx.models.get("identity", dt, SHAPE)[1] if path == "iobinding-output" else None
    snippet = _host_accessible_write_script(ctx.snippets, path, dt, SHAPE, model)
    ctx.attempt(f"{path} into HOST_ACCESSIBLE memory", snippet)
    with ctx.precondition("a HOST_ACCESSIBLE value to write into"):
        destination = ctx.allocate("host_accessible", dt, SHAPE)
        ctypes.memmove(destination.data_ptr(), tensors.sentinel(dt, SHAPE, SENTINEL).tobytes(), destination.tensor_size_in_bytes())
    address = destination.data_ptr()
    with ctx.calling(Call(path, "cpu>host_accessible")):
        if path == "update_inplace-numpy":
            destination.update_inplace(values)
        elif path == "update_inplace-ortvalue":
            ctx.require_api("update_inplace_ortvalue", "has no update_inplace(OrtValue), added by PR #28256")
            destination.update_inplace(ctx.wrap_cpu(values, dt))
        elif path == "copy_tensors":
            ctx.copy([ctx.wrap_cpu(values, dt)], [destination], "cpu>host_accessible")
        elif path == "iobinding-output":
            info = _identity_on_cpu(ctx, dt)
            binding = info.session.io_binding()
            binding.bind_cpu_input("x", values)
            binding.bind_ortvalue_output("y", destination)
            info.session.run_with_iobinding(binding)
        else:
            raise ValueError(f"unknown HOST_ACCESSIBLE write path {path!r}")
    ctx.prove(proofs.MEMORY, {"destination": ctx.describe_memory("host_accessible"), "read": "through data_ptr(), as the CPU sees it"})
    if destination.data_ptr() != address:
        yield Violation(f"{path} moved the HOST_ACCESSIBLE destination", expected=f"0x{address:x}", actual=f"0x{destination.data_ptr():x}",
                        reproducer=snippet)
    diff = ctx.compare(tensors.payload(values, dt), _cpu_bytes(destination))
    if diff:
        yield Violation(f"{path} into HOST_ACCESSIBLE memory: the CPU does not see the source bytes there: {diff.describe()}",
                        expected="the source bytes at the value's address", actual=diff.describe(),
                        memory={"host_accessible": ctx.memory_facts("host_accessible")}, reproducer=snippet)


# --- the reproducers: standalone scripts of each check's step ------------------------------


def _cpu_only_session(model_path: Path | None) -> str:
    path = os.path.abspath(model_path) if model_path is not None else "<the model: not saved in this run>"
    return f"s = works('a session on the CPU EP alone', ort.InferenceSession, {path!r}, providers=['CPUExecutionProvider'])"


def _cpu_path_script(sn: Snippets, path: str, dt: tensors.DType, shape: tuple[int, ...], model_path: Path | None) -> str:
    """A public copy path between two CPU values, with no EP in it, delivers the source bytes."""
    t, what = dt.onnx_type, f"{path} of {dt.name} {list(shape)} between CPU values"
    body = [sn.values("values", dt, shape, 12), sn.sentinel("landing", dt, shape, steps.SENTINEL), "got = landing"]
    body += {
        "copy_tensors": [f"works({what!r}, ort.copy_tensors, [cpu_value(values, {t})], [cpu_value(landing, {t})], None)"],
        "update_inplace-numpy": [f"works({what!r}, cpu_value(landing, {t}).update_inplace, values)"],
        "update_inplace-ortvalue": [f"works({what!r}, cpu_value(landing, {t}).update_inplace, cpu_value(values, {t}))"],
        "ortvalue_from_numpy": [f"v = works({what!r}, ort.OrtValue.ortvalue_from_numpy, values, 'cpu', 0)", f"got = read(v, values, {t})"],
        "iobinding": [_cpu_only_session(model_path), "b = s.io_binding()", "b.bind_cpu_input('x', values)", "b.bind_output('y', 'cpu')",
                      f"works({what!r}, s.run_with_iobinding, b)", "got = b.copy_outputs_to_cpu()[0]"],
        "iobinding-ortvalue": [_cpu_only_session(model_path), "b = s.io_binding()", f"b.bind_ortvalue_input('x', cpu_value(values, {t}))",
                               f"b.bind_ortvalue_output('y', cpu_value(landing, {t}))", f"works({what!r}, s.run_with_iobinding, b)"],
    }[path]
    body.append(f"same_bytes({what!r}, values, got)")
    return sn.script(what, "\n".join(body))


def _host_accessible_write_script(sn: Snippets, path: str, dt: tensors.DType, shape: tuple[int, ...], model_path: Path | None) -> str:
    """A CPU-side write into a HOST_ACCESSIBLE value lands where the CPU sees it, at the value's address."""
    t, what = dt.onnx_type, f"{path} of {dt.name} {list(shape)} into HOST_ACCESSIBLE memory"
    body = [f"dst = works('allocating HOST_ACCESSIBLE memory', ort.OrtValue.ortvalue_from_shape_and_type, {list(shape)}, {t}, memory_info=HOST_ACCESSIBLE)",
            sn.sentinel("landing", dt, shape, steps.SENTINEL), "ctypes.memmove(dst.data_ptr(), landing.tobytes(), dst.tensor_size_in_bytes())",
            "address = dst.data_ptr()", sn.values("values", dt, shape, 13)]
    body += {
        "update_inplace-numpy": [f"works({what!r}, dst.update_inplace, values)"],
        "update_inplace-ortvalue": [f"works({what!r}, dst.update_inplace, cpu_value(values, {t}))"],
        "copy_tensors": [f"works({what!r}, ort.copy_tensors, [cpu_value(values, {t})], [dst], None)"],
        "iobinding-output": [_cpu_only_session(model_path), "b = s.io_binding()", "b.bind_cpu_input('x', values)",
                             "b.bind_ortvalue_output('y', dst)", f"works({what!r}, s.run_with_iobinding, b)"],
    }[path]
    body += ["assert dst.data_ptr() == address, f'the destination moved: expected 0x{address:x}, got 0x{dst.data_ptr():x}'",
             "seen = np.frombuffer(ctypes.string_at(dst.data_ptr(), dst.tensor_size_in_bytes()), np.uint8)  # what the CPU sees there",
             f"same_bytes({what + ', read through data_ptr()'!r}, values, seen)"]
    return sn.script(what, "\n".join(body))
