"""The pytest plugin end to end, in child pytest processes (the plugin starts worker processes).

One serial `--ep=cpu` run with JUnit output is shared by the tests that only read its results;
scenarios that need their own command line run through `pytester.runpytest_subprocess`.
"""

from __future__ import annotations

import contextlib
import json
import re
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conformance.checks import known_checks
from conformance.report.junit_schema import CASE_PROPERTIES
from conformance.catalogue.spec import load_catalogue
from processes import python_with_default_signals
from pytest_runs import BASE, TIMEOUT, Run, by_name, kind, properties, pytest_in


VENDOR_CONTRACTS = """\
family: vendor
title: A vendor's own contracts
contracts:
  - id: vendor.update-from-numpy
    statement: update_inplace(numpy array) MUST copy the values exactly (vendor copy).
    subject: ep
    severity: required
    sources:
      - {kind: measured, ref: "vendor lab"}
    check: update-inplace.from-numpy
    params:
      dtype: [float32, int64]
      shape: ["3"]
    provenance:
      basis: inferred
      ref: "the kit's tests"
    since: "1.22"
"""

# An EP-subject contract whose check onnxruntime itself breaks on the CPU EP:
# update_inplace(numpy) accepts an int32 source for a float32 destination.
FAILING_VENDOR_CONTRACT = """\
family: vendor
title: A contract onnxruntime breaks
contracts:
  - id: vendor.strict-binding
    statement: A session MUST refuse an output bound on a device nobody advertises (vendor's stricter rule).
    subject: ep
    severity: required
    provenance:
      basis: inferred
      ref: "the kit's tests"
    since: "1.22"
    sources:
      - {kind: measured, ref: "vendor lab"}
    check: iobinding.rejects-bad-output
    params:
      request: [unreachable-device]
      memory: [default]
"""
# (An EP contract of values in plain CPU memory alone, such as update_inplace on the CPU EP, is
# the runtime's whatever it says: this one runs a session on the EP, so it stays the EP's.)


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory) -> Run:
    """`pytest --ep=cpu --junitxml=junit.xml -rA`, once for this module."""
    return pytest_in(tmp_path_factory.mktemp("cpu_run"), "--ep=cpu", "--junitxml=junit.xml", "-rA")


# --- (a) without --ep ----------------------------------------------------------------------


