"""Reproducer templates of the steps not yet beside their checks: a session run (also on empty
inputs), placement, the CPU paths, an IOBinding run (shared: the bad bindings' valid request
uses it too), the library's lifecycle, a refusal's message; and what families' scripts share
(SENTINEL, REFERENCES: numpy's result of each recipe). Each returns a complete script
(`Snippets.script`) that ends in the assertion of what the contract promises, so that it fails
exactly when the contract is broken, with the same element types, shapes and memories as the
case; the values are the script's own. A family's own builders live beside its checks (copy,
create, update_inplace, streams: `_..._script`), as a family may not import another's module."""

from __future__ import annotations

import os
from pathlib import Path

from conformance.testbed import tensors
from conformance.checks.context.snippets import Snippets

SENTINEL = 0x5A


REFERENCES = {"identity": "{0}", "relu": "np.maximum({0}, 0)", "add": "{0} + {1}", "add_relu": "np.maximum({0} + {1}, 0)",
              "sub_relu": "np.maximum({0} - {1}, 0)", "relu_neg_add": "np.minimum({0}, 0)"}


def session_run(sn: Snippets, model_path: Path | None, recipe: str, inputs, dt: tensors.DType, shape: tuple[int, ...]) -> str:
    """A session of the model on the EP, its inputs in CPU memory, computes numpy's result."""
    reference = REFERENCES[recipe].format(*(f"feeds[{name!r}]" for name in inputs))
    body = [sn.session_snippet(model_path), "rng = np.random.default_rng(11)",
            f"feeds = {{name: rng.integers(-8, 9, size={list(shape)}).astype(np.{dt.storage.name}) for name in {list(inputs)!r}}}",
            f"expected = ({reference}).astype(np.{dt.storage.name})",
            "(output,) = works('running the session', s.run, None, feeds)",
            f"same_bytes('model {recipe} ({dt.name}) on {sn.under_test.target.provider} against numpy', expected, np.asarray(output))"]
    return sn.script(f"model '{recipe}' ({dt.name} {list(shape)}) computes numpy's result on {sn.under_test.target.provider}", "\n".join(body))


def empty_run(sn: Snippets, model_path: Path | None, recipe: str, inputs, dt: tensors.DType, shape: tuple[int, ...]) -> str:
    """A session of the model on the EP, its inputs empty (a zero-sized dimension), runs and gives
    the empty output the model defines: numpy's result has that shape and element type, and no
    bytes to compare, so the assertion is on shape and element type."""
    reference = REFERENCES[recipe].format(*(f"feeds[{name!r}]" for name in inputs))
    body = [sn.session_snippet(model_path),
            f"feeds = {{name: np.zeros({list(shape)}, np.{dt.storage.name}) for name in {list(inputs)!r}}}",
            f"expected = ({reference}).astype(np.{dt.storage.name})  # empty: no bytes, only a shape and an element type",
            "(output,) = works('running the session on empty inputs', s.run, None, feeds)",
            "output = np.asarray(output)",
            "assert (output.shape, output.dtype) == (expected.shape, expected.dtype), "
            "f'expected an empty output of shape {expected.shape} and {expected.dtype}, got shape {output.shape} and {output.dtype}'",
            "print(f'an empty output of shape {output.shape} and {output.dtype}, as the model defines')"]
    return sn.script(f"model '{recipe}' ({dt.name} {list(shape)}, empty) runs on {sn.under_test.target.provider} to an empty output", "\n".join(body))


