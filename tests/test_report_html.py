"""report.html (and report.md of the same run): self-contained, escaped, and readable in a real
headless browser.

The browser tests load the page of a real CPU run (and of the reference EP in a fault mode,
when it can be built) in Chromium, read back the DOM Chromium built (`--dump-dom`) and a
screenshot, and check what a reviewer sees: the verdict, the copy matrix with its colours, the
failures and the findings. Screenshots are kept under reports/screenshots/ (paths printed).
Without a browser (no chromium, and lanes/browser/setup cannot fetch one) they skip with the
reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import headless
from conftest import conformance_run
from conformance.checks import known_checks
from conformance.claims import spec_claims
from conformance.report import NO_EP_DEVICE, html, throughput
from conformance.spec import load_catalogue

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "reports" / "screenshots"
VERDICT_COLOURS = {"conformant": "#1a7f37", "non_conformant": "#cf222e"}


@pytest.fixture(scope="module")
def faulty_report(refdev_library, tmp_path_factory) -> Path:
    return conformance_run(tmp_path_factory.mktemp("corrupt"), "--ep-library", str(refdev_library), "--ep", "refdev",
                           env={"ORT_REFDEV_FAULT": "corrupt"}).reports


@pytest.fixture(scope="module")
def browser() -> str:
    executable, why = headless.chromium()
    if executable is None:
        pytest.skip(f"no headless browser here: {why}")
    return executable


def load(browser: str, report: Path, name: str, tmp_path: Path, size: tuple[int, int] = (1280, 1600), extra: tuple[str, ...] = ()):
    """The DOM Chromium built from the page, and the pixels of its screenshot (kept as an artifact)."""
    page = report / "report.html"
    dom = headless.parse_dom(headless.dump_dom(browser, page, tmp_path / "profile-dom", size, extra))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTIFACTS / f"{name}.png"
    png.unlink(missing_ok=True)
    headless.screenshot(browser, page, png, tmp_path / "profile-shot", size, extra)
    print(f"screenshot of {page}: {png}")
    return dom, headless.read_png(png)


# --- without a browser --------------------------------------------------------------------


def test_html_report_is_written_beside_json_and_markdown(cpu_reports):
    assert {"report.json", "report.md", "report.html"} <= {p.name for p in cpu_reports.iterdir()}


def test_html_report_needs_no_network_and_one_inline_script(cpu_reports):
    dom = headless.parse_dom((cpu_reports / "report.html").read_text(encoding="utf-8"))
    (script,) = dom.find_all("script")
    assert not script.attrs, "the script is inline: no src, nothing fetched"
    assert not dom.find_all("link") and not dom.find_all("img")
    assert not [e for e in dom.iter() if "src" in e.attrs]
    assert dom.find_all("style"), "the CSS is inline"


def test_everything_from_the_run_is_escaped(cpu_reports):
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    data["results"][0].update(outcome="fail", subject="ep", message=hostile, details={"violations": [{"message": hostile, "actual": hostile}]})
    data["ep"]["name"] = hostile
    data["verdict_reasons"] = [hostile, f"required contract broken: {data['results'][0]['contract']}"]
    data["results"][1].update(contract=hostile, params={"x": hostile}, device=hostile)
    page = html.render(data)
    dom = headless.parse_dom(page)
    assert len(dom.find_all("script")) == 1 and not dom.find_all("img")
    assert hostile in dom.by_id("verdict-reasons").text()
    assert all(" " not in e.attrs.get("id", "") and "<" not in e.attrs.get("id", "") for e in dom.iter())
    assert hostile in dom.by_id("failures").parent.text()


def test_report_json_ep_carries_the_spec_claims_with_their_verification(cpu_reports):
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    spec = load_catalogue(known_checks=known_checks()).ep_spec("cpu")
    assert data["ep"]["claims"] == spec_claims(spec) and data["eps"][0]["claims"] == data["ep"]["claims"]
    assert all(c["verified"] and c["how"] for c in data["ep"]["claims"])
    assert data["ep"]["unverified"] == list(spec.unverified)


def test_report_md_of_a_run_shows_each_throughput_figure_it_measured(cpu_reports):
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    text = (cpu_reports / "report.md").read_text(encoding="utf-8")
    matrix = data["capabilities"][0]
    assert f"#### Copy throughput of `{matrix['device']}` (measured, informational)" in text
    measured = [(p, method, size, gbps) for p in matrix["pairs"] for method, figures in p.get("throughput", {}).items()
                for size, gbps in figures.items() if gbps is not None]
    assert measured, "the CPU run measured update_inplace on CPU memory"
    rows = {tuple(cell.strip() for cell in line.split("|")[1:4]): line for line in text.splitlines() if line.startswith("| cpu | cpu |")}
    for pair, method, size, gbps in measured:
        ratio = gbps / matrix["host_memcpy"][size]
        assert f"{throughput.gbps_text(gbps)} GB/s ({ratio:.2f}× memcpy)" in rows[(pair["source"], pair["destination"], method)]
    assert "| packages | onnxruntime | yes | lane cpu |" in text


def test_every_copy_status_has_a_meaning_and_a_colour():
    from conformance.capabilities import STATUSES

    assert set(html.STATUS_LEGEND) == set(STATUSES)
    assert all(f".cap-{status}" in html.CSS for status in STATUSES)


# --- in Chromium --------------------------------------------------------------------------


def test_cpu_reports_renders_verdict_matrix_and_findings_in_chromium(browser, cpu_reports, tmp_path):
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    dom, pixels = load(browser, cpu_reports, "report-cpu", tmp_path)
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


def test_cpu_reports_shows_throughput_figures_and_spec_claims_in_chromium(browser, cpu_reports, tmp_path):
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    dom, _ = load(browser, cpu_reports, "report-cpu-throughput", tmp_path)
    matrix = data["capabilities"][0]
    table = dom.by_id(f"throughput-{matrix['device']}")
    assert table is not None, "the throughput table of the CPU device is on the page"
    section = table.parent.parent  # the table scrolls in a div of its own
    heading = section.find_all("h4")
    assert any("measured, informational" in h.text() for h in heading)
    assert "no contract passes or fails on them" in " ".join(p.text() for p in section.find_all("p", "measured-note"))
    host = table.find_all("tr", "host")[0]
    assert {td.attrs["data-size"]: float(td.attrs["data-gbps"]) for td in host.find_all("td")} == matrix["host_memcpy"]
    shown = {(tr.find_all("td")[0].text(), tr.find_all("td")[1].text(), tr.attrs["data-method"], td.attrs["data-size"]): td
             for tr in table.find_all("tr") if "data-method" in tr.attrs for td in tr.find_all("td", "figure")}
    measured = {(p["source"], p["destination"], method, size): gbps for p in matrix["pairs"]
                for method, figures in p.get("throughput", {}).items() for size, gbps in figures.items()}
    assert set(shown) == set(measured) and measured
    for key, gbps in measured.items():
        cell = shown[key]
        if gbps is None:
            assert cell.text() == "-"
            continue
        ratio = gbps / matrix["host_memcpy"][key[3]]
        assert cell.text() == f"{throughput.gbps_text(gbps)} GB/s{ratio:.2f}× memcpy"
        assert float(cell.attrs["data-gbps"]) == gbps and float(cell.attrs["data-ratio"]) == pytest.approx(ratio)
    claims = dom.by_id("spec-claims-table")
    rows = claims.find_all("tr")[1:]
    assert [r.find_all("td")[0].text() for r in rows] == [c["claim"] for c in data["ep"]["claims"]]
    assert not claims.find_all("tr", "claim-unverified")


def test_unverified_claims_and_an_ep_without_an_ep_device_stand_out_in_chromium(browser, cpu_reports, tmp_path):
    """The CPU run's page as an EP without an EP device and a spec of unverified claims (the
    cuda-absent lane's shape): the unverified rows are marked and drawn, and no memory is
    called plain CPU memory."""
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    cuda = load_catalogue(known_checks=known_checks()).ep_spec("cuda")
    data["ep"].update(name="CUDAExecutionProvider", ep_device=False, spec=str(cuda.location), claims=spec_claims(cuda), unverified=list(cuda.unverified))
    data["eps"] = [data["ep"]]
    for device in data["devices"]:
        device.update(hardware=None, memory={"default": None, "host_accessible": None})
    for matrix in data["capabilities"]:
        matrix["ep"] = "CUDAExecutionProvider"
    page = tmp_path / "cuda-like"
    page.mkdir()
    (page / "report.html").write_text(html.render(data), encoding="utf-8")
    dom, pixels = load(browser, page, "report-unverified-claims", tmp_path, size=(1280, 2600))  # the claims follow the contents
    unverified = dom.by_id("spec-claims-table").find_all("tr", "claim-unverified")
    assert sorted(r.find_all("td")[0].text() for r in unverified) == sorted(c["claim"] for c in data["ep"]["claims"] if not c["verified"])
    assert all(r.find_all("td", "verified")[0].text() == "no — unverified" for r in unverified)
    assert "4 unverified" in dom.by_id("spec-claims").parent.text()
    chain = dom.by_id("version-chain").text()
    assert f"{NO_EP_DEVICE}: no memory info was advertised" in chain and "plain CPU memory" not in chain
    assert any("only plain CPU memory could be probed" in p.text() for p in dom.find_all("p", "unlisted"))
    assert headless.colour_share(pixels, "#fff8c5") > 0.001, "unverified claims are highlighted"
