"""Headless Chromium for the report tests: find or prepare the browser, load a page, take a
screenshot, dump the DOM, and read the screenshot's pixels.

The browser is the distribution's `chromium`, on PATH or unpacked privately by
lanes/browser/setup. The PNG reader is here because the standard library has none and the
only question asked of the picture is which colours it shows.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "lanes" / "browser" / "setup"
# No sandbox: the tests may run as root in a container, where Chromium's sandbox cannot start.
# Every host name resolves to nothing, so a page that reached for the network would show it.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--user-data-dir={profile}"]


def chromium() -> tuple[str | None, str]:
    """(executable, '') or (None, why no browser can be had here)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found, ""
    if not SETUP.exists():
        return None, f"no chromium on PATH and no {SETUP}"
    completed = subprocess.run([str(SETUP)], capture_output=True, text=True, timeout=900)
    if completed.returncode != 0:
        return None, (completed.stderr.strip().splitlines() or [f"{SETUP} exited {completed.returncode}"])[-1]
    return completed.stdout.strip().splitlines()[-1], ""


def _run(executable: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    flags = [flag.format(profile=profile) for flag in FLAGS]
    return subprocess.run([executable, *flags, *args], capture_output=True, text=True, timeout=120)


# Chromium's switches for prefers-color-scheme: dark (the second is what newer builds read).
DARK = ("--force-dark-mode", "--blink-settings=preferredColorScheme=0")


def screenshot(executable: str, page: Path, png: Path, profile: Path, size: tuple[int, int] = (1280, 1600), extra: tuple[str, ...] = ()) -> None:
    completed = _run(executable, profile, *extra, f"--screenshot={png}", f"--window-size={size[0]},{size[1]}", page.resolve().as_uri())
    assert png.exists(), completed.stderr[-2000:]


def dump_dom(executable: str, page: Path, profile: Path, size: tuple[int, int] | None = None, extra: tuple[str, ...] = (), query: str = "") -> str:
    """The DOM after the page's scripts ran; `query` ('q=words') is put on the page's URL."""
    window = (f"--window-size={size[0]},{size[1]}",) if size else ()
    completed = _run(executable, profile, *extra, *window, "--dump-dom", page.resolve().as_uri() + (f"?{query}" if query else ""))
    assert completed.returncode == 0 and completed.stdout, completed.stderr[-2000:]
    return completed.stdout


class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parent: "Element | None"):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element] = []
        self.content: list["str | Element"] = []  # text and children in document order

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def text(self) -> str:
        return "".join(part if isinstance(part, str) else part.text() for part in self.content)

    def iter(self):
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list["Element"]:
        return [e for e in self.iter() if (tag is None or e.tag == tag) and (cls is None or cls in e.classes)]

    def by_id(self, element_id: str) -> "Element | None":
        return next((e for e in self.iter() if e.attrs.get("id") == element_id), None)


VOID = {"meta", "link", "br", "img", "input", "hr", "col", "source", "wbr"}


class _TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        element = Element(tag, {k: v or "" for k, v in attrs}, self.current)
        self.current.children.append(element)
        self.current.content.append(element)
        if tag not in VOID:
            self.current = element

    def handle_endtag(self, tag):
        node = self.current
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:
            self.current = node.parent

    def handle_data(self, data):
        self.current.content.append(data)


def parse_dom(text: str) -> Element:
    builder = _TreeBuilder()
    builder.feed(text)
    return builder.root


def read_png(path: Path) -> np.ndarray:
    """The pixels of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes), as HxWxC."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    position, idat, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        position += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, f"unsupported PNG layout {header}"
    channels = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(height, 1 + width * channels)
    pixels = np.zeros((height, width * channels), np.uint8)
    previous = np.zeros(width * channels, np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        row = _unfilter(kind, line, previous, channels)
        pixels[y] = row
        previous = row.astype(np.int32)
    return pixels.reshape(height, width, channels)


def _unfilter(kind: int, line: np.ndarray, up: np.ndarray, bpp: int) -> np.ndarray:
    if kind == 0:
        return line.astype(np.uint8)
    if kind == 2:
        return ((line + up) & 0xFF).astype(np.uint8)
    if kind == 1:  # each byte adds the reconstructed byte bpp to its left: a running sum per channel
        return (np.cumsum(line.reshape(-1, bpp), axis=0) & 0xFF).astype(np.uint8).reshape(-1)
    out = [0] * len(line)
    values, above = line.tolist(), up.tolist()
    for i, value in enumerate(values):
        left = out[i - bpp] if i >= bpp else 0
        if kind == 3:
            out[i] = (value + ((left + above[i]) >> 1)) & 0xFF
            continue
        corner = above[i - bpp] if i >= bpp else 0
        estimate = left + above[i] - corner
        pa, pb, pc = abs(estimate - left), abs(estimate - above[i]), abs(estimate - corner)
        predictor = left if pa <= pb and pa <= pc else (above[i] if pb <= pc else corner)
        out[i] = (value + predictor) & 0xFF
    return np.array(out, np.uint8)


def colour_share(pixels: np.ndarray, rgb: str) -> float:
    """Share of the pixels that have exactly this colour ('#rrggbb')."""
    wanted = np.array([int(rgb[i:i + 2], 16) for i in (1, 3, 5)], np.uint8)
    return float(np.all(pixels[:, :, :3] == wanted, axis=2).mean())
