"""What several test modules share: the reference EP library (refdev/), built on first use,
and lanes/run loaded as a module.

The library is built with `make -C refdev` (headers fetched at build time). Where that is not
possible every test that needs it skips with the build's own reason (worded as lanes/run words
it), whichever test asks first.
"""

from __future__ import annotations

import subprocess
import sys
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
    if not LIBRARY.exists():
        build = subprocess.run(["make", "-C", str(ROOT / "refdev")], capture_output=True, text=True)
        if build.returncode != 0:
            reason = build_failure_reason(build.stderr)
            print(f"\nreference EP not built: {reason}", file=sys.stderr)
            pytest.skip(f"the reference EP could not be built here: {reason}")
    return LIBRARY
