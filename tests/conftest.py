"""What several test modules share: the reference EP library (refdev/), built on first use.

The library is built with `make -C refdev` (headers fetched at build time). Where that is not
possible every test that needs it skips with the build's own reason, whichever test asks first.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "refdev" / "build" / "libort_refdev_ep.so"


def build_failure_reason(output: str) -> str:
    """The one-line reason of a failed `make -C refdev`: the last line of fetch-headers.sh or of
    the Makefile's own checks (make's `*** ... Error 3` line that follows says nothing)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    own = [line for line in lines if line.startswith(("fetch-headers.sh:", "refdev:"))]
    return (own or lines or ["make -C refdev failed"])[-1]


@pytest.fixture(scope="session")
def refdev_library() -> Path:
    if not LIBRARY.exists():
        build = subprocess.run(["make", "-C", str(ROOT / "refdev")], capture_output=True, text=True)
        if build.returncode != 0:
            reason = build_failure_reason(build.stderr)
            print(f"\nreference EP not built: {reason}", file=sys.stderr)
            pytest.skip(f"the reference EP could not be built here: {reason}")
    return LIBRARY
