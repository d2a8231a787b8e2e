"""Shared attribution: where onnxruntime passes a bad request through unchecked and the EP
accepts it, the result's subject is `both`: the verdict counts it against the EP (a pytest
failure, non_conformant), and report.json's findings and found.md list it against onnxruntime."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from conftest import conformance_run
from conformance.tools import found
from conformance.testbed import tensors
from conformance.checks import copy as copy_checks
from conformance.data import shipped_spec_dirs
from conformance.checks.context.evidence import Evidence
from conformance.findings import Violation
from conformance.engine.runner import Runner
from conformance.catalogue.spec import load_catalogue


class AcceptingContext(SimpleNamespace):
    """Just enough of a check context for copy.bad-requests: every copy is accepted and writes."""

    def __init__(self, cpu_default: bool):
        super().__init__(step="", reproducer="")
        self.cpu_default = cpu_default

    def is_cpu_memory(self, kind):
        return kind == "cpu" or self.cpu_default

    def memory_facts(self, kind):
        from conformance.facts import MemoryFacts

        return None if self.is_cpu_memory(kind) else MemoryFacts("StandIn", device_id=0, vendor_id=0, device_mem_type=kind, device_type="gpu")

    def precondition(self, _what):
        import contextlib

        return contextlib.nullcontext()

    def place(self, values, kind, dtype):
        return values.copy()

    def copy(self, sources, destinations, direction, note=""):
        for source, destination in zip(sources, destinations, strict=False):
            destination.reshape(-1)[: min(source.size, destination.size)] = 0

    def read(self, value, kind, dtype, shape):
        return tensors.payload(value, dtype)

    def preamble(self):
        return "import onnxruntime as ort"

    snippets = None  # the script is not this test's subject: see no_script

    def attempt(self, step, snippet):
        self.step = step

    def prove(self, what, value):
        pass

    def compare(self, expected, got):
        return tensors.compare(expected, got)


@pytest.fixture(autouse=True)
def no_script(monkeypatch):
    """The check's reproducer is built from a real context's snippets; the stand-in has none."""
    from conformance.checks import copy as copy_family

    monkeypatch.setattr(copy_family, "_bad_copy_script", lambda *args, **kwargs: "")


@pytest.mark.parametrize("request_, cpu_default, subject", [
    ("size-mismatch", False, "both"),
    ("type-mismatch", False, ""),  # of the same size: a data transfer copies bytes; onnxruntime's to check
    ("size-mismatch", True, ""),  # a CPU-to-CPU copy is onnxruntime's own
    ("unequal-lists", False, ""),  # onnxruntime checks the lists itself: it is its defect alone
])
def test_an_accepted_bad_request_the_eps_copy_took_is_both_onnxruntimes_and_the_eps(request_, cpu_default, subject):
    violations = list(copy_checks.bad_requests(AcceptingContext(cpu_default), request=request_, direction="cpu>default"))
    assert violations and {v.subject for v in violations} == {subject}, violations


def test_the_runner_gives_a_result_the_subject_its_violations_share():
    runner = Runner.__new__(Runner)

    def check(ctx):
        yield Violation("accepted", subject="both")
        yield Violation("wrote")

    def context():
        return SimpleNamespace(step="", reproducer="", evidence=Evidence(),
                               memories=SimpleNamespace(guarded=[], overruns=list))  # no host buffer guarded

    outcome, _, details = runner._run(check, context(), {})
    assert outcome.value == "fail" and details.subject == "both"
    assert runner._run(lambda ctx: iter([Violation("x")]), context(), {})[2].subject == ""


CONFTEST = """\
from conformance.run.scheduler import Scheduler
from conformance.outcomes import CaseReply, Details, Outcome


def run_case(self, planned):
    if planned.request["contract"] == "copy.bad-requests" and planned.request["params"]["request"] == "size-mismatch":
        return CaseReply(Outcome.FAIL, "copy_tensors accepted a bad request (size-mismatch)", Details(subject="both"))
    return CaseReply(Outcome.PASS, "")


Scheduler.run_case = run_case
"""


def test_a_shared_failure_fails_the_run_and_is_listed_against_onnxruntime(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    run = conformance_run(tmp_path, "--ep=cpu", "--conformance-isolation=none", "-rA")
    report = run.report
    assert report["verdict"] == "non_conformant" and "required contract broken: copy.bad-requests" in report["verdict_reasons"]
    assert run.exit_code == pytest.ExitCode.TESTS_FAILED
    cases = {case.get("name"): case for case in ET.parse(run.reports / "junit.xml").iter("testcase")}
    shared = [case for name, case in cases.items() if name.startswith("copy.bad-requests[") and "size-mismatch" in name]
    assert shared and all(case.find("failure") is not None for case in shared)  # a failure of the EP, not an expected one
    findings = [(f["contract"], f["subject"]) for f in report["findings"]]
    assert findings and set(findings) == {("copy.bad-requests", "both")}
    document = found.render([("cpu", report)], load_catalogue([str(d) for d in shipped_spec_dirs()]))
    assert "| copy.bad-requests | onnxruntime and the EP | fail |" in document
    lines = document.splitlines()
    lane = lines[next(i for i, line in enumerate(lines) if line.startswith("| lane |")) + 2]
    assert lane.endswith(f"| {len(report['findings'])} |")  # the lane's count of findings against onnxruntime
