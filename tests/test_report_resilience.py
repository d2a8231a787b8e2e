"""No failure in the probe or the report's path becomes an INTERNALERROR: the report set is
written, and names what could not be computed. The failures are made on purpose: a pytest
plugin (`-p breaker`) replaces one of the kit's functions with one that raises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conformance.engine import capabilities
from conformance.engine.runner import Runner

BREAKER = '''\
import os

def _raises(*args, **kwargs):
    raise RuntimeError("broken on purpose")

part = os.environ["BREAK"]
if part == "imports":  # the import question raises (as onnxruntime-ep-openvino's importer call did)
    import conformance.engine.capabilities as capabilities
    capabilities.import_capabilities = _raises
elif part == "matrix":
    import conformance.engine.capabilities as capabilities
    capabilities.capability_matrix = _raises
elif part == "renderers":
    import conformance.report.html as html
    import conformance.report.markdown as markdown
    markdown.render = html.render = _raises
elif part == "build":
    import conformance.report as report
    report.build = _raises
'''


def test_an_import_question_that_raises_leaves_the_copy_matrix_and_says_why(monkeypatch):
    def raises(ctx):
        raise RuntimeError("CreateExternalResourceImporterForDevice: not supported")

    monkeypatch.setattr(capabilities, "import_capabilities", raises)
    matrix = capabilities.capability_matrix(Runner("cpu").context(0), [])
    assert [(p["source"], p["destination"]) for p in matrix["pairs"]] == [("cpu", "cpu")]
    assert matrix["imports"]["status"] == "not_run"
    assert matrix["imports"]["reason"] == "the import capabilities could not be computed: CreateExternalResourceImporterForDevice: not supported"


def broken_run(folder: Path, part: str) -> tuple[subprocess.CompletedProcess, dict]:
    (folder / "breaker.py").write_text(BREAKER)
    reports = folder / "reports"
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "breaker", "--ep=cpu", "--conformance-isolation",
                                "none", "ort-conformance/update-inplace::update-inplace.from-numpy", f"--conformance-report={reports}"],
                               cwd=folder, capture_output=True, text=True, timeout=300,
                               env={**_environ(), "BREAK": part, "PYTHONPATH": str(folder)})
    assert "INTERNALERROR" not in completed.stdout + completed.stderr, completed.stdout[-3000:]
    assert (reports / "report.json").exists(), completed.stdout[-2000:]
    return completed, json.loads((reports / "report.json").read_text())


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}


def test_the_import_question_raising_in_pytests_process_is_the_matrix_answer_not_an_internal_error(tmp_path):
    completed, report = broken_run(tmp_path, "imports")
    assert completed.returncode == 0
    [matrix] = report["capabilities"]
    assert matrix["pairs"] and matrix["imports"]["reason"] == "the import capabilities could not be computed: broken on purpose"


def test_a_copy_matrix_that_raises_in_pytests_process_is_named_in_the_report(tmp_path):
    completed, report = broken_run(tmp_path, "matrix")
    assert completed.returncode == 0 and report["summary"]["pass"] == len(report["results"]) > 0
    [matrix] = report["capabilities"]
    assert matrix["error"] == "the copy matrix could not be computed: RuntimeError: broken on purpose"
    assert "the copy matrix could not be computed" in (tmp_path / "reports" / "report.md").read_text()


def test_renderers_that_raise_leave_the_rest_of_the_set_and_say_which(tmp_path):
    completed, report = broken_run(tmp_path, "renderers")
    assert completed.returncode == 0
    assert report["not_computed"] == ["report.md: RuntimeError: broken on purpose", "report.html: RuntimeError: broken on purpose"]
    reports = tmp_path / "reports"
    assert (reports / "report.md").read_text().startswith("report.md could not be rendered (report.md: RuntimeError: broken on purpose)")
    assert "Not computed: report.html: RuntimeError: broken on purpose" in (reports / "summary.md").read_text()
    assert (reports / "junit.xml").exists()


def test_a_report_that_cannot_be_built_is_written_with_its_results_and_verdict(tmp_path):
    completed, report = broken_run(tmp_path, "build")
    assert completed.returncode == 0
    # The verdict as the whole report gives it for this selection (a contract whose subject is onnxruntime).
    assert report["verdict"] == "incomplete" and report["verdict_reasons"] == ["no required contract passed on this EP"]
    assert report["summary"]["pass"] == len(report["results"]) > 0
    assert report["not_computed"] == ["the report's data (contracts, claims, EP facts): RuntimeError: broken on purpose"]
    assert "Not computed: the report's data" in (tmp_path / "reports" / "report.md").read_text()

