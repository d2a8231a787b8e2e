"""A narrow EP is certifiable: the reference EP in its Relu-only mode (ORT_REFDEV_OPS=Relu, the
way an NPU takes a few operators) takes none of the Identity and Add models of
memory-info.session-inputs/-outputs, and the kit shows those contracts on a model it does take
(issue 26 item 7). Only where no model at all runs on the EP does a contract stay not_run.

The library is built by the `refdev_library` fixture (tests/conftest.py); where that is not
possible the tests skip with the build's own reason.
"""

from __future__ import annotations

from conftest import conformance_run

SESSION_MEMORY = ("memory-info.session-inputs", "memory-info.session-outputs")


def _run(library, folder, ops: str, *selection: str) -> dict:
    folder.mkdir()
    return conformance_run(folder, "--ep-library", str(library), "--ep", "refdev", *selection,
                           env={"ORT_REFDEV_OPS": ops, "ORT_REFDEV_FAULT": None, "ORT_REFDEV_HOST_ACCESSIBLE": None}).report


def test_an_ep_that_takes_only_float32_relu_nodes_is_conformant(refdev_library, tmp_path):
    report = _run(refdev_library, tmp_path / "relu", "Relu")
    assert report["verdict"] == "conformant", report["verdict_reasons"]
    for contract in SESSION_MEMORY:
        cases = [r for r in report["results"] if r["contract"] == contract]
        passed = [r for r in cases if r["outcome"] == "pass"]
        assert passed, [(r["params"], r["outcome"], r["message"]) for r in cases]
        for result in passed:  # an Identity or Add case ran a model the EP took, and says which
            evidence = result["details"]["evidence"]
            assert evidence["model_substituted"]["ran"] == "relu" and evidence["model_substituted"]["asked"] == result["params"]["recipe"], evidence
            assert evidence["nodes_on_ep"] == ["Relu"], evidence
        # a type the EP takes no model of is not shown by a model of another type: the EP
        # declines it (it takes the float32 relu), which the case says
        declined = [r for r in cases if r["params"]["dtype"] == "int64" and r["params"]["recipe"] in ("identity", "add")]
        assert declined and all(r["outcome"] == "not_applicable" and "declines model" in r["message"]
                                and "it takes the float32 model 'relu'" in r["message"] for r in declined), contract


def test_where_no_model_runs_on_the_ep_the_contract_is_not_run(refdev_library, tmp_path):
    """The same EP taking no op at all: nothing to substitute, so the contracts cannot run and
    the verdict is incomplete (not a pass shown on a model the EP never ran)."""
    report = _run(refdev_library, tmp_path / "none", "NoSuchOp", "-k", "session-inputs or session-outputs")
    assert report["verdict"] == "incomplete", report["verdict_reasons"]
    for contract in SESSION_MEMORY:
        assert f"required contract could not run: {contract}" in report["verdict_reasons"], report["verdict_reasons"]
        assert not [r for r in report["results"] if r["contract"] == contract and r["outcome"] == "pass"]
