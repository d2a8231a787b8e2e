"""The hooks a vendor's pytest plugin (or a conftest.py) can implement to follow a run.

Registered by the kit's plugin (`pytest_addhooks`). Both are called in the pytest process that
writes the report, the xdist controller under `-n`: never on an xdist worker, so each result is
heard once. A result is a `conformance.outcomes.Result` (`to_dict()` gives its report.json
entry); the report is the dict written as report.json.
"""

from __future__ import annotations

import pytest


@pytest.hookspec
def pytest_conformance_result(result, config):
    """A check's result has been decided (waivers and strict rules applied): `result` is the
    Result report.json will hold; `config` the pytest config. Called once per result, in the
    order pytest reports the checks."""


@pytest.hookspec
def pytest_conformance_report(report, folder, config):
    """The run's report is written: `report` is the dict written as report.json, `folder` the
    pathlib.Path it was written to (--conformance-report), `config` the pytest config. Called
    once, after report.json, report.md and report.html are written, before the terminal
    summary; a file the hook writes into `folder` sits beside them."""
