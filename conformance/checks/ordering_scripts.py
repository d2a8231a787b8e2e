"""Reproducers of the ordering family: standalone scripts (`Snippets.script`) that redo a case
of `conformance.checks.ordering` and read every result at the moment the contract names (the
return of the call, the stream's release, synchronize_outputs()), never later: a copy or a
kernel still queued then leaves the sentinel or an old value, so a build that breaks the order
fails the script and a good one passes it.
"""

from __future__ import annotations

from pathlib import Path

from conformance.checks.context.snippets import Snippets
from conformance.checks.context.steps import REFERENCES

SHAPE = (64, 33)  # the copies' tensors: float32, 8,448 bytes
NO_SYNC_OPTION = "disable_synchronize_execution_providers"  # kOrtRunOptionsConfigDisableSynchronizeExecutionProviders
SENTINEL, LANDING, OVERWRITE = 0x5A, 0xA5, 0x3C  # outputs not yet written, reads not yet landed, sources overwritten


def integers(seed: int, shape: tuple[int, ...]) -> str:
    """The expression of small float32 integers of `shape` (exact through every model), as the check makes them (`ordering._integers`)."""
    return f"np.random.default_rng({seed}).integers(-8, 9, size={list(shape)}).astype(np.float32)"


def _device_value(name: str, byte: int, shape: tuple[int, ...]) -> str:
    return (f"{name} = works('allocating in DEFAULT memory', ort.OrtValue.ortvalue_from_shape_and_type, {list(shape)}, 1, memory_info=DEFAULT)\n"
            f"works('filling {name} (copy_tensors, no stream)', ort.copy_tensors, [cpu_value(sentinel({list(shape)}, np.float32, {byte:#x}))], [{name}], None)")


def _read_now(value: str, what: str, shape: tuple[int, ...]) -> str:
    """Copies `value` to a CPU sentinel with no stream and keeps what the sentinel holds at the copy's return."""
    return (f"landing = sentinel({list(shape)}, np.float32, {LANDING:#x})\n"
            f"works('copy_tensors default>cpu, no stream ({what})', ort.copy_tensors, [{value}], [cpu_value(landing)], None)\n"
            "at_return = landing.copy()  # at once: a copy with no stream is complete when it returns")


def copy_without_stream(sn: Snippets, direction: str) -> str:
    body = [f"values = filled({list(SHAPE)}, np.float32, 21)", f"overwrite = sentinel({list(SHAPE)}, np.float32, {OVERWRITE:#x})"]
    if direction == "cpu>default":
        body += ["host = values.copy()",
                 f"destination = works('allocating in DEFAULT memory', ort.OrtValue.ortvalue_from_shape_and_type, {list(SHAPE)}, 1, memory_info=DEFAULT)",
                 "works('copy_tensors cpu>default, no stream', ort.copy_tensors, [cpu_value(host)], [destination], None)",
                 "host[...] = overwrite  # at once: a copy complete on return no longer reads its source",
                 _read_now("destination", "reading it back", SHAPE)]
    elif direction == "default>cpu":
        body += ["device = place(values.copy(), DEFAULT, 1)", _read_now("device", "under test", SHAPE)]
    else:
        body += ["first = place(values.copy(), DEFAULT, 1)",
                 f"second = works('allocating in DEFAULT memory', ort.OrtValue.ortvalue_from_shape_and_type, {list(SHAPE)}, 1, memory_info=DEFAULT)",
                 "works('copy_tensors default>default, no stream', ort.copy_tensors, [first], [second], None)",
                 "works('overwriting the source (copy_tensors cpu>default, no stream)', ort.copy_tensors, [cpu_value(overwrite)], [first], None)",
                 _read_now("second", "reading the destination back", SHAPE)]
    body.append(f"same_bytes('copy_tensors {direction} with no stream, read at once', values, at_return)")
    return sn.script(f"copy_tensors {direction} with no stream is complete when it returns", "\n".join(body))


