"""The kit's pytest plugin for a source checkout in which the kit is not installed.

An installed kit (`pip install .`, or `-e .`) registers `conformance.plugin.hooks` through its
`pytest11` entry point under the name `conformance`, before pytest reads this file. A checkout
used as it is (its dependencies installed, the kit not: `pytest --ep=cpu` from the checkout's
root) has no entry point: this file registers the checkout's plugin under that same name, so
that `--ep` exists. It registers nothing when the plugin is there already (it would be
registered twice: pluggy refuses one module under two names, and a second copy of the module
would declare every option twice), nor when `-p no:conformance` blocks it.

It is done in `pytest_addoption`, the first hook pytest calls on a conftest, as it registers
it: the options of the plugin registered then are added before the command line is parsed
(a `pytest_plugins` list could not ask whether the entry point registered the plugin).
"""

from __future__ import annotations

import importlib

import pytest

PLUGIN = "conformance"  # the entry point's name (pyproject.toml's [project.entry-points.pytest11])


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if pluginmanager.has_plugin(PLUGIN) or pluginmanager.is_blocked(PLUGIN):
        return
    pluginmanager.register(importlib.import_module("conformance.plugin.hooks"), PLUGIN)
