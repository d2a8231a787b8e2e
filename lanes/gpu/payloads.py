"""What the GPU lanes carry to a lent GPU machine, in pieces a call can take.

A call to the device machine carries at most 64 MiB of working tree, and the wheels the GPU lanes
need are bigger (onnxruntime-gpu 1.31.1: 255.6 MB; onnxruntime-ep-nv-tensorrt-rtx-cu13 0.5.0:
146.5 MB). So `lanes/gpu/stage` makes, here, for each lane: one payload (the wheels' files the
lane needs, as one tar.xz), cut into parts small enough to ride beside the repository, and a
manifest with every part's and the whole payload's SHA-256. `lanes/gpu/on-device` receives the
parts over calls made back to back while the machine stays warm, checks each against the
manifest, joins them, checks the whole, and unpacks it.

Standard library only: it runs under the device image's Python before anything is installed.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

MIB = 1024 * 1024
# Per call: 64 MiB in all, the repository (about 5 MiB without reports/ and .lanes/) included.
PART_BYTES = 52 * MIB
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Wheel:
    """A wheel the lane needs: `name==version`, and the members it leaves out (not needed there)."""

    requirement: str
    drop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Payload:
    lane: str
    summary: str
    big: tuple[Wheel, ...]  # cut into parts
    small: tuple[Wheel, ...] = ()  # carried whole in the first call, installed with pip --no-index
    debs: tuple[str, ...] = ()  # Debian packages unpacked into / there (the Vulkan loader)


# The kit's dependencies the device image lacks (KINDS.md: it has numpy, onnx, PyYAML, pytest,
# pytest-xdist and onnxruntime 1.30 for the CPU, and no jsonschema).
JSONSCHEMA = (Wheel("jsonschema==4.26.0"), Wheel("jsonschema-specifications==2025.9.1"), Wheel("referencing==0.37.0"),
              Wheel("rpds-py==2026.9.1"), Wheel("attrs==26.1.0"))
ORT_GPU = Wheel("onnxruntime-gpu==1.31.1", drop=("onnxruntime/capi/libonnxruntime_providers_tensorrt.so",))
NV_TRT_RTX = Wheel("onnxruntime-ep-nv-tensorrt-rtx-cu13==0.5.0", drop=("onnxruntime_ep_nv_tensorrt_rtx/Acknowledgements.txt",))

PAYLOADS = {
    "cuda": Payload("cuda", "onnxruntime-gpu's CUDA EP: the full catalogue, the probe and the copy figures", (ORT_GPU,), JSONSCHEMA),
    "import": Payload("import", "imported memory on the GPU: the NV TensorRT RTX plugin EP (on the image's onnxruntime) with a Vulkan producer",
                      (NV_TRT_RTX,), JSONSCHEMA, debs=("libvulkan1",)),
}


class StageError(Exception):
    """A stage that cannot be used: a part missing or damaged, a manifest that does not match."""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()


def pack(wheels: list[Path], drops: set[str], payload: Path) -> None:
    """The wheels' members but `drops`, as one tar.xz laid out as site-packages (a wheel's layout)."""
    with lzma.open(payload, "wb", preset=6) as compressed, tarfile.open(fileobj=compressed, mode="w") as tar:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as archive:
                for member in archive.infolist():
                    if member.is_dir() or member.filename in drops:
                        continue
                    info = tarfile.TarInfo(member.filename)
                    info.size = member.file_size
                    info.mode = 0o755 if member.filename.endswith(".so") or ".so." in member.filename else 0o644
                    with archive.open(member) as data:
                        tar.addfile(info, data)


def cut(payload: Path, folder: Path, part_bytes: int = PART_BYTES) -> list[dict]:
    """`payload` cut into `folder/part-NN` files of at most `part_bytes`; their names, sizes, digests."""
    parts = []
    with open(payload, "rb") as stream:
        for index in range(10_000):
            block = stream.read(part_bytes)
            if not block:
                break
            path = folder / f"part-{index:02d}"
            path.write_bytes(block)
            parts.append({"name": path.name, "bytes": len(block), "sha256": hashlib.sha256(block).hexdigest()})
    return parts


@dataclass
class Manifest:
    lane: str
    payload_sha256: str
    payload_bytes: int
    parts: list[dict]
    small: list[dict] = field(default_factory=list)  # {"name", "sha256"} of the wheels carried whole
    debs: list[str] = field(default_factory=list)  # file names of the .deb files
    wheels: list[str] = field(default_factory=list)  # what the payload was made from

    def write(self, folder: Path) -> None:
        (folder / MANIFEST).write_text(json.dumps(self.__dict__, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        path = folder / MANIFEST
        try:
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise StageError(f"{path}: no manifest; make the stage here first: lanes/gpu/stage {folder.name}") from None
        except (ValueError, TypeError) as exc:
            raise StageError(f"{path}: not a stage manifest ({exc})") from None

    def calls(self) -> list[list[str]]:
        """The parts each call carries: one part a call, the small wheels and .debs with the first."""
        return [[part["name"]] for part in self.parts]


def check_part(path: Path, part: dict) -> None:
    if not path.is_file():
        raise StageError(f"{path.name} is missing")
    if path.stat().st_size != part["bytes"] or sha256(path) != part["sha256"]:
        raise StageError(f"{path.name} is damaged: its size or SHA-256 is not the manifest's")


def missing_parts(manifest: Manifest, folder: Path) -> list[str]:
    """The parts not yet received whole in `folder`."""
    missing = []
    for part in manifest.parts:
        try:
            check_part(folder / part["name"], part)
        except StageError:
            missing.append(part["name"])
    return missing


def join(manifest: Manifest, folder: Path, payload: Path) -> None:
    """The parts in `folder` joined into `payload`, each and the whole checked against the manifest."""
    for part in manifest.parts:
        check_part(folder / part["name"], part)
    with open(payload, "wb") as out:
        for part in manifest.parts:
            out.write((folder / part["name"]).read_bytes())
    if sha256(payload) != manifest.payload_sha256:
        raise StageError(f"the joined payload's SHA-256 is not the manifest's ({payload})")


def unpack(payload: Path, site: Path) -> None:
    """The payload's files into `site`, refusing any member that would land outside it."""
    site.mkdir(parents=True, exist_ok=True)
    with lzma.open(payload) as compressed, tarfile.open(fileobj=compressed) as tar:
        for member in tar.getmembers():
            target = (site / member.name).resolve()
            if not str(target).startswith(str(site.resolve()) + "/") or not member.isfile():
                raise StageError(f"payload member {member.name!r} is not a plain file inside the site folder")
        tar.extractall(site)
