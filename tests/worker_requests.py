"""Requests the worker tests (test_isolation, test_forkserver) send to a CPU worker."""

# The init the plugin sends for the CPU EP: the shipped specs, already schema-checked by the
# run that starts the worker.
CPU_INIT = {"ep": "cpu", "specs": None, "library": None, "options": {}, "models_dir": None, "schema_checked": True}
# A check that runs a session on real memory: a worker that answers it is alive and working.
SESSION_INPUTS = {"op": "run", "contract": "memory-info.session-inputs", "device": 0,
                  "params": {"recipe": "identity", "dtype": "float32"}}
