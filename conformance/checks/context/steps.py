"""One reproducer template per kind of step a check takes: a copy, a bad copy request, an
update_inplace from numpy or from an OrtValue, a refused update_inplace, a timing, a session run
(also on empty inputs), an IOBinding run, copies on a sync stream. Each returns a complete script
(`Snippets.script`) that ends in the assertion of what the contract promises, so that it fails
exactly when the contract is broken. The checks build theirs from here, with the same element
types, shapes and memories as the case; the values are the script's own."""

from __future__ import annotations

import os
from pathlib import Path

from conformance.testbed import tensors
from conformance.checks.context.snippets import Snippets

SENTINEL = 0x5A


def copy(sn: Snippets, source_kind: str, destination_kind: str, dt: tensors.DType, shape: tuple[int, ...], *, may_refuse: bool = False) -> str:
    """copy_tensors from `source_kind` to `destination_kind` memory delivers the source bytes."""
    what = f"copy_tensors {source_kind}>{destination_kind} of {dt.name} {list(shape)}"
    call = "ort.copy_tensors([source], [destination], None)"
    if may_refuse:
        attempt = f"try:\n    {call}\nexcept Exception as error:\n    print('refused, which this contract allows:', error)\n    raise SystemExit(0)"
    else:
        attempt = f"works({what!r}, ort.copy_tensors, [source], [destination], None)"
    body = [sn.values("values", dt, shape, 4), sn.place("source", "values", source_kind, dt),
            sn.sentinel("landing", dt, shape, SENTINEL), sn.place("destination", "landing", destination_kind, dt), attempt,
            f"same_bytes({what!r}, values, {sn.read('destination', 'landing', destination_kind, dt)}{sn.nbytes(dt, shape)})"]
    return sn.script(f"{what} on {sn.under_test.target.provider}", "\n".join(body))


def bad_copy(sn: Snippets, request: str, sources, destinations) -> str:
    """A bad copy_tensors request is refused with a message, and writes into no destination.
    `sources`, `destinations`: (memory kind, element type, shape) of each."""
    body = []
    for index, (kind, dt, shape) in enumerate(sources):
        body += [sn.values(f"values{index}", dt, shape, 8 + index), sn.place(f"source{index}", f"values{index}", kind, dt)]
    for index, (kind, dt, shape) in enumerate(destinations):
        body += [sn.sentinel(f"landing{index}", dt, shape, SENTINEL), sn.place(f"destination{index}", f"landing{index}", kind, dt),
                 sn.sentinel(f"unchanged{index}", dt, shape, SENTINEL)]
    sources_list = "[" + ", ".join(f"source{i}" for i in range(len(sources))) + "]"
    destinations_list = "[" + ", ".join(f"destination{i}" for i in range(len(destinations))) + "]"
    body.append(f"refused('copy_tensors with a bad request ({request})', ort.copy_tensors, {sources_list}, {destinations_list}, None)")
    for index, (kind, dt, _shape) in enumerate(destinations):
        body.append(f"same_bytes('destination {index} after the refused request', unchanged{index}, "
                    f"{sn.read(f'destination{index}', f'landing{index}', kind, dt)})")
    # the state after the refusal: the sources hold their values, the destinations take a valid copy
    for index, (kind, dt, _shape) in enumerate(sources):
        body.append(f"same_bytes('source {index} after the refused request', values{index}, "
                    f"{sn.read(f'source{index}', f'values{index}', kind, dt)})")
    for index, (kind, dt, shape) in enumerate(destinations):
        from_kind = sources[index][0] if index < len(sources) else (sources[0][0] if sources else "cpu")
        body += [sn.values(f"again{index}", dt, shape, 9 + index), sn.place(f"again_source{index}", f"again{index}", from_kind, dt),
                 f"works('a valid copy into destination {index} after the refusal', ort.copy_tensors, [again_source{index}], [destination{index}], None)",
                 f"same_bytes('destination {index} after a valid copy that followed the refusal', again{index}, "
                 f"{sn.read(f'destination{index}', f'landing{index}', kind, dt)})"]
    return sn.script(f"copy_tensors refuses a bad request ({request}) on {sn.under_test.target.provider}", "\n".join(body))


def update_from_numpy(sn: Snippets, dt: tensors.DType, shape: tuple[int, ...], kind: str, layout: str) -> str:
    """update_inplace of a numpy array, laid out as `layout`, keeps the destination's address and
    copies the array's logical values."""
    lay = {"contiguous": "source = values",
           "strided": "wide = np.zeros(values.shape[:-1] + (values.shape[-1] * 2,), values.dtype)\nwide[..., ::2] = values\nsource = wide[..., ::2]",
           "transposed": "source = np.ascontiguousarray(values.T).T",
           "read-only": "source = values.copy()\nsource.flags.writeable = False"}[layout]
    if layout in ("strided", "transposed"):
        lay += "\nassert not source.flags.c_contiguous, 'the source is not laid out non-contiguous'"
    what = f"update_inplace of a {layout} numpy {dt.name} {list(shape)} array into {kind} memory"
    body = [sn.values("values", dt, shape, 1), lay, sn.sentinel("landing", dt, shape, SENTINEL), sn.place("destination", "landing", kind, dt),
            "before = destination.data_ptr()", f"works({what!r}, destination.update_inplace, source)", _same_address(),
            f"same_bytes({what!r}, values, {sn.read('destination', 'landing', kind, dt)})"]
    return sn.script(f"{what} on {sn.under_test.target.provider}", "\n".join(body))


