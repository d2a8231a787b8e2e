"""docs/new-ep.md, followed word for word: its shell blocks run in order in an empty folder, on
the reference EP and on the reference EP taking Relu alone (a narrow EP), with the library and
EP name its first block asks for. Every command must succeed, and the end is a verified bundle."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "new-ep.md"
SETUP = "export LIB=$PWD/libmy_ep.so EP=MyExecutionProvider"


def guide_script(library: Path, provider: str) -> str:
    """The guide's ```sh blocks, in order, as one script; its setup line names `library` and `provider`."""
    blocks = re.findall(r"^```sh\n(.*?)^```", GUIDE.read_text(encoding="utf-8"), flags=re.S | re.M)
    script = "\n".join(blocks)
    assert SETUP in script, "the guide's first block sets LIB and EP as the test expects"
    return "set -euo pipefail\n" + script.replace(SETUP, f"export LIB={library} EP={provider}")


@pytest.mark.parametrize("ops", ["", "Relu"], ids=["refdev", "refdev-relu-only"])
def test_the_new_ep_guide_takes_refdev_from_its_library_to_a_verified_bundle(refdev_library, tmp_path, ops):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ORT_REFDEV_", "GITHUB_STEP_SUMMARY", "PYTEST_"))}
    environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environ.get('PATH', '')}"
    if ops:
        environ["ORT_REFDEV_OPS"] = ops
    done = subprocess.run(["bash", "-c", guide_script(refdev_library, "RefDevExecutionProvider")], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    spec = yaml.safe_load((tmp_path / "myep.yaml").read_text(encoding="utf-8"))["ep"]
    assert "draft" not in spec and all(v["verified"] for v in spec["verification"].values())
    assert spec["ops"] == ({"Relu": ["float32"]} if ops else {"Add": ["float32"], "Relu": ["float32"]})
    report = json.loads((tmp_path / "reports" / "report.json").read_text(encoding="utf-8"))
    assert report["strict"] and report["verdict"] == "conformant", report["verdict_reasons"]
    assert report["ep"]["spec"].startswith("myep.yaml") and report["ep"]["draft"] is None
    assert "myep.tar.gz: complete and consistent" in done.stdout
    fleet = json.loads((tmp_path / "fleet" / "fleet.json").read_text(encoding="utf-8"))
    assert [row["ep"] for row in fleet["rows"]] == ["RefDevExecutionProvider"]
