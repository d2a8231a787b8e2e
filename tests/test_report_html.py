"""report.html: self-contained, escaped, and readable in a real headless browser.

The browser tests load the page of a real CPU run (and of the reference EP in a fault mode,
when it can be built) in Chromium, read back the DOM Chromium built (`--dump-dom`) and a
screenshot, and check what a reviewer sees: the verdict, the copy matrix with its colours, the
failures and the findings. Screenshots are kept under reports/screenshots/ (paths printed).
Without a browser (no chromium, and lanes/browser/setup cannot fetch one) they skip with the
reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import headless
from conformance.report import html

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "reports" / "screenshots"
LIBRARY = ROOT / "refdev" / "build" / "libort_refdev_ep.so"
VERDICT_COLOURS = {"conformant": "#1a7f37", "non_conformant": "#cf222e"}


def conformance_run(folder: Path, *args: str, env: dict[str, str] | None = None) -> Path:
    report = folder / "report"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "--conformance-report", str(report)],
                   cwd=folder, env=dict(os.environ, **(env or {})), capture_output=True, text=True, timeout=600)
    assert (report / "report.html").exists()
    return report


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory) -> Path:
    return conformance_run(tmp_path_factory.mktemp("cpu"), "--ep=cpu")


@pytest.fixture(scope="module")
def faulty_report(tmp_path_factory) -> Path:
    if not LIBRARY.exists() and subprocess.run(["make", "-C", str(ROOT / "refdev")], capture_output=True).returncode != 0:
        pytest.skip("the reference EP could not be built here (see tests/test_refdev.py)")
    return conformance_run(tmp_path_factory.mktemp("corrupt"), "--ep-library", str(LIBRARY), "--ep", "refdev",
                           env={"ORT_REFDEV_FAULT": "corrupt"})


@pytest.fixture(scope="module")
def browser() -> str:
    executable, why = headless.chromium()
    if executable is None:
        pytest.skip(f"no headless browser here: {why}")
    return executable


def load(browser: str, report: Path, name: str, tmp_path: Path):
    """The DOM Chromium built from the page, and the pixels of its screenshot (kept as an artifact)."""
    page = report / "report.html"
    dom = headless.parse_dom(headless.dump_dom(browser, page, tmp_path / "profile-dom"))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTIFACTS / f"{name}.png"
    png.unlink(missing_ok=True)
    headless.screenshot(browser, page, png, tmp_path / "profile-shot")
    print(f"screenshot of {page}: {png}")
    return dom, headless.read_png(png)


# --- without a browser --------------------------------------------------------------------


def test_html_report_is_written_beside_json_and_markdown(cpu_report):
    assert {"report.json", "report.md", "report.html"} <= {p.name for p in cpu_report.iterdir()}


def test_html_report_needs_no_network_and_no_script(cpu_report):
    dom = headless.parse_dom((cpu_report / "report.html").read_text(encoding="utf-8"))
    assert not dom.find_all("script") and not dom.find_all("link") and not dom.find_all("img")
    assert not [e for e in dom.iter() if "src" in e.attrs]
    assert dom.find_all("style"), "the CSS is inline"


def test_everything_from_the_run_is_escaped(cpu_report):
    data = json.loads((cpu_report / "report.json").read_text(encoding="utf-8"))
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    data["results"][0].update(outcome="fail", subject="ep", message=hostile, details={"violations": [{"message": hostile, "actual": hostile}]})
    data["ep"]["name"] = hostile
    page = html.render(data)
    dom = headless.parse_dom(page)
    assert not dom.find_all("script") and not dom.find_all("img")
    assert hostile in dom.by_id("failures").parent.text()


def test_every_copy_status_has_a_meaning_and_a_colour():
    from conformance.capabilities import STATUSES

    assert set(html.STATUS_LEGEND) == set(STATUSES)
    assert all(f".cap-{status}" in html.CSS for status in STATUSES)


# --- in Chromium --------------------------------------------------------------------------


def test_cpu_report_renders_verdict_matrix_and_findings_in_chromium(browser, cpu_report, tmp_path):
    data = json.loads((cpu_report / "report.json").read_text(encoding="utf-8"))
    dom, pixels = load(browser, cpu_report, "report-cpu", tmp_path)
    assert dom.find_all("span", "verdict")[0].text().strip() == f"Verdict: {data['verdict']}"
    matrix = dom.by_id("capabilities-cpu")
    assert matrix is not None, "the copy matrix of the CPU device is on the page"
    statuses = {next(iter(td.classes)) for td in matrix.find_all("td") if td.classes}
    assert statuses == {f"cap-{p['status']}" for p in data["capabilities"][0]["pairs"]}
    findings = dom.find_all("div", "finding")
    assert {f.find_all("code")[0].text() for f in findings} == {r["contract"] for r in data["findings"]}
    chain = dom.by_id("version-chain").text()
    assert data["onnxruntime"]["build"].strip() in chain and data["spec_digest"] in chain
    # What a reviewer sees: a page that is not blank, with the verdict's colour and the matrix's.
    assert pixels.shape[:2] == (1600, 1280)
    assert headless.colour_share(pixels, "#ffffff") < 0.97
    assert headless.colour_share(pixels, VERDICT_COLOURS[data["verdict"]]) > 0.001
    assert headless.colour_share(pixels, "#eaeef2") > 0.0005, "the not_required cells of the matrix are drawn"


def test_faulty_ep_report_shows_failures_and_broken_copies_in_chromium(browser, faulty_report, tmp_path):
    data = json.loads((faulty_report / "report.json").read_text(encoding="utf-8"))
    assert data["verdict"] == "non_conformant"
    dom, pixels = load(browser, faulty_report, "report-refdev-corrupt", tmp_path)
    matrix = dom.by_id("capabilities-refdev")
    assert "cap-broken" in {c for td in matrix.find_all("td") for c in td.classes}
    failing = {div.find_all("code")[0].text() for div in dom.find_all("div", "failure")}
    assert {"copy.roundtrip-exact", "copy.required-directions"} <= failing
    first = dom.find_all("div", "failure")[0]
    assert "Reproduce with:" in first.text() and "expected" in first.text() and "memory of the destination" in first.text()
    assert any(r["spec"] in first.text() for r in data["results"])
    assert headless.colour_share(pixels, VERDICT_COLOURS["non_conformant"]) > 0.001
    assert headless.colour_share(pixels, "#ff8182") > 0.001, "broken copies are drawn in red"