def placement(sn: Snippets, model_path: Path | None, recipe: str, inputs, shape: tuple[int, ...], variable: str,
              expected: tuple[str, str, int]) -> str:
    """A run of the model gives numpy's result and, where the EP records its kernels' inputs
    (the environment variable `variable`), every input was in the `expected` memory
    (device type, memory type, vendor id)."""
    reference = REFERENCES[recipe].format(*(f"feeds[{name!r}]" for name in inputs))
    body = ["log = os.path.join(os.environ.get('TMPDIR', '/tmp'), f'kernel-inputs-{os.getpid()}.log')",
            "if os.path.exists(log):\n    os.remove(log)"]
    if variable:
        body.append(f"os.environ[{variable!r}] = log  # the EP appends '<node> <input> <device type> <memory type> <vendor id>' per kernel input")
    body += [sn.session_snippet(model_path), "rng = np.random.default_rng(11)",
             f"feeds = {{name: rng.integers(-8, 9, size={list(shape)}).astype(np.float32) for name in {list(inputs)!r}}}",
             f"expected = ({reference}).astype(np.float32)",
             "(output,) = works('running the session', s.run, None, feeds)",
             f"same_bytes('model {recipe} against numpy', expected, np.asarray(output))"]
    if variable:
        want = f"{expected[0]} {expected[1]} 0x{expected[2]:X}"
        body += ["lines = open(log).read().splitlines() if os.path.exists(log) else []",
                 "assert lines, 'the EP recorded no kernel input'",
                 "for line in lines:",
                 "    node, index, where = line.split(' ', 2)",
                 f"    assert where == {want!r}, f'node {{node}} input {{index}}: expected its input in {want}, got {{where}}'",
                 "print(len(lines), 'kernel inputs, all in', " + repr(want) + ")"]
    return sn.script(f"the kernels of model '{recipe}' on {sn.under_test.target.provider} receive their inputs in the memory it declared", "\n".join(body))


def _cpu_only_session(model_path: Path | None) -> str:
    path = os.path.abspath(model_path) if model_path is not None else "<the model: not saved in this run>"
    return f"s = works('a session on the CPU EP alone', ort.InferenceSession, {path!r}, providers=['CPUExecutionProvider'])"


def cpu_path(sn: Snippets, path: str, dt: tensors.DType, shape: tuple[int, ...], model_path: Path | None) -> str:
    """A public copy path between two CPU values, with no EP in it, delivers the source bytes."""
    t, what = dt.onnx_type, f"{path} of {dt.name} {list(shape)} between CPU values"
    body = [sn.values("values", dt, shape, 12), sn.sentinel("landing", dt, shape, SENTINEL), "got = landing"]
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


