"""The life of a plugin EP library: register, use, release, unregister, register again.

The check unregisters the library that the worker registered when it started, so it must run
in a process of its own that is closed after it (`own_process: true` in the contract): a crash
or a hang in a release or unregister path then costs this one result.
"""

from __future__ import annotations

import os
from pathlib import Path
import gc
from typing import Any, Callable, Iterator

from conformance.testbed import tensors
from conformance.calls import Call
from conformance.checks.registry import check
from conformance.findings import NotApplicable, NotRun, Violation
from conformance.checks.context.reference import reference, small_integers
from conformance.checks.context import SessionInfo
from conformance.checks.context.snippets import Snippets
from conformance.checks.context import steps
from conformance.checks.context import CheckContext
from conformance import proofs

RECIPE, SHAPE = "relu", (2, 3)


def _devices(ctx: CheckContext) -> list:
    return [d for d in ctx.ort.get_ep_devices() if d.ep_name == ctx.target.provider]


def _use(ctx: CheckContext, model: bytes, held: dict[str, Any]) -> str:
    """Creates a session and values on the EP device, runs, reads back; returns what is wrong
    ('' when right). Everything created is kept in `held`, so that releasing it is a step of
    its own."""
    ort, dt = ctx.ort, tensors.DTYPES["float32"]
    devices = _devices(ctx)
    if len(devices) <= ctx.device_index:
        return f"{ctx.target.provider} lists {len(devices)} EP devices; device {ctx.device_index} is gone"
    device = devices[ctx.device_index]
    memory = device.memory_info(ort.OrtDeviceMemoryType.DEFAULT)
    (values,) = small_integers(("x",), dt, SHAPE).values()
    held["input"] = ort.OrtValue.ortvalue_from_numpy(values)
    if memory is not None:
        with ctx.calling(Call("allocate", "default")):
            held["device_input"] = ort.OrtValue.ortvalue_from_shape_and_type(list(SHAPE), values.dtype, memory_info=memory)
        with ctx.calling(Call("copy_tensors", "cpu>default")):
            ort.copy_tensors([held["input"]], [held["device_input"]], None)
    with ctx.calling(Call("InferenceSession creation")):
        held["session"] = ctx.create_session(model, device)
    # The library is used only where its EP runs the node: otherwise nothing here involves it.
    info = SessionInfo(held["session"], None, RECIPE, ctx.assignment_of(held["session"]))
    ctx.require_nodes_on_ep(info)
    binding = held["session"].io_binding()
    binding.bind_ortvalue_input(held["session"].get_inputs()[0].name, held.get("device_input", held["input"]))
    binding.bind_output(held["session"].get_outputs()[0].name, "cpu")
    held["binding"] = binding
    with ctx.calling(Call("run_with_iobinding", "default" if memory is not None else "cpu")), ctx.running(info):
        held["session"].run_with_iobinding(binding)
    (output,) = binding.copy_outputs_to_cpu()
    diff = ctx.compare(tensors.payload(reference(RECIPE, {"x": values}).astype(dt.storage), dt), tensors.payload(output, dt))
    return f"the session gave wrong values: {diff.describe()}" if diff else ""


def _unregister(ctx: CheckContext) -> None:
    with ctx.calling(Call("unregister_execution_provider_library")):
        ctx.ort.unregister_execution_provider_library(ctx.target.registration)


def _release(ctx: CheckContext, held: dict[str, Any]) -> None:
    with ctx.calling(Call("releasing the EP's values and session")):  # their destructors call into the library
        held.clear()
        gc.collect()


@check("lifecycle.plugin-library", apis=("plugin_libraries",))
def plugin_library(ctx: CheckContext) -> Iterator[Violation]:
    target = ctx.target
    if not (target.registration and target.library):
        raise NotApplicable("the EP is not loaded from a plugin library")
    model, path = ctx.models.get(RECIPE, tensors.DTYPES["float32"], SHAPE)
    held: dict[str, Any]
    ort, held = ctx.ort, {}
    ctx.device = None  # the worker's own EP device object dies with the registration
    snippet = _lifecycle_script(ctx.snippets, path, RECIPE, SHAPE)
    steps: list[tuple[str, Callable[[], str | None]]] = []
    for round_ in (1, 2):
        if round_ == 2:
            steps.append(("registering the library again", lambda: ort.register_execution_provider_library(target.registration, target.library)))
        steps += [
            (f"round {round_}: creating a session and values on the EP device and running", lambda: _use(ctx, model, held)),
            (f"round {round_}: releasing the values and the session", lambda: _release(ctx, held)),
            (f"round {round_}: unregistering the library", lambda: _unregister(ctx)),
            (f"round {round_}: listing EP devices after unregistering",
             lambda: f"{len(_devices(ctx))} devices of {target.provider} are still listed" if _devices(ctx) else ""),
        ]
    for step, run in steps:
        ctx.attempt(step, snippet)  # a crash in a release or unregister path names its step
        try:
            wrong = run()
        except NotRun:
            raise
        except Exception as exc:
            yield Violation(f"{step} failed: {type(exc).__name__}: {exc}", expected="the step succeeds", actual=str(exc), reproducer=snippet)
            return
        if wrong:
            yield Violation(f"{step}: {wrong}", reproducer=snippet)
            return
        ctx.tally(proofs.STEPS_DONE, 1)


# --- the reproducer ---------------------------------------------------------------------------


def _lifecycle_script(sn: Snippets, model_path: Path | None, recipe: str, shape: tuple[int, ...]) -> str:
    """Two rounds of: use the EP (a value on its DEFAULT memory, a session run with IOBinding),
    release what was made, unregister the library, find its EP devices gone; the library
    registered again between them. A crash in a release or unregister path kills the script."""
    target, index = sn.under_test.target, sn.under_test.index
    library = os.path.abspath(target.library or "")
    path = os.path.abspath(model_path) if model_path is not None else "<the model: not saved in this run>"
    reference = steps.REFERENCES[recipe].format("x")
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
