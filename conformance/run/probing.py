"""The copy-capability matrix of EPs, asked of workers: the driver behind `conformance.probe()`
and `ort-conformance probe`.

The matrix itself is computed inside a worker (conformance.engine.capabilities); this module, in the
caller's process, starts a worker per EP, asks it for every device's matrix, and records a
device whose worker was lost instead of failing the whole probe; it returns the typed
conformance.matrix.CapabilityMatrix. The caller's process never imports onnxruntime (the EPs
present are listed by a child process too), nor pytest, onnx or jsonschema.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from conformance.run.attribution import message_of
from conformance.isolation.controller import Worker, WorkerLost, WorkerRefused
from conformance.isolation.launcher import spawn_command
from conformance.matrix import CapabilityMatrix, Device, Ep
from conformance.options import emulator_of


def probe_eps(ep: str | None, *, library: str | None = None, options: dict[str, str] | None = None, timeout: float = 60.0,
              log: Path | None = None, throughput: bool = True, wrapper: tuple[str, ...] = ()) -> CapabilityMatrix:
    """The matrix of every device of `ep` (all EPs present when None), computed in workers;
    `throughput` False skips the GB/s figures (the probe then takes a fraction of a second);
    `wrapper`: the command the workers, and the child that lists the EPs, run under."""
    names = [ep] if ep else _present_eps(wrapper)
    # Under an emulator a GB/s figure would be the emulator's: none is measured (options.emulator_of).
    request: dict[str, Any] = {} if throughput and not emulator_of(wrapper) else {"sizes": []}
    eps = []
    for name in names:
        worker = Worker({"ep": name, "library": library, "options": options or {}}, timeout=timeout, log=log, wrapper=wrapper)
        try:
            facts = worker.start()
            devices = []
            for device in facts.devices:
                try:
                    answer = worker.request({"op": "probe", "device": device.index, **request}, what="the copy probe")
                    devices.append(Device.from_dict(answer["capabilities"]))
                except WorkerLost as lost:
                    devices.append(Device(facts.provider, device.label, error=f"{lost.outcome}: {message_of(lost)}"))
            # ep_device False: get_ep_devices() does not list the EP, so it advertised no memory
            # infos; its one "device" stands for sessions made with providers=[...].
            eps.append(Ep(facts.provider, facts.label, facts.onnxruntime_version or "", facts.ep_device, tuple(devices), facts.unusable))
        finally:
            worker.close()
    return CapabilityMatrix(tuple(eps))


def _present_eps(wrapper: tuple[str, ...] = ()) -> list[str]:
    """Every EP get_ep_devices() lists, asked in a child process (this one never imports
    onnxruntime); WorkerRefused with the kit's message when onnxruntime cannot be imported."""
    code = ("import json, sys\n"
            "from conformance.testbed.eps import EpUnavailable, import_onnxruntime\n"
            "try:\n    ort = import_onnxruntime()\nexcept EpUnavailable as exc:\n    sys.exit(str(exc))\n"
            "print(json.dumps(sorted({d.ep_name for d in ort.get_ep_devices()})))")
    try:
        completed = subprocess.run(spawn_command(wrapper, "-c", code), capture_output=True, text=True)
    except OSError as exc:
        raise WorkerRefused(f"listing the EPs present failed: {' '.join(spawn_command(wrapper))} cannot be executed: {exc.strerror or exc}") from None
    if completed.returncode != 0:
        raise WorkerRefused(completed.stderr.strip() or f"listing the EPs present failed (exit status {completed.returncode})")
    return json.loads(completed.stdout)