def host_accessible_write(sn: Snippets, path: str, dt: tensors.DType, shape: tuple[int, ...], model_path: Path | None) -> str:
    """A CPU-side write into a HOST_ACCESSIBLE value lands where the CPU sees it, at the value's address."""
    t, what = dt.onnx_type, f"{path} of {dt.name} {list(shape)} into HOST_ACCESSIBLE memory"
    body = [f"dst = works('allocating HOST_ACCESSIBLE memory', ort.OrtValue.ortvalue_from_shape_and_type, {list(shape)}, {t}, memory_info=HOST_ACCESSIBLE)",
            sn.sentinel("landing", dt, shape, SENTINEL), "ctypes.memmove(dst.data_ptr(), landing.tobytes(), dst.tensor_size_in_bytes())",
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


def iobinding_in_place(sn: Snippets, model_path: Path | None, recipe: str, dt: tensors.DType, shape: tuple[int, ...], kind: str) -> str:
    """A run with the input and a preallocated output bound in `kind` memory writes the result
    into that output, where it is."""
    reference = REFERENCES[recipe].format("x")
    body = [sn.session_snippet(model_path), f"x = np.random.default_rng(11).integers(-8, 9, size={list(shape)}).astype(np.{dt.storage.name})",
            f"expected = ({reference}).astype(np.{dt.storage.name})", sn.place("source", "x", kind, dt),
            sn.sentinel("landing", dt, shape, SENTINEL), sn.place("output", "landing", kind, dt),
            "b = s.io_binding()", "b.bind_ortvalue_input(s.get_inputs()[0].name, source)", "b.bind_ortvalue_output(s.get_outputs()[0].name, output)",
            "works('run_with_iobinding', s.run_with_iobinding, b)",
            "assert b.get_outputs()[0].data_ptr() == output.data_ptr(), "
            "f'the bound output: expected it used in place at 0x{output.data_ptr():x}, got 0x{b.get_outputs()[0].data_ptr():x}'",
            f"same_bytes('the preallocated output', expected, {sn.read('output', 'landing', kind, dt)})"]
    return sn.script(f"IOBinding of model '{recipe}' ({dt.name} {list(shape)}) with its input and output bound in {kind} memory", "\n".join(body))


def lifecycle(sn: Snippets, model_path: Path | None, recipe: str, shape: tuple[int, ...]) -> str:
    """Two rounds of: use the EP (a value on its DEFAULT memory, a session run with IOBinding),
    release what was made, unregister the library, find its EP devices gone; the library
    registered again between them. A crash in a release or unregister path kills the script."""
    target, index = sn.under_test.target, sn.under_test.index
    library = os.path.abspath(target.library or "")
    path = os.path.abspath(model_path) if model_path is not None else "<the model: not saved in this run>"
    reference = REFERENCES[recipe].format("x")
    body = f"""import gc

dev = DEFAULT = HOST_ACCESSIBLE = None  # fetched anew each round: a registration's objects die with it
for round_ in (1, 2):
    if round_ == 2:
        works('registering the library again', ort.register_execution_provider_library, {target.registration!r}, {library!r})
    devices = [d for d in ort.get_ep_devices() if d.ep_name == {target.provider!r}]
    assert len(devices) > {index}, f'round {{round_}}: expected EP device {index}, got {{len(devices)}} devices'
    memory = devices[{index}].memory_info(ort.OrtDeviceMemoryType.DEFAULT)
    x = np.random.default_rng(11).integers(-8, 9, size={list(shape)}).astype(np.float32)
    source = place(x, memory, 1)
    so = ort.SessionOptions()
    so.add_provider_for_devices([devices[{index}]], {target.provider_options!r})
    s = works(f'round {{round_}}: creating the session', ort.InferenceSession, {path!r}, so, enable_fallback=0)
    s.disable_fallback()
    b = s.io_binding()
    b.bind_ortvalue_input(s.get_inputs()[0].name, source)
    b.bind_output(s.get_outputs()[0].name, 'cpu')
    works(f'round {{round_}}: running', s.run_with_iobinding, b)
    same_bytes(f'round {{round_}}: the result', ({reference}).astype(np.float32), b.copy_outputs_to_cpu()[0])
    del s, b, source, memory, devices
    gc.collect()  # their destructors call into the library
    works(f'round {{round_}}: unregistering the library', ort.unregister_execution_provider_library, {target.registration!r})
    left = [d for d in ort.get_ep_devices() if d.ep_name == {target.provider!r}]
    assert not left, f'round {{round_}}: expected no EP device of {target.provider} after unregistering, got {{len(left)}}'
"""
    return sn.script(f"register, use, release, unregister, register again: {target.library}", body)


def refusal_message(sn: Snippets, what: str, body: list[str], call: str, named: str, alternatives) -> str:
    """`call` (after the set-up lines `body`) is refused with a message that names `named`:
    every pattern of one of `alternatives` occurs in it. An accepted call exits 0 (its refusal
    contract's failure, not this one's)."""
    attempt = ["refusal = None", "try:", f"    {call}", "except Exception as error:", "    refusal = error"]
    return refusal_message_ending(sn.script(f"the refusal of {what} names {named}", "\n".join(body + attempt)), what, named, alternatives)


def refusal_message_ending(script: str, what: str, named: str, alternatives) -> str:
    """`script`, which leaves the exception it was refused with in `refusal` (None: accepted),
    followed by the assertion that the refusal's message names `named`."""
    return script.rstrip() + "\n" + "\n".join([
        "import re",
        f"if refusal is None:\n    print({f'accepted, so there is no refusal to read: {what}'!r})\n    raise SystemExit(0)",
        f"WAYS = {[list(a) for a in alternatives]!r}  # the message names it when every pattern of one way occurs in it",
        "message = str(refusal)",
        f"assert any(all(re.search(p, message, re.IGNORECASE) for p in way) for way in WAYS), "
        f"{f'the refusal of {what}: expected a message naming {named}, got: '!r} + repr(message)",
        f"print({f'the refusal of {what} names {named}:'!r}, message.splitlines()[0] if message.strip() else '')"]) + "\n"