def test_without_ep_the_plugin_collects_nothing_and_plain_tests_run(pytester):
    pytester.makepyfile(test_plain="def test_one():\n    assert 1 + 1 == 2\n")
    pytester.makefile(".yaml", extra="family: x\n")
    result = pytester.runpytest_subprocess(*BASE, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_plain.py::test_one PASSED*"])
    assert not (pytester.path / "reports").exists()
    assert "collected 1 item" in result.stdout.str()
    assert "verdict:" not in result.stdout.str()


def test_without_ep_the_plugin_loads_nothing_of_the_catalogue(pytester):
    # pytest imports the plugin in every run of an environment the kit is installed in.
    pytester.makepyfile(test_plain="import sys\n\ndef test_light():\n"
                                   "    assert not {'yaml', 'conformance.catalogue.spec', 'conformance.report', 'numpy'} & set(sys.modules)\n")
    pytester.runpytest_subprocess(*BASE).assert_outcomes(passed=1)


def test_pytest_help_explains_every_conformance_option_with_defaults_and_examples(pytester):
    result = pytester.runpytest_subprocess("--help", timeout=TIMEOUT)
    group = result.stdout.str().split("ONNX Runtime EP conformance (ort-ep-conformance):")[1].split("\n\n")[0]
    for option in ("--ep=NAME", "--ep-library=PATH", "--ep-option=KEY=VALUE", "--conformance-report=DIR", "--conformance-timeout=SECONDS",
                   "--conformance-isolation", "--conformance-strict"):
        assert option in group
    flat = " ".join(group.split())
    assert "(default: reports/)" in flat and "(default: 60)" in flat and "worker (default)" in flat
    assert "pytest --ep=cpu" in flat and "--ep-library=./libmy_ep.so --ep MyEp" in flat and "--ep-option device_id=1" in flat


def test_the_plugin_is_registered_through_its_entry_point(pytester):
    result = pytester.runpytest_subprocess(*BASE, "--help")
    result.stdout.fnmatch_lines(["*ONNX Runtime EP conformance*", "*--ep=NAME*", "*--conformance-report=DIR*"])
    version = pytester.runpytest_subprocess(*BASE, "--version", "--version")
    assert "ort-ep-conformance" in version.stdout.str() + version.stderr.str()


# --- (b) a serial --ep=cpu run -------------------------------------------------------------


def test_cpu_run_exits_zero_and_says_conformant(cpu_run):
    assert cpu_run.returncode == 0, cpu_run.stdout[-3000:] + cpu_run.stderr
    assert "verdict: conformant" in cpu_run.stdout


def test_report_json_has_the_interface_keys(cpu_run):
    report = cpu_run.report
    assert {"schema", "kit_version", "onnxruntime", "ep", "devices", "verdict", "summary", "results", "capabilities"} <= set(report)
    assert report["verdict"] == "conformant"
    assert report["ep"]["name"] == "CPUExecutionProvider"
    assert report["onnxruntime"]["version"].startswith("1.")
    assert report["devices"] and report["devices"][0]["label"] == "cpu"
    assert report["capabilities"][0]["pairs"]


def test_report_json_has_a_result_per_item_with_the_interface_fields(cpu_run):
    report = cpu_run.report
    results = report["results"]
    assert len(results) >= 30
    assert sum(report["summary"].values()) == len(results) == report["run"]["collected"]
    assert report["summary"]["pass"] >= 30
    for entry in results:
        assert {"contract", "ep", "device", "params", "outcome", "message", "spec"} <= set(entry)
        path, _, line = entry["spec"].rpartition(":")
        assert path.startswith("specs/contracts/") and int(line) > 0


def test_item_ids_are_contract_and_parameters(cpu_run):
    nodeids = {r["nodeid"] for r in cpu_run.report["results"]}
    assert "ort-conformance/update-inplace::update-inplace.from-numpy[cpu-float32-7x13]" in nodeids
    assert "ort-conformance/memory-info::memory-info.session-inputs[cpu-identity-float32]" in nodeids


def test_every_junit_case_carries_contract_ep_device_and_outcome(cpu_run):
    cases = cpu_run.junit()
    assert len(cases) == len(cpu_run.report["results"])
    outcomes = {r["nodeid"].split("::")[1]: r["outcome"] for r in cpu_run.report["results"]}
    for case in cases:
        props = properties(case)
        assert {"contract", "ep", "device", "outcome"} <= set(props), case.get("name")
        assert props["ep"] == "CPUExecutionProvider" and props["device"] == "cpu"
        assert case.get("name").startswith(props["contract"] + "[")
        assert props["outcome"] == outcomes[case.get("name")]


def test_not_applicable_case_is_a_junit_skip_with_its_reason(cpu_run):
    case = by_name(cpu_run.junit())["copy.required-directions[cpu-cpu>default-float32-3x5]"]
    assert properties(case)["outcome"] == "not_applicable"
    (skipped,) = case.iter("skipped")
    assert skipped.get("message").startswith("[not_applicable] the EP's DEFAULT memory is plain CPU memory")


def test_passing_case_is_a_plain_junit_testcase(cpu_run):
    case = by_name(cpu_run.junit())["update-inplace.from-numpy[cpu-float32-7x13]"]
    assert kind(case) == "passed" and properties(case)["outcome"] == "pass"


def test_report_md_starts_with_the_verdict(cpu_run):
    lines = [line for line in (cpu_run.path / "reports" / "report.md").read_text(encoding="utf-8").splitlines() if line.strip()]
    assert lines[0] == "# Conformance report: CPUExecutionProvider"
    level = json.loads((cpu_run.path / "reports" / "report.json").read_text(encoding="utf-8"))["api_level"]
    assert lines[1] == f"**Verdict: conformant at onnxruntime {level}'s API**"


def test_models_used_are_written_beside_the_report(cpu_run):
    assert list((cpu_run.path / "reports" / "models").glob("identity-float32-3x5-*.onnx"))


# --- (h) a runtime finding -----------------------------------------------------------------


def test_runtime_subject_failure_is_an_xfail_finding_against_onnxruntime(cpu_run):
    assert "XFAIL ort-conformance/update-inplace::update-inplace.rejects-mismatch[cpu-numpy-element-type]" in cpu_run.stdout
    assert "finding against onnxruntime" in cpu_run.stdout
    findings = {(f["contract"], tuple(f["params"].values())): (f["outcome"], f["subject"]) for f in cpu_run.report["findings"]}
    # What onnxruntime 1.32.0 itself gets wrong, on the CPU EP: update_inplace(numpy) takes
    # another element type; an output bound on a device no EP can reach is not refused; and a
    # rebind after a refused input binding aborts the process; a value made from a read-only
    # array wraps it, and update_inplace through the value writes into it; update_inplace's
    # refusals name neither the sizes nor the element types (a recommended contract: still a finding).
    refusals = {("numpy", "element-count"), ("numpy", "fewer-elements"), ("numpy", "same-bytes-other-type"), ("ortvalue", "element-count"),
                ("ortvalue", "fewer-elements"), ("ortvalue", "element-type"), ("ortvalue", "same-bytes-other-type"),
                ("ortvalue", "other-element-size")}
    assert findings == {("errors.update-inplace-refusal", request): ("fail", "runtime") for request in refusals} | {
        ("create.read-only-source", ("float32", "2x3")): ("fail", "runtime"),
        ("create.read-only-source", ("uint8", "2x3")): ("fail", "runtime"),
        ("update-inplace.rejects-mismatch", ("numpy", "element-type")): ("fail", "runtime"),
        # the same element count at twice the element size (float64 into float32) is taken too
        ("update-inplace.rejects-mismatch", ("numpy", "other-element-size")): ("fail", "runtime"),
        # a bind refused for a name the model does not have breaks the binding: the model's own name no longer binds
        ("iobinding.rebind-after-failure", ("unknown-name", "input", "default")): ("fail", "runtime"),
        ("iobinding.rejects-bad-output", ("unreachable-device", "default")): ("fail", "runtime"),
        ("iobinding.rejects-bad-output", ("unreachable-buffer", "default")): ("fail", "runtime"),
        ("iobinding.rebind-after-failure", ("unreachable-device", "input", "default")): ("crash", "runtime"),
        # copy_tensors has no CPU→CPU data transfer (cpu-memory.copy-paths)
        ("cpu-memory.copy-paths", ("copy_tensors", "float32")): ("fail", "runtime"),
        ("cpu-memory.copy-paths", ("copy_tensors", "float16")): ("fail", "runtime"),
        ("cpu-memory.copy-paths", ("copy_tensors", "int8")): ("fail", "runtime"),
    }
    junit = by_name(cpu_run.junit())
    case = junit["update-inplace.rejects-mismatch[cpu-numpy-element-type]"]
    assert kind(case) == "skipped" and properties(case)["outcome"] == "fail"
    assert case.find("skipped").get("type") == "pytest.xfail"
    crashed = junit["iobinding.rebind-after-failure[cpu-unreachable-device-input-default]"]
    assert kind(crashed) == "skipped" and properties(crashed)["outcome"] == "crash"  # a finding, not an error of the run
    assert cpu_run.returncode == 0


def test_a_crash_finding_names_the_step_it_died_in_and_how_to_reproduce_it(cpu_run):
    """The worker died, yet the check's step and reproducer, sent ahead of the fatal call, are in the report."""
    (crash,) = [f for f in cpu_run.report["findings"] if f["outcome"] == "crash"]
    assert crash["details"]["step"].startswith("binding the input again with a valid value and running")
    (violation,) = crash["details"]["violations"]
    assert violation["actual"] == "killed by SIGABRT"
    reproducer = violation["reproducer"]
    assert reproducer.startswith("# Reproduces: IOBinding refuses a bad input") and "b.bind_input('x', 'npu', 0" in reproducer
    assert reproducer.endswith("works('the run after binding again', s.run_with_iobinding, b)\n"
                               "same_bytes('the output after binding again', np.maximum(xs, 0), read(y, ys, 1))\n")
    assert "reproduce with" not in crash["message"]
    # report.md names the script, which repro/ holds
    (script,) = [link for link in re.findall(r"\]\((repro/[^)]+)\)", (cpu_run.path / "reports" / "report.md").read_text(encoding="utf-8"))
                 if link.startswith("repro/iobinding.rebind-after-failure_cpu-unreachable-device-input-default")]
    assert "b.bind_input" in (cpu_run.path / "reports" / script).read_text(encoding="utf-8")


def test_runtime_finding_is_listed_in_report_md(cpu_run):
    text = (cpu_run.path / "reports" / "report.md").read_text(encoding="utf-8")
    findings = text.split("## Findings against onnxruntime", 1)[1].split("\n## ", 1)[0]
    assert "### `update-inplace.rejects-mismatch`: " in findings
    assert re.search(r"^\| cpu \| numpy \| element-type \| fail \| .* \| \[repro/update-inplace\.rejects-mismatch_cpu-numpy-element-type\.py\]", findings, re.M)


def test_a_failing_ep_contract_shows_statement_spec_line_and_reproducer(pytester):
    pytester.makefile(".yaml", vendor=FAILING_VENDOR_CONTRACT)
    result = pytester.runpytest_subprocess(*BASE, "vendor.yaml", "--ep=cpu", "-k", "vendor.", "--tb=long", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*vendor.strict-binding [[]required, subject: ep[]] failed on CPUExecutionProvider (cpu)*",
        "*statement: A session MUST refuse an output bound on a device nobody advertises*",
        "*spec:      vendor.yaml:4",
        "*reproduce with:",
        "*    raise AssertionError('a bad output (unreachable-device): expected an error, got: accepted')",
        "*verdict: non_conformant*",
    ])
    assert "Traceback" not in result.stdout.str()
    report = json.loads((pytester.path / "reports" / "report.json").read_text())
    assert report["verdict"] == "non_conformant"
    assert report["verdict_reasons"] == ["required contract broken: vendor.strict-binding"]


