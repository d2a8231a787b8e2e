"""A run of several EPs judges each by its own contracts: with `--ep-library LIB --ep refdev
--ep cpu` the library is registered in the CPU EP's worker too, but it is the reference EP's,
so the plugin library's contracts (lifecycle.*) apply to the reference EP alone."""

from __future__ import annotations

from conftest import conformance_run


def test_a_plugin_ep_and_the_cpu_ep_each_get_their_own_contracts(refdev_library, tmp_path):
    run = conformance_run(tmp_path, "--ep-library", str(refdev_library), "--ep", "refdev", "--ep", "cpu")
    report = run.report
    lifecycle = {r["ep"]: r for r in report["results"] if r["contract"] == "lifecycle.plugin-library"}
    assert lifecycle["RefDevExecutionProvider"]["outcome"] == "pass", lifecycle
    cpu = lifecycle["CPUExecutionProvider"]
    assert (cpu["outcome"], cpu["message"]) == ("not_applicable", "the EP is built into onnxruntime, not loaded from a plugin library")
    libraries = {ep["name"]: ep["library"] for ep in report["eps"]}
    assert libraries == {"RefDevExecutionProvider": str(refdev_library.resolve()), "CPUExecutionProvider": None}
    assert report["verdict"] == "conformant" and run.exit_code == 0, report["verdict_reasons"]
