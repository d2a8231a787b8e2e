"""`conformance.fleet`: read a fleet table without onnxruntime and without probing.

    import conformance.fleet
    fleet = conformance.fleet.load("reports/fleet/fleet.json")
    fleet.supports("OpenVINOExecutionProvider", "1.8.1", "default", "cpu")

The public path of `conformance.tools.fleet_reader` (see there); `ort-conformance fleet` writes
the table. Importing it loads the standard library only. A direction no run could measure (an
EP that get_ep_devices() does not list) is `NotMeasured` from `supports`, never False.
"""

from __future__ import annotations

from conformance.tools.fleet_reader import (MEMORIES, NOT_KNOWN, SCHEMA, Answer, Fleet, FleetError, NotMeasured, UnknownEp, UnknownMemory,
                                            load)

__all__ = ["MEMORIES", "NOT_KNOWN", "SCHEMA", "Answer", "Fleet", "FleetError", "NotMeasured", "UnknownEp", "UnknownMemory", "load"]