# --- (c), (i) the outcome -> JUnit mapping ---------------------------------------------------

FAKE_OUTCOMES = """\
from conformance.outcomes import CaseReply, Details, Outcome
from conformance.run.scheduler import Scheduler

OUTCOMES = {
    "memory-info.session-inputs": (Outcome.FAIL, "bytes differ", {"violations": [
        {"message": "bytes differ", "expected": "0x01", "actual": "0x02", "memory": {}, "reproducer": "print('repro')"}]}),
    "session.nodes-on-ep": (Outcome.CRASH, "the process running it was killed by SIGSEGV", {}),
    "iobinding.in-place": (Outcome.TIMEOUT, "did not finish within 1 s", {}),
    "memory-info.cpu-default-io": (Outcome.ERROR, "the kit failed: KeyError", {}),
    "streams.sync-stream": (Outcome.NOT_RUN, "no hardware", {}),
}


def run_case(self, planned):
    outcome, message, details = OUTCOMES.get(planned.request["contract"], (Outcome.PASS, "", {}))
    return CaseReply(outcome, message, Details.from_wire(details))


Scheduler.run_case = run_case
"""

SELECTED = "session-inputs or nodes-on-ep or in-place or cpu-default-io or sync-stream"


@pytest.fixture(scope="module")
def faked(tmp_path_factory):
    """A run whose checks return the outcomes above (a conftest patches Scheduler.run_case)."""
    folder = tmp_path_factory.mktemp("faked")
    (folder / "conftest.py").write_text(FAKE_OUTCOMES)
    run = pytest_in(folder, "--ep=cpu", "--conformance-isolation=none", "-k", SELECTED, "--junitxml=junit.xml", "-rA")
    return run, by_name(run.junit()), run.report


def test_fail_is_a_junit_failure(faked):
    _, cases, _ = faked
    case = cases["memory-info.session-inputs[cpu-identity-float32]"]
    assert kind(case) == "failure"
    assert properties(case)["outcome"] == "fail"
    text = case.find("failure").text
    # what the terminal shows by default (--tb=auto): the violation, expected and actual, the spec line, how to reproduce
    assert "expected: 0x01" in text and "actual:   0x02" in text and "  reproduce: " in text


@pytest.mark.parametrize("name, outcome", [
    ("session.nodes-on-ep[cpu-identity-float32]", "crash"),
    ("iobinding.in-place[cpu-identity-float32-7x13]", "timeout"),
    ("memory-info.cpu-default-io[cpu-identity-float32]", "error"),
])
def test_crash_timeout_and_error_are_junit_errors(faked, name, outcome):
    _, cases, _ = faked
    case = cases[name]
    assert kind(case) == "error"
    assert properties(case)["outcome"] == outcome
    assert f"[{outcome}]" in case.find("error").get("message")


def test_the_report_folders_junit_file_holds_the_same_errors(faked):
    """The report folder's junit.xml is a second writer: a crash is an <error> there too, and its counts say so."""
    run, user_cases, _ = faked
    folder_cases = by_name(run.junit("reports/junit.xml"))
    assert {name: kind(case) for name, case in folder_cases.items()} == {name: kind(case) for name, case in user_cases.items()}
    suite = ET.parse(run.path / "reports" / "junit.xml").getroot().find("testsuite")
    assert int(suite.get("errors")) == sum(kind(case) == "error" for case in folder_cases.values()) >= 3


