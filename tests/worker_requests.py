"""Requests the worker tests (test_isolation, test_forkserver) send to a CPU worker."""

# An init for the CPU EP with the shipped specs, which the worker reads itself (the plugin hands
# its workers the catalogue instead: see test_a_worker_handed_the_catalogue_reads_no_yaml).
CPU_INIT = {"ep": "cpu", "specs": None, "library": None, "options": {}, "models_dir": None}
# A check that runs a session on real memory: a worker that answers it is alive and working.
SESSION_INPUTS = {"op": "run", "contract": "memory-info.session-inputs", "device": 0,
                  "params": {"recipe": "identity", "dtype": "float32"}}
