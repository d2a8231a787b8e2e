"""What several test modules share: the reference EP library (refdev/), built on first use,
lanes/run loaded as a module, conformance runs in pytest processes of their own, a vendor's
contract file to alter, and the requests the worker tests send. Test modules take these as
fixtures (or import this module's helpers); none imports another test module.

The library is built with `make -C refdev` (headers fetched at build time). Where that is not
possible every test that needs it skips with the build's own reason (worded as lanes/run words
it), whichever test asks first.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "refdev" / "build" / "libort_refdev_ep.so"


def _load_lanes_script():
    """lanes/run is a script without a .py suffix: loaded as a module to test its gates."""
    loader = SourceFileLoader("lanes_run", str(ROOT / "lanes" / "run"))
    module = module_from_spec(spec_from_loader("lanes_run", loader))
    sys.modules["lanes_run"] = module  # its dataclasses look their module up there
    loader.exec_module(module)
    return module


LANES = _load_lanes_script()
build_failure_reason = LANES.build_failure_reason


@pytest.fixture(scope="session")
def refdev_library() -> Path:
    # make each time, not only when the library is missing: a library built before the EP's
    # sources (refdev/*.c, refdev.h) changed lacks what the tests ask of it (a new fault mode);
    # make does nothing when it is up to date. Under xdist every worker gets here: the lock keeps
    # two builds from sharing one temporary file.
    LIBRARY.parent.mkdir(parents=True, exist_ok=True)
    with open(LIBRARY.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        build = subprocess.run(["make", "-C", str(ROOT / "refdev")], capture_output=True, text=True)
    if build.returncode != 0:
        reason = build_failure_reason(build.stderr)
        if LIBRARY.exists():  # as built before: what it lacks, the tests that need it say
            print(f"\nreference EP not rebuilt ({reason}): the tests use the library built before", file=sys.stderr)
            return LIBRARY
        print(f"\nreference EP not built: {reason}", file=sys.stderr)
        pytest.skip(f"the reference EP could not be built here: {reason}")
    return LIBRARY


@dataclass
class RunOutcome:
    reports: Path  # the report folder: report.json, report.md, report.html, junit.xml, the worker logs
    exit_code: int
    output: str  # pytest's stdout and stderr

    @property
    def report(self) -> dict:
        return json.loads((self.reports / "report.json").read_text(encoding="utf-8"))


def conformance_run(folder: Path, *args: str, env: dict[str, str | None] | None = None) -> RunOutcome:
    """`pytest ARGS` in a process of its own, started in `folder`, its reports and junit.xml in
    `folder/reports`. `env`: variables to set, or with None to remove, for that process."""
    environ = dict(os.environ)
    environ.pop("GITHUB_STEP_SUMMARY", None)  # the kit's own test runs stay off a CI job's summary page
    # the size family's 8 GiB case is not_applicable in these runs (tests/test_size.py runs it once, at its size)
    environ.setdefault("ORT_CONFORMANCE_MEMORY_LIMIT", "1GiB")
    for name, value in (env or {}).items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    reports = folder / "reports"
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "--conformance-report", str(reports),
                                f"--junitxml={reports / 'junit.xml'}"], cwd=folder, env=environ, capture_output=True, text=True, timeout=600)
    assert (reports / "report.json").exists(), completed.stdout[-2000:] + completed.stderr[-2000:]
    return RunOutcome(reports, completed.returncode, completed.stdout + completed.stderr)


@pytest.fixture(scope="session")
def browser() -> str:
    """Headless Chromium (tests/headless.py), or a skip saying why none can be had here."""
    import headless

    executable, why = headless.chromium()
    if executable is None:
        pytest.skip(f"no headless browser here: {why}")
    return executable


@pytest.fixture(scope="session")
def cpu_reports(tmp_path_factory) -> Path:
    """The reports of one conformance run of the CPU EP, for the tests that only read them."""
    return conformance_run(tmp_path_factory.mktemp("cpu"), "--ep=cpu").reports


@pytest.fixture(scope="session")
def cpu_shards(tmp_path_factory) -> list[Path]:
    """The report folders of the two shards of one conformance run of the CPU EP (read only)."""
    return [conformance_run(tmp_path_factory.mktemp(f"shard-{k}"), "--ep=cpu", f"--conformance-shard={k}/2").reports for k in (1, 2)]


# A vendor's contract file, valid as written: the spec tests alter one line of it at a time, and
# the worker tests misname its check.
CONTRACT_FILE = """\
family: vendor
title: Vendor contracts
contracts:
  - id: vendor.thing
    statement: The vendor thing MUST work as documented.
    subject: ep
    severity: required
    sources:
      - {kind: seed, ref: "a reference"}
    applies_when: {default_memory: device}
    check: update-inplace.from-numpy
    isolated: false
    params:
      dtype: [float32]
      shape: ["3"]
    provenance:
      basis: inferred
      ref: "the kit's tests"
    since: "1.22"
"""


@pytest.fixture
def contract_text() -> str:
    """CONTRACT_FILE's text."""
    return CONTRACT_FILE


@pytest.fixture
def cpu_init() -> dict:
    """An init for a CPU worker with the shipped specs, which the worker reads itself (the plugin
    hands its workers the catalogue instead: see test_a_worker_handed_the_catalogue_reads_no_yaml).
    A new dict for each test, which may change it."""
    return {"ep": "cpu", "specs": None, "library": None, "options": {}, "models_dir": None}


@pytest.fixture
def session_inputs() -> dict:
    """A request for a check that runs a session on real memory: a worker that answers it is
    alive and working."""
    return {"op": "run", "contract": "memory-info.session-inputs", "device": 0, "params": {"recipe": "identity", "dtype": "float32"}}
