"""What pytest calls a check (conformance/plugin/ids.py): a shipped case's id is
`ort-conformance/<family>::<contract>[<label>]` wherever the kit is installed and whatever folder
pytest runs from, so that pytest's cache (`--lf`, `--ff`, `--sw`) finds its items again; JUnit
names its class `ort_conformance.<family>` and its suite after the EP; the report folder always
holds the run's junit.xml. These tests run pytest in processes of their own, with the pytest that
runs them (the newest pytest the kit promises, as CI installs it):
test_the_id_tests_pass_under_the_oldest_pytest_promised runs them again under the oldest."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT
from conformance.plugin import ids
from conformance.report.junit_schema import check_file

# The first ten cases of copy.roundtrip-exact on refdev; with its `corrupt` fault the empty
# tensors (the 2nd and 7th) pass and the others fail.
SUBSET = ("-k", "roundtrip-exact and (float32 or float64)")
FAILING = [1, 3, 4, 5, 6, 8, 9, 10]


@dataclass
class Ran:
    exit_code: int
    output: str
    report: dict
    folder: Path

    @property
    def nodeids(self) -> list[str]:
        """The cases run, in the order they ran."""
        return [r["nodeid"] for r in self.report["results"]]

    def junit(self, name: str = "reports/junit.xml") -> ET.Element:
        return ET.parse(self.folder / name).getroot()


def pytest_run(folder: Path, *args: str, fault: str | None = None) -> Ran:
    """pytest ARGS started in `folder`, with pytest's cache (kept in `folder`), without --junitxml
    unless ARGS give it."""
    env = {key: value for key, value in os.environ.items() if key not in ("ORT_REFDEV_FAULT", "GITHUB_STEP_SUMMARY")}
    if fault:
        env["ORT_REFDEV_FAULT"] = fault
    folder.mkdir(parents=True, exist_ok=True)
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-o", f"cache_dir={folder / '.cache'}", *args], cwd=folder, env=env,
                               capture_output=True, text=True, timeout=300)
    output = completed.stdout + completed.stderr
    report = folder / "reports" / "report.json"
    assert report.exists(), output[-3000:]
    return Ran(completed.returncode, output, json.loads(report.read_text(encoding="utf-8")), folder)


@pytest.fixture
def refdev(refdev_library) -> tuple[str, ...]:
    return (f"--ep-library={refdev_library}", "--ep=refdev")


def case(number: int) -> str:
    """The id of the SUBSET's case `number` (from 1)."""
    dtype, shapes = ("float32", "float64")[(number - 1) // 5], ("scalar", "0", "1", "7x13", "2x3x4x5")
    return f"ort-conformance/copy::copy.roundtrip-exact[refdev-{dtype}-{shapes[(number - 1) % 5]}]"


# --- the ids ---------------------------------------------------------------------------------


def test_an_id_names_the_family_the_contract_and_the_case_and_its_junit_class_the_family():
    assert ids.case_id(ids.file_id("memory-info"), "memory-info.tensor-size", "cpu-int4-3x5") == \
        "ort-conformance/memory-info::memory-info.tensor-size[cpu-int4-3x5]"
    assert ids.class_name("ort-conformance/memory-info::memory-info.tensor-size[cpu-int4-3x5]") == "ort_conformance.memory-info"
    assert ids.class_name("vendor.yaml::vendor.x[cpu]") is None and ids.class_name("ort-conformance") is None


def test_an_argument_naming_a_case_by_its_id_stands_for_the_shipped_file(tmp_path):
    (tmp_path / "copy.yaml").write_text("")
    assert ids.shipped_argument("ort-conformance/copy::copy.x[cpu-1]", tmp_path) == f"{tmp_path / 'copy.yaml'}::copy.x[cpu-1]"
    assert ids.shipped_argument("ort-conformance/copy", tmp_path) == str(tmp_path / "copy.yaml")
    assert ids.shipped_argument("ort-conformance/nothing::x", tmp_path) is None
    assert ids.shipped_argument("copy.yaml::copy.x", tmp_path) is None


def test_every_shipped_family_is_its_files_name():
    """`pytest --markers` lists the shipped families from the files' names, without reading them;
    an id given on the command line is found by its family's file name."""
    from conformance.data import contracts_dir
    from conformance.catalogue.spec import load_catalogue

    catalogue = load_catalogue([str(contracts_dir())], known_checks=())
    assert {Path(c.file).stem for c in catalogue.contracts} == {c.family for c in catalogue.contracts}
    assert all(Path(c.file).stem == c.family for c in catalogue.contracts)


def test_ids_do_not_depend_on_the_folder_pytest_runs_from(tmp_path, refdev):
    here = pytest_run(tmp_path / "one", *refdev, *SUBSET, fault="corrupt")
    deeper = pytest_run(tmp_path / "two" / "deeper", *refdev, *SUBSET, fault="corrupt")
    assert here.nodeids == deeper.nodeids == [case(n) for n in range(1, 11)]
    assert f"FAILED {case(1)}" in here.output and f"FAILED {case(1)}" in deeper.output
    for run in (here, deeper):
        classes = {c.get("classname") for c in run.junit().iter("testcase")}
        assert classes == {"ort_conformance.copy"}


def test_a_vendors_spec_file_keeps_its_path_as_its_id(pytester):
    pytester.makefile(".yaml", vendor=VENDOR)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "vendor.yaml", "--ep=cpu", "--co", "-q")
    assert "vendor.yaml::vendor.update-from-numpy[cpu-float32-3]" in result.stdout.lines


