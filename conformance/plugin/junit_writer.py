"""The run's JUnit file, always in the report folder, and the names CI tools read in every
JUnit file the run writes: each shipped case's class `ort_conformance.<family>`, and the test
suite named after the EPs (`ort-conformance-cpu`) unless the user named it (`-o junit_suite_name`).

pytest's junitxml plugin writes a file only for `--junitxml PATH`. For the report folder's copy
this module registers a second writer beside the user's, from the same ini settings: the kit's
`junit_cases.JunitCases`, which writes what pytest's writer would, for a sixth of a large run's
time less (see there). For the user's writer it relies on two details of `_pytest/junitxml.py`,
the same in pytest 8 and 9: the `xml_key` stash key under which it is kept, and
`LogXML.node_reporter(report)`'s reporter whose `add_attribute` outlives the attributes derived
from the node id (what the `record_xml_attribute` fixture uses, which only a test function can
request). No public API sets a test case's class or a suite's name from a plugin.

The writer never writes into the report folder itself: it writes into a private folder of this
process's (mode 0700, where nothing can be planted), and the run puts those bytes into the
report folder with the rest of the report set (`safe_io.write_set`: whole, and never through a
symlink). A `--junitxml` naming the report folder's junit.xml is that writer, redirected.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from _pytest.junitxml import LogXML, xml_key

from conformance.plugin import ids
from conformance.plugin.junit_cases import JunitCases

from conformance import safe_io

NAME = "junit.xml"
_DEFAULT_SUITE = "pytest"  # junit_suite_name's default: a suite the user did not name
_LIMIT = 1 << 30


class JunitFiles:
    """Registered as a plugin beside the run, by the process that writes the report."""

    def __init__(self, config: pytest.Config, folder: Path, eps: list[str]):
        self.config = config
        self.target = Path(os.path.abspath(folder / NAME))
        self._staging = Path(tempfile.mkdtemp(prefix="ort-conformance-junit-"))
        self._written = self._staging / NAME
        suite = _ini(config, "junit_suite_name", _DEFAULT_SUITE)
        self.suite = "-".join([ids.PREFIX, *eps]) if suite == _DEFAULT_SUITE else suite
        self.user: LogXML | None = config.stash.get(xml_key, None)
        if self.user is not None and self.suite != suite:
            self.user.suite_name = self.suite
        if self.user is not None and Path(self.user.logfile) == self.target:
            self.mine: LogXML | JunitCases = self.user  # --junitxml names the folder's file: that writer, into the staging folder
            self.user.logfile = str(self._written)
        else:
            self.mine = self._writer()
            config.pluginmanager.register(self.mine, "conformance-junit")
        self.prefix = config.option.junitprefix
        if self.user is not None:
            config.pluginmanager.register(self, "conformance-junit-names")

    def _writer(self) -> JunitCases:
        config = self.config
        return JunitCases(config.option.junitprefix, self.suite, _ini(config, "junit_logging", "no"),
                          _ini(config, "junit_duration_report", "total"), _ini(config, "junit_family", "xunit2"),
                          _ini(config, "junit_log_passing_tests", True))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Before pytest's writer sees the report: the attribute set now is kept over the class it
        # derives from the node id (`ort-conformance.copy`, a dash in a package name). The kit's
        # writer sets the class itself.
        name = ids.class_name(report.nodeid)
        if self.user is not None and name is not None:
            self.user.node_reporter(report).add_attribute("classname", f"{self.prefix}.{name}" if self.prefix else name)

    def contents(self) -> bytes | None:
        """What the writer wrote at the session's end (None if it wrote nothing); from now on the
        terminal names the report folder's file, where the run puts it."""
        if isinstance(self.mine, JunitCases):
            self.config.pluginmanager.unregister(self.mine)  # the run lists its report files itself
            return self.mine.text().encode("utf-8")
        self.mine.logfile = str(self.target)  # pytest's "generated xml file" line names the file that will be there
        try:
            return safe_io.read_regular(self._written, _LIMIT, what="JUnit file", follow_symlinks=False)
        except safe_io.UnsafeFile:
            return None

    def close(self) -> None:
        if self.config.pluginmanager.is_registered(self):
            self.config.pluginmanager.unregister(self)
        shutil.rmtree(self._staging, ignore_errors=True)


def _ini(config: pytest.Config, name: str, default):
    try:
        return config.getini(name)
    except ValueError:  # -p no:junitxml: its ini settings are not declared
        return default
