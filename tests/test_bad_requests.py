"""Invalid requests varied one dimension at a time on every path (issue 26 item 10): the C
API's CopyTensors beside Python's copy_tensors, update_inplace and IOBinding, each bad call
followed by the valid call on the same object. On the reference EP, onnxruntime 1.32's own
layer shows what it lets through (the C API's CopyTensors takes an int32 source into a float32
destination; a bind refused for an unknown input name leaves the binding unable to bind the
model's input), and each finding's script fails on its own.

The library is built by the `refdev_library` fixture (tests/conftest.py); where that is not
possible the tests skip with the build's own reason.
"""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import conformance_run


def test_each_bad_request_is_refused_or_a_finding_whose_script_fails(refdev_library, tmp_path):
    run = conformance_run(tmp_path, "--ep-library", str(refdev_library), "--ep", "refdev", "-k",
                          "c-api-bad-requests or unknown-name or other-element-size or fewer-elements",
                          env={"ORT_REFDEV_FAULT": None, "ORT_REFDEV_HOST_ACCESSIBLE": None})
    results = {(r["contract"], tuple(r["params"].values())): r for r in run.report["results"]}
    for request in ("size-mismatch", "fewer-elements", "other-element-size"):
        for direction in ("cpu>default", "default>cpu"):
            passed = results[("copy.c-api-bad-requests", (request, direction))]
            assert passed["outcome"] == "pass" and passed["details"]["evidence"]["refused"], passed
    for request in ("fewer-elements", "other-element-size"):  # the same requests through Python's copy_tensors
        for direction in ("cpu>default", "default>cpu"):
            assert results[("copy.bad-requests", (request, direction))]["outcome"] == "pass"
    findings = [results[("copy.c-api-bad-requests", ("type-mismatch", "cpu>default"))],
                results[("iobinding.rebind-after-failure", ("unknown-name", "input", "default"))],
                results[("update-inplace.rejects-mismatch", ("numpy", "other-element-size"))]]
    assert [(f["outcome"], f["subject"]) for f in findings] == [("fail", "runtime")] * 3, [f["message"] for f in findings]
    assert "accepted a bad request (type-mismatch)" in findings[0]["message"]
    assert "Failed to find input name in the mapping: no_such_input" in findings[1]["message"]
    for finding in findings:
        script = finding["details"]["violations"][0]["reproducer"]
        ran = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120, cwd="/",
                             env={k: v for k, v in os.environ.items() if not k.startswith("ORT_REFDEV_")})
        assert ran.returncode == 1 and "AssertionError: " in ran.stderr, (finding["contract"], ran.stderr[-800:])
    # the unknown output name is refused at the run, and the binding takes the model's own after clear_binding_outputs()
    assert results[("iobinding.rebind-after-failure", ("unknown-name", "output", "default"))]["outcome"] == "pass"
    assert results[("iobinding.rejects-bad-output", ("unknown-name", "default"))]["outcome"] == "pass"


def test_a_bad_request_whose_valid_twin_is_refused_is_not_applicable_on_cpu_memory_and_names_its_contract_elsewhere(refdev_library, tmp_path):
    # The CPU EP's DEFAULT memory is CPU memory: its copy_tensors between the two may be refused
    # (copy.cpu-default-optional), so there is no refusal of a bad request to judge.
    (tmp_path / "cpu").mkdir()
    (tmp_path / "refdev").mkdir()
    cpu = conformance_run(tmp_path / "cpu", "--ep=cpu", "-k", "copy.bad-requests and fewer-elements").report
    (case, *_) = [r for r in cpu["results"] if r["contract"] == "copy.bad-requests"]
    assert case["outcome"] == "not_applicable" and "copy.cpu-default-optional allows" in case["message"], case["message"]
    # On device memory the valid copy's failure is the EP's, held by the contract that requires
    # the direction: the case is not_run and says which.
    refused = conformance_run(tmp_path / "refdev", "--ep-library", str(refdev_library), "--ep", "refdev", "-k",
                              "copy.bad-requests and fewer-elements", env={"ORT_REFDEV_FAULT": "no-h2d"}).report
    (case,) = [r for r in refused["results"] if r["contract"] == "copy.bad-requests" and r["params"]["direction"] == "cpu>default"]
    assert case["outcome"] == "not_run" and "that failure is copy.required-directions's" in case["message"], case["message"]