# --- pytest's cache: --lf, --ff, --sw ---------------------------------------------------------


def test_last_failed_reruns_exactly_the_failed_cases(tmp_path, refdev):
    first = pytest_run(tmp_path, *refdev, *SUBSET, fault="corrupt")
    assert [r["outcome"] for r in first.report["results"]].count("fail") == len(FAILING)
    again = pytest_run(tmp_path, *refdev, *SUBSET, "--lf", fault="corrupt")
    assert again.nodeids == [case(n) for n in FAILING]
    assert "--lf" in again.report["selection"]["how"] and not again.report["selection"]["complete"]


def test_failed_first_runs_the_failed_cases_before_the_others(tmp_path, refdev):
    pytest_run(tmp_path, *refdev, *SUBSET, fault="corrupt")
    again = pytest_run(tmp_path, *refdev, *SUBSET, "--ff", fault="corrupt")
    assert again.nodeids == [case(n) for n in FAILING] + [case(2), case(7)]


def test_stepwise_stops_at_the_first_failure_and_resumes_from_it(tmp_path, refdev):
    first = pytest_run(tmp_path, *refdev, *SUBSET, "--sw", fault="corrupt")
    assert first.nodeids == [case(1)]
    skipping = pytest_run(tmp_path, *refdev, *SUBSET, "--sw", "--sw-skip", fault="corrupt")
    assert skipping.nodeids == [case(1), case(2), case(3)]  # the first failure let through, stopped at the next
    resumed = pytest_run(tmp_path, *refdev, *SUBSET, "--sw", fault="corrupt")
    assert resumed.nodeids == [case(3)]


# --- JUnit -----------------------------------------------------------------------------------


def test_the_report_folder_holds_the_runs_junit_without_junitxml(tmp_path):
    run = pytest_run(tmp_path, "--ep=cpu", "-k", "roundtrip-exact and float32", "-p", "no:cacheprovider")
    suite = run.junit().find("testsuite")
    assert suite is not None and suite.get("name") == "ort-conformance-cpu"
    cases = list(suite.iter("testcase"))
    assert len(cases) == len(run.report["results"]) > 0
    assert {c.get("classname") for c in cases} == {"ort_conformance.copy"}
    assert check_file(tmp_path / "reports" / "junit.xml") == []
    assert not list((tmp_path / "reports").glob(".junit*")), "no staging file is left in the folder"
    assert f"report: {tmp_path / 'reports' / 'junit.xml'}" in run.output or "reports/junit.xml" in run.output


