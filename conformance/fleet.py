"""`conformance.fleet`: read a fleet table without onnxruntime and without probing.

    import conformance.fleet
    fleet = conformance.fleet.load("reports/fleet/fleet.json")
    fleet.supports("OpenVINOExecutionProvider", "1.8.1", "default", "cpu")

The public path of `conformance.tools.fleet_reader` (see there); `ort-conformance fleet` writes
the table. Importing it loads the standard library only.
"""

from __future__ import annotations

from conformance.tools.fleet_reader import MEMORIES, SCHEMA, Answer, Fleet, FleetError, UnknownEp, UnknownMemory, load

__all__ = ["MEMORIES", "SCHEMA", "Answer", "Fleet", "FleetError", "UnknownEp", "UnknownMemory", "load"]