def update_from_ortvalue(sn: Snippets, source_kind: str, destination_kind: str, dt: tensors.DType, shape: tuple[int, ...]) -> str:
    what = f"update_inplace(OrtValue) {source_kind}>{destination_kind} of {dt.name} {list(shape)}"
    body = [sn.values("values", dt, shape, 2), sn.place("source", "values", source_kind, dt),
            sn.sentinel("landing", dt, shape, SENTINEL), sn.place("destination", "landing", destination_kind, dt),
            "before = destination.data_ptr()", f"works({what!r}, destination.update_inplace, source)", _same_address(),
            f"same_bytes({what!r}, values, {sn.read('destination', 'landing', destination_kind, dt)}{sn.nbytes(dt, shape)})"]
    return sn.script(f"{what} on {sn.under_test.target.provider}", "\n".join(body))


def update_mismatch(sn: Snippets, source: str, kind: str, src_dt: tensors.DType, src_shape: tuple[int, ...], request: str) -> str:
    """update_inplace refuses a source of another element type or size, and leaves the
    float32 [2, 3] destination as it was (its sentinel) at the same address."""
    float32 = tensors.DTYPES["float32"]
    body = [sn.values("values", src_dt, src_shape, 3)]
    body.append(sn.place("payload", "values", kind, src_dt) if source == "ortvalue" else "payload = values")
    body += [sn.sentinel("landing", float32, (2, 3), SENTINEL), sn.place("destination", "landing", kind, float32),
             sn.sentinel("unchanged", float32, (2, 3), SENTINEL), "before = destination.data_ptr()",
             f"refused('update_inplace({source}) of a {src_dt.name} {list(src_shape)} source into a float32 [2, 3] destination ({request})', "
             "destination.update_inplace, payload)",
             _same_address(), f"same_bytes('the destination after the refused update_inplace', unchanged, {sn.read('destination', 'landing', kind, float32)})",
             # the state after the refusal: the destination takes a valid update whole
             sn.values("again", float32, (2, 3), 10), sn.place("again_source", "again", kind, float32) if source == "ortvalue" else "again_source = again",
             "works('a valid update_inplace after the refused one', destination.update_inplace, again_source)", _same_address(),
             f"same_bytes('the destination after a valid update_inplace that followed the refusal', again, {sn.read('destination', 'landing', kind, float32)})"]
    return sn.script(f"update_inplace({source}) refuses a mismatched source ({request}) in {kind} memory", "\n".join(body))


def staging(sn: Snippets, dt: tensors.DType, shape: tuple[int, ...], margin: float, slack: float, trials: int) -> str:
    """update_inplace(OrtValue) device to device is no slower than a copy_tensors round trip
    through the CPU (best of `trials` each, within `margin` and `slack` seconds)."""
    body = [sn.values("values", dt, shape, 4), sn.place("source", "values", "default", dt),
            sn.sentinel("landing", dt, shape, SENTINEL), sn.place("destination", "landing", "default", dt),
            sn.sentinel("staged_landing", dt, shape, SENTINEL), sn.place("staging", "staged_landing", "cpu", dt),
            sn.sentinel("mark", dt, (1,), SENTINEL), sn.place("marker", "mark", "default", dt), sn.place("marker_on_cpu", "mark.copy()", "cpu", dt),
            "works('update_inplace(OrtValue) default>default', destination.update_inplace, source)",
            f"same_bytes('update_inplace(OrtValue) default>default', values, {sn.read('destination', 'landing', 'default', dt)})",
            "import time", "",
            "def best(step):",
            f"    times = []\n    for _ in range({trials}):\n        start = time.perf_counter()\n        step()",
            "        ort.copy_tensors([marker], [marker_on_cpu], None)  # waits for copies the EP only queued",
            "        times.append(time.perf_counter() - start)\n    return min(times)", "", "",
            "direct = best(lambda: destination.update_inplace(source))",
            "staged = best(lambda: (ort.copy_tensors([source], [staging], None), ort.copy_tensors([staging], [destination], None)))",
            f"assert direct <= staged * {margin} + {slack}, f'update_inplace device to device: expected at most {margin} x the round trip through the CPU "
            "({staged * 1e3:.3f} ms), got {direct * 1e3:.3f} ms'",
            "print(f'device to device {direct * 1e3:.3f} ms, through the CPU {staged * 1e3:.3f} ms')"]
    return sn.script(f"update_inplace(OrtValue) device to device does not stage through the host ({dt.name} {list(shape)})", "\n".join(body))


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


