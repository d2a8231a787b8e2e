"""Whether the EP's DEFAULT data pointers address bytes: the size family's offset views
(`size_blocks.DeviceBlock`, a tensor wrapped at a block's data pointer + an offset) rely on it.

The public API promises no pointer arithmetic on device memory: on an EP whose tensor data
pointer is a handle (a buffer object, not an address) pointer + 64 names nothing, and a copy
into a tensor wrapped there may end the process. So the question is put to a child process
that sets the EP up as the worker did (`size_scripts.offset_probe`): it allocates a small block,
wraps block + 64 as a tensor, copies known bytes into it, reads the whole block back and
asserts they landed at 64 and nowhere else. Exit 0 is the only answer that counts as
addressable; a crash, an error, wrong bytes or no answer in time all mean the views are not used.

The answer is kept for the worker process's life, per EP device: the set-up does not change
between cases, and the child costs a process start and an EP registration.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from conformance.checks import size_scripts

PROBE_TIMEOUT_SECONDS = 30.0  # under the worker's 60 s: the check announces the probe before waiting


@dataclass(frozen=True)
class OffsetProbe:
    """The probe's answer: `addressable`, and `outcome`, what the child process did."""

    addressable: bool
    outcome: str

    def evidence(self) -> dict[str, object]:
        return {"addressable": self.addressable, "probe": self.outcome}


_ANSWERS: dict[tuple[str, int], OffsetProbe] = {}


def offset_views(ctx) -> OffsetProbe:
    """The probe's answer for the EP device under test, asked once per worker process."""
    key = (ctx.target.provider, ctx.device_index)
    if key not in _ANSWERS:
        ctx.attempt("asking a child process whether a tensor wrapped at a DEFAULT block's data pointer + 64 is those bytes")
        _ANSWERS[key] = run_probe(size_scripts.offset_probe(ctx))
    return _ANSWERS[key]


def run_probe(script: str) -> OffsetProbe:
    """`script` run with this interpreter and environment in a folder of its own."""
    with tempfile.TemporaryDirectory(prefix="ort-conformance-offset-probe-") as folder:
        path = os.path.join(folder, "offset_probe.py")
        with open(path, "w") as file:
            file.write(script)
        try:
            completed = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS, cwd=folder,
                                       env=dict(os.environ))
        except subprocess.TimeoutExpired:
            return OffsetProbe(False, f"no answer within {PROBE_TIMEOUT_SECONDS:.0f} s: the child was stopped")
        except OSError as exc:
            return OffsetProbe(False, f"the child could not be started: {exc.strerror or exc}")
    code = completed.returncode
    if code == 0:
        return OffsetProbe(True, "exit 0: the 64 bytes copied into the tensor at block + 64 landed there, and nothing else in the block changed")
    said = (completed.stderr.strip().splitlines() or [""])[-1][:300]
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return OffsetProbe(False, f"the child was ended by {name}" + (f" ({said})" if said else ""))
    return OffsetProbe(False, f"exit {code}" + (f": {said}" if said else ""))
