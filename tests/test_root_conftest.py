"""The checkout's conftest.py: `pytest --ep=cpu` from a source checkout whose kit is not installed
loads the checkout's plugin; where the kit is installed (its pytest11 entry point), the plugin is
registered once, by the entry point alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

CHECKOUT = ("conftest.py", "pyproject.toml", "conformance", "specs", "models")
REGISTERED = "PLUGIN registered: <module 'conformance.plugin.hooks' from "


def pytest_in(folder: Path, *args: str, autoload: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # no entry point is loaded: as if the kit were not installed
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)


def checkout(folder: Path) -> Path:
    folder.mkdir()
    for name in CHECKOUT:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, folder / name)
    return folder


def test_a_checkout_without_the_kit_installed_loads_its_own_plugin(tmp_path):
    root = checkout(tmp_path / "clone")
    run = pytest_in(root, "--ep=cpu", "--co", "-q", "--trace-config", autoload=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert [line for line in run.stdout.splitlines() if line.startswith(REGISTERED)] == [
        f"{REGISTERED}'{root / 'conformance' / 'plugin' / 'hooks.py'}'>"]
    assert "ort-conformance/copy::copy.roundtrip-exact[cpu-float32-scalar]" in run.stdout.splitlines()
    # Without the conftest nothing registers it: --ep is not an option then.
    (root / "conftest.py").unlink()
    bare = pytest_in(root, "--ep=cpu", "--co", "-q", autoload=False)
    assert bare.returncode != 0 and "unrecognized arguments: --ep=cpu" in bare.stderr


def test_the_conftest_leaves_a_blocked_plugin_blocked(tmp_path):
    root = checkout(tmp_path / "clone")
    run = pytest_in(root, "-p", "no:conformance", "--ep=cpu", "--co", "-q", autoload=False)
    assert run.returncode != 0 and "unrecognized arguments: --ep=cpu" in run.stderr


def test_an_installed_kit_is_registered_once(tmp_path):
    """This environment has the kit installed (editable): its entry point registers the plugin,
    and the checkout's conftest, read as pytest starts in the checkout, registers nothing more."""
    for folder in (ROOT, ROOT / "tests"):
        run = pytest_in(folder, "--ep=cpu", "--co", "-q", "--trace-config")
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        assert len([line for line in run.stdout.splitlines() if line.startswith(REGISTERED)]) == 1