def copy_on_stream(sn: Snippets) -> str:
    body = ["stream = works('create_sync_stream', dev.create_sync_stream)", f"values = filled({list(SHAPE)}, np.float32, 22)",
            _device_value("first", SENTINEL, SHAPE), _device_value("second", SENTINEL, SHAPE),
            f"landing = sentinel({list(SHAPE)}, np.float32, {LANDING:#x})",
            "# three copies queued on one stream with no wait between them: each must run after the one before",
            "works('copy_tensors cpu>default on the stream', ort.copy_tensors, [cpu_value(values)], [first], stream)",
            "works('copy_tensors default>default on the stream', ort.copy_tensors, [first], [second], stream)",
            "works('copy_tensors default>cpu on the stream', ort.copy_tensors, [second], [cpu_value(landing)], stream)",
            "del stream  # releasing the stream is the one wait onnxruntime's Python has for it",
            "same_bytes('cpu>default, default>default, default>cpu on one stream, read once it was released', values, landing)"]
    return sn.script("copies queued on one sync stream run in order and are complete once it is released", "\n".join(body))


def _feeds(inputs, shape: tuple[int, ...], seed: int) -> list[str]:
    return [f"feeds = {{name: np.random.default_rng({seed} + i).integers(-8, 9, size={list(shape)}).astype(np.float32) "
            f"for i, name in enumerate({list(inputs)!r})}}"]


def _expected(recipe: str, inputs, feeds: str = "feeds") -> str:
    return "expected = (" + REFERENCES[recipe].format(*(f"{feeds}[{name!r}]" for name in inputs)) + ").astype(np.float32)"


def run_outputs(sn: Snippets, model_path: Path | None, recipe: str, inputs, shape: tuple[int, ...], path: str, *, unsynchronized: bool = False) -> str:
    """A run whose output is read at the moment it must be complete: when run() or
    run_with_iobinding() returns, or (unsynchronized) when synchronize_outputs() returns."""
    body = [sn.session_snippet(model_path), *_feeds(inputs, shape, 31), _expected(recipe, inputs)]
    if path == "run":
        body += ["(output,) = works('running the session', s.run, None, feeds)",
                 "at_return = np.array(output, copy=True)  # at once: the run's outputs are complete when it returns"]
        when = "when run() returns"
    else:
        body += ["b = s.io_binding()",
                 "placed = {name: place(value, DEFAULT, 1) for name, value in feeds.items()}",
                 "for name, value in placed.items():\n    b.bind_ortvalue_input(name, value)",
                 _device_value("output", SENTINEL, shape), "b.bind_ortvalue_output(s.get_outputs()[0].name, output)"]
        if unsynchronized:
            body += ["ro = ort.RunOptions()", f"ro.add_run_config_entry({NO_SYNC_OPTION!r}, '1')",
                     "works('run_with_iobinding with the EPs not synchronised', s.run_with_iobinding, b, ro)",
                     "works('synchronize_outputs', b.synchronize_outputs)"]
            when = "when synchronize_outputs() returns"
        else:
            body.append("works('run_with_iobinding', s.run_with_iobinding, b)")
            when = "when run_with_iobinding() returns"
        body.append(_read_now("output", "the bound output", shape))
    body.append(f"same_bytes('the output of model {recipe}, read {when}', expected, at_return)")
    return sn.script(f"model '{recipe}' on {sn.under_test.target.provider}: its output is complete {when}", "\n".join(body))