def stream_copies(sn: Snippets, dt: tensors.DType, shape: tuple[int, ...]) -> str:
    """Copies CPU > DEFAULT > CPU given the EP device's sync stream deliver the bytes, read once the stream is released."""
    body = ["stream = works('create_sync_stream', dev.create_sync_stream)", sn.values("values", dt, shape, 12),
            "source = cpu_value(values)",
            f"destination = works('allocating', ort.OrtValue.ortvalue_from_shape_and_type, {list(shape)}, {dt.onnx_type}, memory_info=DEFAULT)",
            "works('copy_tensors cpu>default on the stream', ort.copy_tensors, [source], [destination], stream)",
            sn.sentinel("landing", dt, shape, 0xA5),
            "works('copy_tensors default>cpu on the stream', ort.copy_tensors, [destination], [cpu_value(landing)], stream)",
            "del stream  # releasing the stream is the one wait onnxruntime's Python has for it: the copies may be queued until then",
            "same_bytes('copies on the sync stream, read once the stream was released', values, landing)"]
    return sn.script("copies on the EP device's sync stream deliver the bytes", "\n".join(body))


def _same_address() -> str:
    return "assert destination.data_ptr() == before, f'the destination: expected data_ptr() 0x{before:x}, got 0x{destination.data_ptr():x}'"


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


def _layout(name: str) -> str:
    """Lines that make `source`, the array `values` laid out as `name`."""
    return {"contiguous": "source = values.copy()",
            "read-only": "source = values.copy()\nsource.flags.writeable = False",
            "strided": "wide = np.zeros(values.shape[:-1] + (values.shape[-1] * 2,), values.dtype)\nwide[..., ::2] = values\nsource = wide[..., ::2]",
            "transposed": "source = np.ascontiguousarray(values.T).T"}[name]


def _described(what: str, value: str, dt: tensors.DType, shape: tuple[int, ...]) -> str:
    """The assertion that `value` reports the shape, element type and byte size asked for."""
    asked = (list(shape), dt.onnx_type, dt.nbytes(tensors.element_count(shape)))
    return (f"said = (list({value}.shape()), {value}.element_type(), {value}.tensor_size_in_bytes())\n"
            f"assert said == {asked!r}, f{what + ': expected (shape, element type, bytes) ' + repr(asked) + ', got '!r}" " + repr(said)")


def from_numpy(sn: Snippets, dt: tensors.DType, shape: tuple[int, ...], layout: str, device_args: tuple) -> str:
    """ortvalue_from_numpy gives a CPU value of the array's shape, type, size and logical values."""
    what = f"ortvalue_from_numpy of a {layout} {dt.name} {list(shape)} array"
    args = "".join(f", {a!r}" for a in device_args)
    body = [sn.values("values", dt, shape, 11), _layout(layout), f"value = works({what!r}, ort.OrtValue.ortvalue_from_numpy, source{args})",
            _described(what, "value", dt, shape),
            f"assert value.device_name().lower() == 'cpu', f'{what}: expected a CPU value, got ' + value.device_name()",
            f"same_bytes({what!r}, values, read(value, values, {dt.onnx_type}))"]
    return sn.script(f"{what} on {sn.under_test.target.provider}", "\n".join(body))


def read_only_source(sn: Snippets, dt: tensors.DType, shape: tuple[int, ...]) -> str:
    """A write through a value made from a read-only array leaves the array as it was."""
    body = [sn.values("values", dt, shape, 12), _layout("read-only"), "value = ort.OrtValue.ortvalue_from_numpy(source)",
            "print('the value aliases the read-only array:', value.data_ptr() == source.ctypes.data)",
            sn.sentinel("other", dt, shape, SENTINEL),
            "try:\n    value.update_inplace(other)\nexcept Exception as error:\n    print('update_inplace refused:', error)",
            "same_bytes('the read-only array after a write through the value made from it', values, source)"]
    return sn.script("ortvalue_from_numpy of a read-only array gives no way to write into it", "\n".join(body))


def from_shape_and_type(sn: Snippets, dt: tensors.DType, shape: tuple[int, ...], kind: str, form: str) -> str:
    """ortvalue_from_shape_and_type gives a value of the shape, type and size asked for, in the
    memory asked for, that holds what is copied into it."""
    what = f"ortvalue_from_shape_and_type({list(shape)}, {dt.name}) in {kind} memory ({form})"
    args = {"default-args": "", "device-args": ", 'cpu', 0", "memory-info": f", memory_info={sn.memory_expr(kind)}"}[form]
    body = [f"value = works({what!r}, ort.OrtValue.ortvalue_from_shape_and_type, {list(shape)}, {dt.onnx_type}{args})",
            _described(what, "value", dt, shape), sn.values("values", dt, shape, 13), "source = cpu_value(values, %d)" % dt.onnx_type,
            "if value.device_name().lower() == 'cpu':\n    ctypes.memmove(value.data_ptr(), source.data_ptr(), value.tensor_size_in_bytes())\n"
            f"else:\n    works('copy_tensors cpu>{kind}', ort.copy_tensors, [source], [value], None)",
            f"same_bytes({what!r}, values, read(value, values, {dt.onnx_type}){sn.nbytes(dt, shape)})"]
    return sn.script(f"{what} on {sn.under_test.target.provider}", "\n".join(body))


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