def test_not_run_is_a_junit_skip_with_its_reason(faked):
    _, cases, _ = faked
    case = cases["streams.sync-stream[cpu]"]
    assert kind(case) == "skipped"
    assert properties(case)["outcome"] == "not_run"
    assert case.find("skipped").get("message") == "[not_run] no hardware"


def test_every_faked_case_carries_its_properties(faked):
    _, cases, _ = faked
    assert len(cases) > 5
    for case in cases.values():
        assert set(CASE_PROPERTIES) <= set(properties(case))


def test_after_a_crash_the_same_call_is_not_run_rather_than_repeated(faked):
    _, cases, report = faked
    later = cases["session.nodes-on-ep[cpu-identity-float16]"]
    assert kind(later) == "skipped" and properties(later)["outcome"] == "not_run"
    assert "ended in crash" in later.find("skipped").get("message")
    assert sorted(one["outcome"] for one in report["run"]["lost"]) == ["crash", "timeout"]


def test_faked_run_is_non_conformant_and_exits_one(faked):
    run, _, report = faked
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout[-3000:] + run.stderr
    assert report["verdict"] == "non_conformant"
    assert report["run"]["isolation"] == "none"
    assert set(report["verdict_reasons"]) == {f"required contract broken: {c}" for c in
                                              ("iobinding.in-place", "memory-info.session-inputs", "session.nodes-on-ep")}


# --- (d), (e) usage errors -----------------------------------------------------------------