def bound_input(sn: Snippets, model_path: Path | None, shape: tuple[int, ...], path: str, request: str) -> str:
    bind = "b.bind_cpu_input('x', x)" if path == "bind-cpu-input" else "b.bind_ortvalue_input('x', cpu_value(x))"
    first = "ro" if request == "after-unsynchronized-run" else "None"
    body = [sn.session_snippet(model_path), f"xs = [{integers(41, shape)}, {integers(42, shape)}]  # kept alive: an upload may read them later",
            "b = s.io_binding()", "outputs = []",
            "for _ in xs:", f"    {_device_value('output', SENTINEL, shape).replace(chr(10), chr(10) + '    ')}", "    outputs.append(output)"]
    if first == "ro":
        body += ["ro = ort.RunOptions()", f"ro.add_run_config_entry({NO_SYNC_OPTION!r}, '1')  # the first run leaves its work queued"]
    body += ["for round, (x, output) in enumerate(zip(xs, outputs)):",
             f"    {bind}  # the upload: on the device before the kernel reads it",
             "    b.bind_ortvalue_output('y', output)",
             "    works(f'run {round + 1}', s.run_with_iobinding, b" + (", ro if round == 0 else None)" if first == "ro" else ")"),
             "for round, (x, output) in enumerate(zip(xs, outputs)):",
             f"    {_read_now('output', 'the bound output', shape).replace(chr(10), chr(10) + '    ')}",
             "    same_bytes(f'run {round + 1}: Relu of the input bound just before it', np.maximum(x, 0), at_return)"]
    return sn.script(f"an input bound with {path} is on the device before the kernel reads it ({request})", "\n".join(body))


def produced_values(sn: Snippets, model_path: Path | None, shape: tuple[int, ...], path: str) -> str:
    body = [sn.session_snippet(model_path), f"x = {integers(51, shape)}", f"update = {integers(52, shape)}",
            "source = place(x, DEFAULT, 1)", _device_value("output", SENTINEL, shape),
            "b = s.io_binding()", "b.bind_ortvalue_input('x', source)", "b.bind_ortvalue_output('y', output)",
            "works('run_with_iobinding', s.run_with_iobinding, b)", "produced = b.get_outputs()[0]  # the value the run produced"]
    if path == "copy_tensors":
        body += [_read_now("produced", "the produced value", shape),
                 "same_bytes('copy_tensors of the produced value, right after the run', np.maximum(x, 0), at_return)"]
    else:
        update, call = (("update", "update_inplace(numpy array)") if path == "update_inplace-numpy" else
                        ("place(update, DEFAULT, 1)", "update_inplace(OrtValue)"))
        body += [f"works('{call} of the produced value', produced.update_inplace, {update})",
                 _read_now("produced", "the updated value", shape),
                 f"same_bytes('the produced value after {path}, made right after the run', update, at_return)"]
    return sn.script(f"{path} on a value a run has just produced ({sn.under_test.target.provider})", "\n".join(body))


def concurrent_sessions(sn: Snippets, model_path: Path | None, recipe: str, inputs, shape: tuple[int, ...], rounds: int) -> str:
    reference = REFERENCES[recipe].format(*(f"feeds[{name!r}]" for name in inputs))
    body = ["import threading", "sessions = []",
            "for _ in range(2):", "    " + sn.session_snippet(model_path).replace("\n", "\n    "), "    sessions.append(s)",
            "barrier, wrong = threading.Barrier(2), []",
            "def work(t):",
            "    barrier.wait()",
            f"    for i in range({rounds}):",
            f"        feeds = {{name: np.random.default_rng(1000 * t + 10 * i + k).integers(-8, 9, size={list(shape)}).astype(np.float32)",
            f"                 for k, name in enumerate({list(inputs)!r})}}",
            "        try:",
            "            (output,) = sessions[t].run(None, feeds)",
            "        except Exception as error:  # a run that fails while the other session runs fails the script too",
            "            wrong.append(f'session {t + 1}, run {i + 1}: {type(error).__name__}: {error}')",
            "            return",
            f"        expected = ({reference}).astype(np.float32)",
            "        if not np.array_equal(np.asarray(output), expected):",
            "            wrong.append(f'session {t + 1}, run {i + 1}: {np.count_nonzero(np.asarray(output) != expected)} of {expected.size} values wrong')",
            "threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]",
            "for thread in threads:\n    thread.start()", "for thread in threads:\n    thread.join()",
            "assert not wrong, f'two sessions run at once from two threads: expected each run to compute its own inputs, got {wrong[:5]}'",
            f"print('two sessions, {rounds} runs each, all right')"]
    return sn.script(f"two sessions of model '{recipe}' on {sn.under_test.target.provider} run at once from two threads", "\n".join(body))
