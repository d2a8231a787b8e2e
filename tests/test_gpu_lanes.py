"""The GPU lanes' staging and their run on a lent GPU machine (lanes/gpu/), tested where there is
no GPU: a stage made of stand-in wheels, received over two calls, joined, checked and unpacked,
and the dry run that stops before the first GPU call."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GPU = REPO / "lanes" / "gpu"
sys.path.insert(0, str(GPU))

import payloads  # noqa: E402


def stand_in_wheel(folder: Path) -> Path:
    """A wheel laid out as a plugin EP package's (the import lane looks for one by its metadata)."""
    wheel = folder / "onnxruntime_ep_nv_tensorrt_rtx_cu13-0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("standin_pkg/__init__.py", "VALUE = 42\n")
        archive.writestr("standin_pkg/libstandin.so", os.urandom(40_000))  # incompressible: several parts
        archive.writestr("standin_pkg/dropped.txt", "left out\n")
        archive.writestr("onnxruntime_ep_nv_tensorrt_rtx/__init__.py", "")
        info = "onnxruntime_ep_nv_tensorrt_rtx_cu13-0.0.dist-info"
        archive.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: onnxruntime-ep-nv-tensorrt-rtx-cu13\nVersion: 0.0\n")
        archive.writestr(f"{info}/top_level.txt", "onnxruntime_ep_nv_tensorrt_rtx\n")
    return wheel


def stage(tmp_path: Path, lane: str = "cuda", debs: list[str] | None = None) -> tuple[Path, payloads.Manifest]:
    """A stage as `lanes/gpu/stage` makes it, of a stand-in wheel, in parts of 16 kB."""
    made = tmp_path / "made" / lane
    made.mkdir(parents=True)
    packed = tmp_path / "payload.tar.xz"
    payloads.pack([stand_in_wheel(tmp_path)], {"standin_pkg/dropped.txt"}, packed)
    manifest = payloads.Manifest(lane, payloads.sha256(packed), packed.stat().st_size, payloads.cut(packed, made, 16_000), debs=debs or [])
    manifest.write(made)
    return made, manifest


def on_device(tmp_path: Path, carried: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, ORT_GPU_STAGE=str(tmp_path / "machine"), ORT_GPU_CARRIED=str(carried), OUT=str(tmp_path / "out"))
    return subprocess.run([sys.executable, str(GPU / "on-device"), *args], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)


def carry(tmp_path: Path, made: Path, lane: str, names: list[str]) -> Path:
    """One call's carried folder: the manifest and the named parts."""
    call = tmp_path / f"call-{'-'.join(names)}" / lane
    call.mkdir(parents=True)
    for name in [payloads.MANIFEST, *names]:
        shutil.copyfile(made / name, call / name)
    return call.parent


def test_a_stage_received_over_calls_is_joined_checked_and_ready_for_the_dry_run(tmp_path):
    made, manifest = stage(tmp_path)
    names = [part["name"] for part in manifest.parts]
    assert len(names) >= 2 and all(part["bytes"] <= 16_000 for part in manifest.parts)
    first = on_device(tmp_path, carry(tmp_path, made, "cuda", names[:1]), "receive", "cuda")
    assert first.returncode == 0 and f"still to carry: {', '.join(names[1:])}" in first.stdout
    early = on_device(tmp_path, carry(tmp_path, made, "cuda", names[1:2]), "run", "cuda", "--dry-run")
    if len(names) > 2:
        assert early.returncode == 2 and "parts not yet carried" in early.stdout
    dry = on_device(tmp_path, carry(tmp_path, made, "cuda", names[2:] or names[-1:]), "run", "cuda", "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    site = tmp_path / "machine" / "cuda" / "site"
    assert (site / "standin_pkg" / "__init__.py").read_text() == "VALUE = 42\n" and not (site / "standin_pkg" / "dropped.txt").exists()
    assert "dry run: ready" in dry.stdout
    assert "would run (probe" in dry.stdout and "--ep=cuda" in dry.stdout and "benchmarks/run.py" in dry.stdout
    assert not (tmp_path / "out").exists()  # nothing ran that writes results


def test_a_damaged_part_is_named_and_nothing_is_unpacked(tmp_path):
    made, manifest = stage(tmp_path)
    victim = made / manifest.parts[-1]["name"]
    victim.write_bytes(b"x" + victim.read_bytes()[1:])
    done = on_device(tmp_path, made.parent, "run", "cuda", "--dry-run")
    assert done.returncode == 2
    assert f"still to carry: {victim.name}" in done.stdout and "parts not yet carried" in done.stdout
    assert not (tmp_path / "machine" / "cuda" / "site").exists()


def test_a_payload_member_outside_the_site_folder_is_refused(tmp_path):
    import io
    import lzma
    import tarfile

    payload = tmp_path / "evil.tar.xz"
    with lzma.open(payload, "wb") as compressed, tarfile.open(fileobj=compressed, mode="w") as tar:
        info = tarfile.TarInfo("../escaped")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(payloads.StageError, match="not a plain file inside the site folder"):
        payloads.unpack(payload, tmp_path / "site")
    assert not (tmp_path / "escaped").exists()


@pytest.mark.skipif(Path("/proc/driver/nvidia/gpus").is_dir(), reason="this machine has an NVIDIA GPU")
def test_a_real_run_without_a_gpu_stops_with_one_line_after_the_set_up(tmp_path):
    made, _ = stage(tmp_path)
    done = on_device(tmp_path, made.parent, "run", "cuda")
    assert done.returncode == 2 and "no NVIDIA GPU here" in done.stdout and "Traceback" not in done.stderr


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb is not on this machine")
def test_the_import_lanes_loader_package_is_unpacked_aside_in_a_dry_run(tmp_path):
    root = tmp_path / "deb"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text("Package: standin-vulkan\nVersion: 1\nArchitecture: amd64\nMaintainer: x <x@x>\nDescription: x\n")
    (root / "usr" / "lib").mkdir(parents=True)
    (root / "usr" / "lib" / "libvulkan.so.1").write_bytes(b"\x7fELF")
    subprocess.run(["dpkg-deb", "--build", str(root), str(tmp_path / "standin.deb")], check=True, capture_output=True)
    made, _ = stage(tmp_path, "import", debs=["standin.deb"])
    shutil.copyfile(tmp_path / "standin.deb", made / "standin.deb")
    done = on_device(tmp_path, made.parent, "run", "import", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "standin.deb unpacked into /tmp/" in done.stdout and "--ep=nv-tensorrt-rtx" in done.stdout


def test_the_lanes_payloads_name_pinned_wheels_and_fit_a_call():
    for payload in payloads.PAYLOADS.values():
        assert all("==" in wheel.requirement for wheel in (*payload.big, *payload.small))
    assert payloads.PART_BYTES <= 56 * payloads.MIB  # 64 MiB a call, the repository beside it
    assert json.loads(json.dumps(payloads.Manifest("cuda", "0", 0, []).__dict__))["lane"] == "cuda"