def test_a_junitxml_elsewhere_is_written_as_well_with_the_same_names(tmp_path):
    run = pytest_run(tmp_path, "--ep=cpu", "-k", "roundtrip-exact and float32", "-p", "no:cacheprovider", "--junitxml=ci/junit.xml",
                     "-o", "junit_suite_name=vendor-nightly")
    mine, theirs = run.junit(), run.junit("ci/junit.xml")
    for root in (mine, theirs):
        assert root.find("testsuite").get("name") == "vendor-nightly"  # the user named it
        assert {c.get("classname") for c in root.iter("testcase")} == {"ort_conformance.copy"}
    assert [c.get("name") for c in mine.iter("testcase")] == [c.get("name") for c in theirs.iter("testcase")]


def test_a_junitxml_naming_the_report_folders_file_is_written_once_through_no_symlink(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    elsewhere = tmp_path / "elsewhere.xml"
    elsewhere.write_text("untouched")
    (reports / "junit.xml").symlink_to(elsewhere)
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ep=cpu", "-k", "roundtrip-exact and float32",
                                "--junitxml=reports/junit.xml"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert elsewhere.read_text() == "untouched", "pytest wrote through the planted link"
    assert "junit.xml: is a symlink: refusing to write through it" in completed.stderr
    (reports / "junit.xml").unlink()
    run = pytest_run(tmp_path, "--ep=cpu", "-k", "roundtrip-exact and float32", "-p", "no:cacheprovider", "--junitxml=reports/junit.xml")
    assert not (reports / "junit.xml").is_symlink() and check_file(reports / "junit.xml") == []
    assert run.exit_code == 0


# --- the pytest versions the kit promises --------------------------------------------------


def _pytest_requirement() -> str:
    """pyproject.toml's requirement on pytest: the range the kit promises, both ends tested."""
    tomllib = pytest.importorskip("tomllib")
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    return next(d for d in dependencies if re.match(r"pytest\b", d))[len("pytest"):]


def test_the_suite_runs_under_a_pytest_the_kit_promises():
    """CI installs the newest pytest the requirement allows and runs the suite under it: the top
    of the range is tested there, its bottom by the test below."""
    from packaging.specifiers import SpecifierSet

    assert pytest.__version__ in SpecifierSet(_pytest_requirement()), (pytest.__version__, _pytest_requirement())


def test_the_id_tests_pass_under_the_oldest_pytest_promised(tmp_path, refdev_library):
    """This module's pytest runs again under the oldest pytest pyproject.toml promises: a virtual
    environment with exactly that pytest that sees this one's packages (the kit, onnxruntime,
    xdist) after its own. The private parts of pytest the kit relies on (plugin/terminal.py,
    plugin/junit_writer.py) are exercised by these runs."""
    from packaging.version import Version

    oldest = re.search(r">=\s*([0-9.]+)", _pytest_requirement())
    assert oldest, f"pyproject.toml promises no oldest pytest: {_pytest_requirement()}"
    venv = tmp_path / "oldest-pytest"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", f"pytest=={oldest.group(1)}"], capture_output=True, text=True, timeout=240)
    if install.returncode != 0:
        pytest.skip(f"pip could not install pytest {oldest.group(1)} here: {install.stderr.strip().splitlines()[-1:] or install.returncode}")
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True,
                          check=True).stdout.strip()
    ours = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True,
                          check=True).stdout.strip()
    # addsitedir (not a plain path line) so that this environment's own .pth files (the editable kit's) are read too
    Path(site, "zz-ort-conformance-tests.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    version = subprocess.run([str(python), "-c", "import pytest; print(pytest.__version__)"], capture_output=True, text=True).stdout.strip()
    assert Version(version) == Version(oldest.group(1)), version
    completed = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "not oldest_pytest and not promises",
                                str(Path(__file__))], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
    assert " passed" in completed.stdout and "skipped" not in completed.stdout.splitlines()[-1], completed.stdout[-2000:]


VENDOR = """\
family: vendor
title: Vendor contracts
contracts:
  - id: vendor.update-from-numpy
    statement: The vendor's update MUST copy the bytes exactly.
    subject: ep
    severity: required
    provenance:
      basis: inferred
      ref: "the kit's tests"
    since: "1.22"
    sources:
      - {kind: seed, ref: "a reference"}
    check: update-inplace.from-numpy
    params:
      dtype: [float32]
      shape: ["3"]
"""