def test_unknown_ep_is_a_usage_error_listing_what_is_available(pytester):
    result = pytester.runpytest_subprocess(*BASE, "--ep=nosuch", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "unknown EP 'nosuch'" in output
    assert "cpu (CPUExecutionProvider)" in output
    assert "--ep-library=PATH" in output
    assert "Traceback" not in output


def test_vendor_spec_with_a_misspelled_key_is_a_usage_error_with_file_and_line(pytester):
    pytester.makefile(".yaml", bad=VENDOR_CONTRACTS.replace("    check:", "    chek:"))
    result = pytester.runpytest_subprocess(*BASE, "bad.yaml", "--ep=cpu", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "bad.yaml:10:5: contracts[0].chek: unknown key 'chek' (did you mean 'check'?)" in output
    assert "Traceback" not in output


def test_malformed_ep_option_is_a_usage_error(pytester):
    result = pytester.runpytest_subprocess(*BASE, "--ep=cpu", "--ep-option=novalue", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--ep-option expects KEY=VALUE, got 'novalue'" in result.stderr.str()


@pytest.mark.parametrize("option", ["--ep-option==1", "--conformance-timeout=0", "--conformance-timeout=-1", "--conformance-timeout=nan",
                                    "--conformance-timeout=soon", "--ep-library=missing.so", "--ep-library=.", "--ep-library=bad.so",
                                    "--conformance-isolation=sometimes"])
def test_bad_option_values_are_usage_errors_without_traceback(pytester, option):
    pytester.makefile(".so", bad="not a shared library")
    result = pytester.runpytest_subprocess(*BASE, "--ep=refdev", option, timeout=TIMEOUT)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert "Traceback" not in output and "INTERNALERROR" not in output
    name, _, value = option.partition("=")
    assert (value in output) if name in ("--ep-option", "--ep-library") else f"argument {name}:" in output


@pytest.mark.parametrize("folder, message", [("a-file", "is a file, not a folder"), ("a-file/reports", "cannot be written")])
def test_a_report_folder_that_cannot_be_written_is_a_usage_error_before_any_check(pytester, folder, message):
    pytester.makefile("", **{"a-file": "not a folder"})
    result = pytester.runpytest_subprocess(*BASE, "--ep=cpu", f"--conformance-report={folder}", timeout=TIMEOUT)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert f"--conformance-report {folder}: {message}" in output
    assert "Traceback" not in output and "INTERNALERROR" not in output


@pytest.mark.parametrize("option", ["--ep-library=libmy_ep.so", "--ep-option=device_id=1"])
def test_an_ep_option_without_ep_is_a_usage_error_not_a_silent_empty_run(pytester, option):
    result = pytester.runpytest_subprocess(*BASE, option, timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{option.split('=')[0]} without --ep: name the EP to check (--ep NAME)" in result.stderr.str()


@pytest.mark.parametrize("content, error", [(None, "missing.yaml:1:1: cannot read: No such file or directory"), ("", "missing.yaml:1:1: the file is empty"),
                                            ("x: [", "missing.yaml:1:5: not valid YAML")])
def test_a_spec_file_that_cannot_be_read_is_one_usage_error_naming_it(pytester, content, error):
    if content is not None:
        pytester.makefile(".yaml", missing=content)
    result = pytester.runpytest_subprocess(*BASE, "missing.yaml", "--ep=cpu", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == "ERROR: invalid spec files (1 error):"
    assert result.stderr.lines[1].startswith(f"  {error}"), result.stderr.lines


def test_the_workers_are_told_to_end_before_the_report_is_written(pytester):
    """Every check and the probe are done by then: the workers end while the report is
    written, not after it."""
    pytester.makeconftest("""
        import json
        import pytest
        from conformance import report
        from conformance.plugin.hooks import RUN_KEY

        write_all = report.write_all

        def pytest_sessionstart(session):
            run = session.config.stash[RUN_KEY]
            def writing(data, directory, *others):
                told = [w.process is None or w.process.stdin.closed for w in run.pool.workers]
                (directory / "told.json").write_text(json.dumps(told))
                return write_all(data, directory, *others)
            report.write_all = writing
    """)
    result = pytester.runpytest_subprocess(*BASE, "--ep=cpu", "-k", "roundtrip-exact", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.OK
    told = json.loads((pytester.path / "reports" / "told.json").read_text())
    assert told and all(told)


def test_the_machine_the_report_names_is_asked_before_the_checks_not_after_them(pytester):
    """platform.platform() runs `uname -p` the first time: the plugin asks while it waits for
    its workers' facts, so that writing the report does not."""
    pytester.makeconftest("""
        import json
        import platform

        calls = []
        collected = []
        first = platform.platform

        def recording(*args, **kwargs):
            calls.append("after collection" if collected else "before collection")
            return first(*args, **kwargs)

        platform.platform = recording

        def pytest_collection_finish(session):
            collected.append(True)

        def pytest_unconfigure(config):
            (config.rootpath / "calls.json").write_text(json.dumps(calls))
    """)
    result = pytester.runpytest_subprocess(*BASE, "--ep=cpu", "-k", "roundtrip-exact", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.OK
    assert json.loads((pytester.path / "calls.json").read_text())[0] == "before collection"


def test_what_the_run_keeps_to_its_end_is_moved_out_of_the_cyclic_collectors_reach(pytester):
    """Once collected (the catalogue, the items, the modules) and once the report is written
    (pytest's reports of every item, the results): pytest's collection at unconfigure and the
    interpreter's at exit do not traverse them."""
    pytester.makeconftest("""
        import gc
        import json
        import pytest

        class Recorder:  # a plugin, not conftest hooks: the items are not under this folder
            frozen = {}

            def pytest_sessionstart(self, session):
                self.frozen["at the start"] = gc.get_freeze_count()

            @pytest.hookimpl(trylast=True)
            def pytest_collection_finish(self, session):
                self.frozen["once collected"] = gc.get_freeze_count()

            def pytest_runtest_logfinish(self, nodeid, location):
                self.frozen["after the last item"] = gc.get_freeze_count()

            @pytest.hookimpl(tryfirst=True)
            def pytest_unconfigure(self, config):
                self.frozen["at the end"] = gc.get_freeze_count()
                (config.rootpath / "frozen.json").write_text(json.dumps(self.frozen))

        def pytest_configure(config):
            config.pluginmanager.register(Recorder())
    """)
    result = pytester.runpytest_subprocess(*BASE, "--ep=cpu", "-k", "roundtrip-exact", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.OK
    frozen = json.loads((pytester.path / "frozen.json").read_text())
    # (what is frozen and then freed by reference counting leaves the count, so only the steps count)
    assert frozen["once collected"] > frozen["at the start"] and frozen["at the end"] > frozen["after the last item"]


def test_a_vendor_contract_naming_an_unknown_check_is_one_usage_error_pointing_at_the_check(pytester):
    """pytest's process, which never imports the checks, hands the catalogue to its worker, and
    the worker refuses a check id it does not have; the error still names the line of `check:`."""
    pytester.makefile(".yaml", vendor=VENDOR_CONTRACTS.replace("check: update-inplace.from-numpy", "check: update-inplace.from-numpi"))
    result = pytester.runpytest_subprocess(*BASE, "vendor.yaml", "--ep=cpu", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == "ERROR: invalid spec files (1 error):"
    assert result.stderr.lines[1] == ("  vendor.yaml:10:12: contracts[0].check: unknown check 'update-inplace.from-numpi' "
                                      "(did you mean 'update-inplace.from-numpy'?)")


def test_an_ep_named_twice_is_checked_once(pytester):
    result = pytester.runpytest_subprocess(*BASE, "--ep=cpu", "--ep=cpu", "-k", "roundtrip-exact", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.OK
    report = json.loads((pytester.path / "reports" / "report.json").read_text(encoding="utf-8"))
    assert [ep["name"] for ep in report["eps"]] == ["CPUExecutionProvider"]


def test_two_names_of_one_ep_are_a_usage_error(pytester):
    result = pytester.runpytest_subprocess(*BASE, "--ep=cpu", "--ep=CPUExecutionProvider", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--ep cpu and --ep CPUExecutionProvider name the same EP (CPUExecutionProvider): give it once" in result.stderr.str()


@pytest.mark.parametrize("argument", ["tests", "test_plain.py", "missing.py"])
def test_a_test_file_or_folder_named_with_ep_is_a_usage_error_not_dropped(pytester, argument):
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    pytester.mkdir("tests")
    result = pytester.runpytest_subprocess(*BASE, argument, "--ep=cpu", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"with --ep, pytest collects the contract catalogue and the spec files (*.yaml) named on the command line; not {argument}" in result.stderr.str()


SHIPPED_COPY = Path(__file__).resolve().parents[1] / "specs" / "contracts" / "copy.yaml"


@pytest.mark.parametrize("arguments, items", [
    ([f"{SHIPPED_COPY}::copy.roundtrip-exact[cpu-float32-scalar]"], ["copy.roundtrip-exact[cpu-float32-scalar]"]),
    # A checkout's copy of a shipped file (the kit installed from the checkout, not editable).
    (["specs/contracts/copy.yaml::copy.roundtrip-exact[cpu-float32-scalar]"], ["copy.roundtrip-exact[cpu-float32-scalar]"]),
    (["vendor.yaml::vendor.update-from-numpy[cpu-int64-3]"], ["vendor.update-from-numpy[cpu-int64-3]"]),
    # By its id, as pytest shows it (ids.py): the shipped file it stands for.
    (["ort-conformance/copy::copy.roundtrip-exact[cpu-float32-scalar]"], ["copy.roundtrip-exact[cpu-float32-scalar]"]),
    (["ort-conformance/copy::copy.roundtrip-exact[cpu-float32-scalar]", "ort-conformance/copy::copy.roundtrip-exact[cpu-int8-1]"],
     ["copy.roundtrip-exact[cpu-float32-scalar]", "copy.roundtrip-exact[cpu-int8-1]"]),
], ids=["shipped-item", "checkout-copy-item", "vendor-item", "item-by-id", "items-by-id"])
def test_an_item_named_on_the_command_line_runs_alone(pytester, arguments, items):
    pytester.makefile(".yaml", vendor=VENDOR_CONTRACTS)
    checkout = pytester.path / "specs" / "contracts"
    checkout.mkdir(parents=True)
    (checkout / "copy.yaml").write_bytes(SHIPPED_COPY.read_bytes())
    result = pytester.runpytest_subprocess(*BASE, *arguments, "--ep=cpu", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:] + result.stderr.str()
    report = json.loads((pytester.path / "reports" / "report.json").read_text(encoding="utf-8"))
    assert [r["nodeid"].split("::")[-1] for r in report["results"]] == items


# Runs before the copy contracts (files named on the command line come first) and passes on
# the reference EP even in its `hang` mode, which hangs every copy.
FIRST_CONTRACT = """\
family: first
title: A contract that finishes before the copies hang
contracts:
  - id: first.declaration
    statement: The EP's declaration MUST equal what its devices advertise (run first).
    subject: ep
    severity: required
    provenance:
      basis: inferred
      ref: "the kit's tests"
    since: "1.22"
    sources:
      - {kind: measured, ref: "this test"}
    applies_when: {declared: true, ep_device: true}
    check: memory-info.declaration
"""


@pytest.mark.parametrize("to", ["pytest", "process-group"])  # kill -INT, or a terminal's Ctrl-C
def test_an_interrupted_run_writes_its_report_at_once_with_what_finished(refdev_library, tmp_path, to):
    (tmp_path / "first.yaml").write_text(FIRST_CONTRACT)
    log = tmp_path / "reports" / "worker-refdev.log"
    process = subprocess.Popen([*python_with_default_signals(), "-m", "pytest", *BASE, "first.yaml", "--ep-library", str(refdev_library), "--ep", "refdev"],
                               cwd=tmp_path, env=dict(os.environ, ORT_REFDEV_FAULT="hang"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not (log.exists() and "never returns" in log.read_text(errors="replace")):  # a copy hangs: the worker is stuck
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.2)
        journal = tmp_path / "reports" / "journal.jsonl"
        while '"contract": "first.declaration"' not in (journal.read_text(errors="replace") if journal.exists() else ""):
            # pytest has taken the first contract's reply (sent before the hang) once its journal holds it
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.2)
        if to == "pytest":
            process.send_signal(signal.SIGINT)  # what a timeout sends
        else:
            os.killpg(process.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the worker too
        process.wait(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # pytest and its workers, whatever happened
    # The report does not wait for the hung check (60 s) or for a copy probe of the hung worker:
    # process.wait(timeout=30) above would have raised.
    report = json.loads((tmp_path / "reports" / "report.json").read_text(encoding="utf-8"))
    assert report["run"]["interrupted"] is True
    assert report["verdict"] == "incomplete" and "interrupted" in report["verdict_reasons"][0]
    assert [(r["contract"], r["outcome"]) for r in report["results"]] == [("first.declaration", "pass")]
    assert report["capabilities"][0]["error"] == "not probed: the run was interrupted"


# Registered as a plugin: a conftest's own hooks reach only the items below its folder.
SLOW_ITEMS = """\
import time
import xml.etree.ElementTree as ET


class SlowItems:
    def pytest_runtest_call(self, item):
        time.sleep(60)


def pytest_configure(config):
    config.pluginmanager.register(SlowItems())
"""


def test_a_terminal_ctrl_c_is_handled_by_pytest_not_by_its_idle_worker(tmp_path):
    # The first item waits in pytest while the worker, done with its batch, waits for requests.
    (tmp_path / "conftest.py").write_text(SLOW_ITEMS)
    log = tmp_path / "reports" / "worker-cpu.log"
    process = subprocess.Popen([*python_with_default_signals(), "-m", "pytest", *BASE, "--ep=cpu", "-k", "from-numpy"], cwd=tmp_path,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not log.exists():
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.2)
        time.sleep(3)  # the worker answers its batch and waits
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=30) == pytest.ExitCode.INTERRUPTED
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert json.loads((tmp_path / "reports" / "report.json").read_text(encoding="utf-8"))["run"]["interrupted"] is True
    assert "KeyboardInterrupt" not in log.read_text(errors="replace")  # no traceback in the worker's log


# Ctrl-C arrives while the copy matrix is probed, after every check finished.
CTRL_C_IN_THE_PROBE = """\
from conformance.run.scheduler import Scheduler


def interrupted(self, ep):
    raise KeyboardInterrupt


Scheduler.probe = interrupted
"""


def test_ctrl_c_during_the_copy_probe_keeps_every_result_and_exits_interrupted(tmp_path):
    (tmp_path / "conftest.py").write_text(CTRL_C_IN_THE_PROBE)
    run = pytest_in(tmp_path, "--ep=cpu", "-k", "roundtrip")
    assert run.returncode == pytest.ExitCode.INTERRUPTED, run.stdout[-2000:]
    report = run.report
    assert report["run"]["interrupted"] is True and report["verdict"] == "incomplete"
    assert len(report["results"]) == report["run"]["collected"] > 0
    assert [m["error"] for m in report["capabilities"]] == ["not probed: the run was interrupted"]


# --- (f) vendor contracts on the command line ------------------------------------------------


def test_a_vendor_spec_of_a_shipped_ep_on_the_command_line_replaces_the_shipped_one(pytester):
    from conformance import data

    vendor = (data.eps_dir() / "cpu.yaml").read_text() + (
        "  not_applicable:\n    update-inplace.from-numpy: \"the vendor's build takes no numpy sources\"\n")
    pytester.makefile(".yaml", cpu=vendor)
    result = pytester.runpytest_subprocess(*BASE, "--ep=cpu", "cpu.yaml", "-k", "from-numpy", timeout=TIMEOUT)
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["cpu: EP spec cpu.yaml:3 (overrides the shipped specs/eps/cpu.yaml)"])
    report = json.loads((pytester.path / "reports" / "report.json").read_text())
    assert report["ep"]["spec"] == "cpu.yaml:3 (overrides the shipped specs/eps/cpu.yaml)"
    outcomes = {r["contract"]: (r["outcome"], r["message"]) for r in report["results"]}
    assert outcomes["update-inplace.from-numpy"] == ("not_applicable", "declared not applicable by cpu.yaml:3: the vendor's build takes no numpy sources")
    assert outcomes["update-inplace.from-numpy-large"][0] == "pass"  # the rest of the vendor's declaration applies as before


def test_vendor_contract_file_adds_items_to_the_shipped_catalogue(pytester):
    pytester.makefile(".yaml", vendor=VENDOR_CONTRACTS)
    result = pytester.runpytest_subprocess(*BASE, "vendor.yaml", "--ep=cpu", "-v", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "*vendor.yaml::vendor.update-from-numpy[[]cpu-float32-3[]] PASSED*",
        "*vendor.yaml::vendor.update-from-numpy[[]cpu-int64-3[]] PASSED*",
    ])
    report = json.loads((pytester.path / "reports" / "report.json").read_text())
    vendor = [r for r in report["results"] if r["contract"] == "vendor.update-from-numpy"]
    assert [r["spec"] for r in vendor] == ["vendor.yaml:4", "vendor.yaml:4"]
    assert any(r["contract"].startswith("copy.") for r in report["results"])  # the shipped catalogue too


def test_python_test_files_are_not_collected_with_ep(pytester):
    pytester.makepyfile(test_plain="def test_one():\n    assert False\n")
    pytester.makefile(".yaml", vendor=VENDOR_CONTRACTS)
    result = pytester.runpytest_subprocess(*BASE, "vendor.yaml", "--ep=cpu", "-k", "vendor.", timeout=TIMEOUT)
    result.assert_outcomes(passed=2, deselected=result.parseoutcomes()["deselected"])
    assert "test_plain" not in result.stdout.str()


def test_report_dir_option_moves_the_report(pytester):
    pytester.makefile(".yaml", vendor=VENDOR_CONTRACTS)
    result = pytester.runpytest_subprocess(*BASE, "vendor.yaml", "--ep=cpu", "-k", "vendor.",
                                           "--conformance-report=out", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.OK
    report = json.loads((pytester.path / "out" / "report.json").read_text())
    assert len(report["results"]) == 2 and report["run"]["collected"] == 2
    assert not (pytester.path / "reports").exists()


# --- (g) pytest-xdist ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def xdist_run(tmp_path_factory) -> Run:
    pytest.importorskip("xdist")
    return pytest_in(tmp_path_factory.mktemp("xdist_run"), "--ep=cpu", "-n", "2", "--junitxml=junit.xml")


def test_xdist_run_reports_the_same_results_as_a_serial_run(cpu_run, xdist_run):
    assert xdist_run.returncode == 0, xdist_run.stdout[-3000:] + xdist_run.stderr
    report, serial = xdist_run.report, cpu_run.report
    assert report["verdict"] == "conformant"
    assert len(report["results"]) == len(serial["results"])
    assert sorted(r["nodeid"] for r in report["results"]) == sorted(r["nodeid"] for r in serial["results"])
    assert report["summary"] == serial["summary"]
    assert report["capabilities"] and len(report["findings"]) == len(serial["findings"])


def test_xdist_run_writes_junit_properties_on_every_case(cpu_run, xdist_run):
    cases = xdist_run.junit()
    assert len(cases) == len(cpu_run.report["results"])
    for case in cases:
        assert {"contract", "ep", "device", "outcome"} <= set(properties(case)), case.get("name")
    # The class is set in the controller, where both files are written (junit_files.JunitFiles).
    for name in ("junit.xml", "reports/junit.xml"):
        assert {case.get("classname") for case in xdist_run.junit(name)} == {
            f"ort_conformance.{result['nodeid'].split('/')[1].split('::')[0]}" for result in cpu_run.report["results"]}


def test_xdist_run_counts_the_collected_checks(cpu_run, xdist_run):
    assert xdist_run.report["run"]["collected"] == len(cpu_run.report["results"])


class PlanRecorder:
    """Records, once pytest has collected, which requests each worker was planned to run."""

    def __init__(self):
        self.plans: dict[str, list[str]] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session):
        from conformance.plugin.hooks import RUN_KEY

        run = session.config.stash[RUN_KEY]
        names = {id(ep.worker): "main" for ep in run.eps} | {id(ep.isolated_worker): "isolated" for ep in run.eps}
        self.plans = {names[id(worker)]: [p.id for p in plan] for worker, plan in run.scheduler.plans.items()}


def test_isolated_contracts_run_last_in_the_main_worker_after_the_probe(pytester):
    recorder = PlanRecorder()
    # A run, not --collect-only, which plans nothing: it starts no worker.
    pytester.inline_run(*BASE, "--ep=cpu", "--conformance-report", str(pytester.path / "reports"), plugins=[recorder])
    (plan,) = recorder.plans.values()  # one worker: no worker of their own for the isolated contracts
    isolated = [i for i, id_ in enumerate(plan) if id_.split("::")[-1].split("[")[0] in ISOLATED_CONTRACTS]
    assert "main" in recorder.plans and len(isolated) > 10
    # Nothing runs after a bad request in the worker it may have broken: the checks, then the
    # copy probe, then the isolated contracts.
    assert isolated == list(range(len(plan) - len(isolated), len(plan))) and plan[isolated[0] - 1] == "probe:0"


class WorkerRecorder:
    """Records, at the end of the session, how the main worker's process was started."""

    def __init__(self):
        self.process = self.restarts = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session):
        from conformance.plugin.hooks import RUN_KEY

        (ep,) = session.config.stash[RUN_KEY].eps
        self.process, self.restarts = type(ep.worker.process).__name__, ep.worker.restarts


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server runs on Linux only")
def test_the_worker_replacing_one_onnxruntime_aborted_is_forked_by_the_fork_server(pytester):
    recorder = WorkerRecorder()
    result = pytester.inline_run(*BASE, "--ep=cpu", "-k", "rejects-mismatch or rebind-after-failure",
                                 "--conformance-report", str(pytester.path / "reports"), plugins=[recorder])
    # onnxruntime 1.32 aborts a failed rebind on the CPU EP (a finding); the bad requests
    # queued behind it run in a worker the fork server forked, not in a new interpreter.
    assert result.ret == 0 and recorder.restarts == 1 and recorder.process == "ForkedProcess"
    outcomes = {r["outcome"] for r in json.loads((pytester.path / "reports" / "report.json").read_text())["results"]}
    assert "crash" in outcomes and "pass" in outcomes


ISOLATED_CONTRACTS = {c.id for c in load_catalogue(known_checks=known_checks()).contracts if c.isolated}


def test_isolated_contracts_run_in_a_worker_apart_where_items_are_not_planned_ahead(xdist_run):
    # Under xdist items arrive as the controller schedules them, so a bad request cannot be
    # kept for last: each xdist process gives the isolated contracts a worker of their own.
    assert (xdist_run.path / "reports" / "worker-cpu-isolated.log").exists()


def test_isolated_contracts_are_reported_last_as_they_run(cpu_run):
    # pytest takes the answers in the order the worker gives them (see _plan).
    contracts = [r["contract"] for r in cpu_run.report["results"]]
    isolated = [c in ISOLATED_CONTRACTS for c in contracts]
    assert isolated == sorted(isolated) and sum(isolated) > 10


def test_isolated_contracts_pass_where_onnxruntime_keeps_them(cpu_run):
    reports = cpu_run.path / "reports"
    assert (reports / "worker-cpu.log").exists()
    assert not (reports / "worker-cpu-isolated.log").exists()  # they ran last in the main worker
    isolated = {r["contract"]: r["outcome"] for r in cpu_run.report["results"] if r["outcome"] == "pass"
                and r["contract"] in ("update-inplace.rejects-mismatch", "iobinding.rejects-bad-output", "iobinding.rebind-after-failure")}
    assert len(isolated) == 3
    # The CPU EP has no CPU→CPU copy: a refused bad copy request would prove nothing.
    assert {r["outcome"] for r in cpu_run.report["results"] if r["contract"] == "copy.bad-requests"} <= {"not_run", "not_applicable"}


def test_without_isolation_the_isolated_contracts_still_run_in_a_worker_and_the_report_is_complete(cpu_run, tmp_path):
    # A failed rebind aborts onnxruntime 1.32 on the CPU EP in the process that makes it: run in
    # pytest's own process, iobinding.rebind-after-failure would take the whole run down.
    run = pytest_in(tmp_path, "--ep=cpu", "--conformance-isolation=none")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = run.report
    assert report["verdict"] == "conformant" and report["run"]["isolation"] == "none"
    assert report["run"]["collected"] == len(report["results"])
    outcomes = {r["nodeid"]: r["outcome"] for r in report["results"]}
    assert outcomes == {r["nodeid"]: r["outcome"] for r in cpu_run.report["results"]}
    # The abort is recorded as a crash of the isolated worker, a finding against onnxruntime.
    assert report["run"]["lost"] == cpu_run.report["run"]["lost"]
    assert "crash" in {outcomes[n] for n in outcomes if "rebind-after-failure" in n}
    assert (tmp_path / "reports" / "worker-cpu-isolated.log").exists()
    assert not (tmp_path / "reports" / "worker-cpu.log").exists()  # the other checks ran in pytest's process


@pytest.mark.parametrize("which", ["serial", "xdist"])
def test_junit_is_valid_for_ci_tools_with_properties_on_every_case(cpu_run, xdist_run, which):
    from conformance.report import junit_schema as junit

    run = {"serial": cpu_run, "xdist": xdist_run}[which]
    assert junit.check_file(run.path / "junit.xml") == []
    assert len(run.junit()) == run.report["run"]["collected"]


def test_the_catalogue_pytests_process_loads_is_out_of_the_cyclic_collectors_reach():
    # Loaded with the collector paused and frozen before it runs again: a collection would
    # otherwise traverse each of its objects (millions for a vendor's 10 000 contracts).
    import gc

    from conformance.catalogue.spec import shipped_spec_dirs
    from conformance.plugin import loading

    before = gc.get_freeze_count()
    try:
        catalogue = loading.load([str(folder) for folder in shipped_spec_dirs()], check_ids=False)
        assert gc.get_freeze_count() - before >= len(catalogue.contracts) > 0
    finally:
        gc.unfreeze()



def test_a_conftest_hears_the_cases_of_the_spec_files_beside_it_and_none_of_the_others(tmp_path, contract_text):
    # A case's hooks go through its spec file's proxy, kept once collection is over
    # (ContractItem.ihook): it must still leave out a conftest.py that applies to another folder.
    for family in ("mine", "theirs"):
        (tmp_path / family).mkdir()
        (tmp_path / family / f"{family}.yaml").write_text(contract_text.replace("vendor", family))
    (tmp_path / "mine" / "conftest.py").write_text(
        "def pytest_runtest_logreport(report):\n"
        "    with open(__file__ + '.heard', 'a') as out:\n"
        "        out.write(report.nodeid + '\\n')\n")
    run = pytest_in(tmp_path, "mine/mine.yaml", "theirs/theirs.yaml", "--ep=cpu", "-k", "mine or theirs", "--conformance-report", "reports")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert sorted(r["contract"] for r in run.report["results"] if r["contract"].endswith(".thing")) == ["mine.thing", "theirs.thing"]
    heard = set((tmp_path / "mine" / "conftest.py.heard").read_text().split())
    assert len(heard) == 1 and "mine.thing" in heard.pop()
