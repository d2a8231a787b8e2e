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
import re
from pathlib import Path

import pytest

import headless
from conftest import conformance_run
from conformance.checks import known_checks
from conformance.catalogue.claims import spec_claims
from conformance.report import NO_EP_DEVICE, common, html, page, throughput
from conformance.catalogue.spec import load_catalogue

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "reports" / "screenshots"
VERDICT_COLOURS = {"conformant": "#1a7f37", "non_conformant": "#cf222e"}


@pytest.fixture(scope="module")
def faulty_report(refdev_library, tmp_path_factory) -> Path:
    return conformance_run(tmp_path_factory.mktemp("corrupt"), "--ep-library", str(refdev_library), "--ep", "refdev",
                           env={"ORT_REFDEV_FAULT": "corrupt"}).reports


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
    assert [{k: v for k, v in c.items() if k != "this_run"} for c in data["ep"]["claims"]] == spec_claims(spec)
    assert data["eps"][0]["claims"] == data["ep"]["claims"]
    assert {c["claim"]: c["this_run"]["status"] for c in data["ep"]["claims"]} == {
        "device_type": "passed", "memory": "passed", "session_memory": "passed", "copy_directions": "passed", "packages": "not_shown"}
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
    assert "| packages | onnxruntime | yes | not shown by this run: no check of a run bears on this claim | lane cpu |" in text


def test_every_copy_status_has_a_meaning_and_a_colour():
    from conformance.engine.capabilities import STATUSES

    assert set(html.STATUS_LEGEND) == set(STATUSES)
    assert all(f".cap-{status}" in html.CSS for status in STATUSES)


# --- in Chromium --------------------------------------------------------------------------


def test_cpu_reports_renders_verdict_matrix_and_findings_in_chromium(browser, cpu_reports, tmp_path):
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    dom, pixels = load(browser, cpu_reports, "report-cpu", tmp_path)
    assert dom.find_all("span", "verdict")[0].text().strip() == f"Verdict: {data['verdict_text']}"
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
    # tall enough for the verdict's reasons, one a broken contract, above the copy matrix
    dom, pixels = load(browser, faulty_report, "report-refdev-corrupt", tmp_path, size=(1280, 3200))
    matrix = dom.by_id("capabilities-refdev")
    assert "cap-broken" in {c for td in matrix.find_all("td") for c in td.classes}
    failing = {div.find_all("code")[0].text() for div in dom.find_all("div", "failure")}
    assert {"copy.roundtrip-exact", "copy.required-directions"} <= failing
    first = dom.find_all("div", "failure")[0]
    assert "expected" in first.text() and "memory of the destination" in first.text()
    assert "repro/copy.required-directions_refdev-" in first.text() and "import onnxruntime" not in first.text(), "names the scripts, inlines none"
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


# --- a page that scales: contents, anchors, collapsed passes, the filter -----------------------


def test_contents_count_each_section_and_every_anchor_it_and_the_verdict_link_to_exists(cpu_reports):
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    dom = headless.parse_dom((cpu_reports / "report.html").read_text(encoding="utf-8"))
    ids = {e.attrs["id"] for e in dom.iter() if "id" in e.attrs}
    contents = dom.by_id("contents")
    targets = [a.attrs["href"][1:] for a in contents.find_all("a")]
    assert set(targets) <= ids and {"failures", "findings", "capabilities", "results", "version-chain"} <= set(targets)
    text = contents.text()
    assert f"All results ({len(data['results'])})" in text
    assert f"Findings against onnxruntime ({len(data['findings'])} cases in {len({r['contract'] for r in data['findings']})} contracts)" in text
    # an anchor per contract and per case
    assert {common.contract_anchor(r["contract"]) for r in data["results"]} <= ids
    assert {common.case_anchor(r) for r in data["results"]} <= ids
    assert {common.failure_anchor(r["contract"]) for r in data["findings"]} <= ids


def test_verdict_reasons_link_to_the_failures_of_the_contract_they_name(cpu_reports):
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    broken = next(r for r in data["results"] if r["subject"] == "ep")
    broken.update(outcome="fail", message="bytes differ")
    data.update(verdict="non_conformant", verdict_reasons=[f"required contract broken: {broken['contract']}", "no check ran"])
    dom = headless.parse_dom(html.render(data))
    first, second = dom.by_id("verdict-reasons").find_all("li")
    (link,) = first.find_all("a")
    assert link.attrs["href"] == "#" + common.failure_anchor(broken["contract"])
    order = [e.attrs.get("id") for e in dom.iter()]
    assert order.index("failures") < order.index(common.failure_anchor(broken["contract"])) < order.index("findings")
    assert not second.find_all("a"), "a reason about the whole run links nowhere"


def test_passes_are_collapsed_and_a_contract_with_a_broken_case_is_open(cpu_reports):
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    dom = headless.parse_dom((cpu_reports / "report.html").read_text(encoding="utf-8"))
    contracts = dom.find_all("details", "contract")
    assert len(contracts) == len({r["contract"] for r in data["results"]})
    broken = {r["contract"] for r in data["results"] if r["outcome"] in ("fail", "crash", "timeout")}
    assert broken and {d.attrs["id"] for d in contracts if "open" in d.attrs} == {common.contract_anchor(c) for c in broken}


def test_the_eps_counts_stand_apart_from_onnxruntimes_in_the_verdict(cpu_reports):
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    dom = headless.parse_dom((cpu_reports / "report.html").read_text(encoding="utf-8"))
    ep = dom.by_id("ep-counts")
    assert not ep.find_all("span", "out-fail") and not ep.find_all("span", "out-crash")
    runtime = dom.by_id("runtime-counts")
    assert f"{sum(r['outcome'] == 'fail' for r in data['findings'])} fail" in runtime.text()
    assert not runtime.find_all("span", "out-fail"), "onnxruntime's failures are not drawn in the EP's red"


def test_every_outcome_has_a_filter_rule_and_each_present_one_a_radio(cpu_reports):
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    dom = headless.parse_dom((cpu_reports / "report.html").read_text(encoding="utf-8"))
    radios = {i.attrs["value"] for i in dom.by_id("filter").find_all("input") if i.attrs.get("type") == "radio"}
    assert radios == {"all"} | {r["outcome"] for r in data["results"]}
    rules = page.filter_css()
    assert all(f"body:has(#show-{o}:checked) tr.result:not(.is-{o})" in rules for o in page.OUTCOMES)


# Headless Chromium lays a window out at 500 px at least: a narrower screen is an iframe of that
# width in a page of its own, which media queries inside it see as the viewport.
MIN_WINDOW = 500
FLAGS_FOR_FRAMES = ("--allow-file-access-from-files",)  # the outer page reads the framed one's document


def framed(folder: Path, width: int, height: int, measure: str | None) -> Path:
    """frame.html beside folder/report.html: the report in an iframe `width` px wide; with
    `measure` (JavaScript over `document`, `window` and `getComputedStyle` of the framed page,
    returning a JSON-able value) run once the page has loaded, its result in #measured."""
    script = "" if measure is None else (
        "<script>window.addEventListener('load', function () { var f = document.getElementById('frame');"
        " var result = (function (window, document, getComputedStyle) { " + measure + " })"
        "(f.contentWindow, f.contentDocument, f.contentWindow.getComputedStyle.bind(f.contentWindow));"
        " var out = document.createElement('pre'); out.id = 'measured'; out.textContent = JSON.stringify(result);"
        " document.body.appendChild(out); });</script>")
    page = folder / "frame.html"
    page.write_text(f'<!DOCTYPE html><html><body style="margin:0"><iframe id="frame" src="report.html" '
                    f'style="border:0;display:block;width:{width}px;height:{height}px"></iframe>{script}</body></html>', encoding="utf-8")
    return page


def measured(browser: str, report: Path, tmp_path: Path, name: str, measure: str, *, width=1400, extra=(), without_script=False,
             checked: str | None = None):
    """What `measure` finds in the report's page laid out `width` px wide in Chromium;
    `without_script` drops the page's own script (the no-JavaScript case), `checked`
    pre-selects that outcome's radio."""
    text = (report / "report.html").read_text(encoding="utf-8")
    if without_script:
        text = re.sub(r"<script>.*?</script>", "", text, flags=re.S)
    if checked:
        text = text.replace('id="show-all" checked', 'id="show-all"').replace(f'id="show-{checked}"', f'id="show-{checked}" checked')
    folder = tmp_path / name
    folder.mkdir()
    (folder / "report.html").write_text(text, encoding="utf-8")
    page = framed(folder, width, 1600, measure)
    dom = headless.parse_dom(headless.dump_dom(browser, page, tmp_path / f"profile-{name}", (max(width, MIN_WINDOW), 1600),
                                               (*FLAGS_FOR_FRAMES, *extra)))
    found = dom.by_id("measured")
    assert found is not None, "the measuring script ran"
    return json.loads(found.text())


# The rows the filter leaves shown: neither the row, its contract nor its family is display:
# none (a row in a contract that is merely collapsed counts as shown).
VISIBLE_ROWS = ("return Array.prototype.filter.call(document.querySelectorAll('tr.result'), function (r) {"
                " return [r, r.closest('details'), r.closest('section')].every(function (e) { return getComputedStyle(e).display !== 'none'; });"
                " }).map(function (r) { return r.className; });")


def test_the_outcome_filter_works_without_javascript_in_chromium(browser, cpu_reports, tmp_path):
    rows = measured(browser, cpu_reports, tmp_path, "no-js", VISIBLE_ROWS, without_script=True, checked="fail")
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    assert sorted(rows) == ["result is-fail"] * sum(r["outcome"] == "fail" for r in data["results"])
    everything = measured(browser, cpu_reports, tmp_path, "no-js-all", VISIBLE_ROWS, without_script=True)
    assert len(everything) == len(data["results"])
    hidden = measured(browser, cpu_reports, tmp_path, "no-js-box", "return document.getElementById('filter-text').hidden;", without_script=True)
    assert hidden is True, "the text box, which needs the script, is not offered without it"


def test_the_text_filter_shows_the_matching_rows_and_opens_their_contracts_in_chromium(browser, cpu_reports, tmp_path):
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    contract = next(r["contract"] for r in data["results"] if r["outcome"] == "pass" and r["subject"] == "ep")
    measure = (f"var box = document.getElementById('filter-text'); box.value = {json.dumps(contract)}; box.dispatchEvent(new Event('input'));"
               f"var shown = {VISIBLE_ROWS.replace('return ', '', 1)[:-1]};"
               f"return {{shown: shown.length, open: document.getElementById({json.dumps(common.contract_anchor(contract))}).open, box: !box.hidden}};")
    result = measured(browser, cpu_reports, tmp_path, "text", measure)
    # every row of the contract (a row is found by its contract's id), and not every row
    assert result["box"] and result["open"]
    assert result["shown"] >= sum(r["contract"] == contract for r in data["results"])
    assert result["shown"] < len(data["results"])


SCROLL = ("return {page: document.documentElement.scrollWidth, window: window.innerWidth,"
          " background: getComputedStyle(document.body).backgroundColor};")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1400, 390])
def test_the_page_fits_the_screen_in_light_and_dark_in_chromium(browser, faulty_report, tmp_path, width, scheme):
    """At a phone's 390 px the page is no wider than the screen (wide tables scroll inside it);
    dark mode follows prefers-color-scheme. Screenshots are kept under reports/screenshots/."""
    extra = headless.DARK if scheme == "dark" else ()
    facts = measured(browser, faulty_report, tmp_path, "fit", SCROLL, width=width, extra=extra)
    assert facts["window"] == width
    assert facts["page"] <= width, f"the page is {facts['page']} px wide on a {width} px screen"
    assert facts["background"] == ("rgb(13, 17, 23)" if scheme == "dark" else "rgb(255, 255, 255)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTIFACTS / f"report-refdev-corrupt-{width}-{scheme}.png"
    png.unlink(missing_ok=True)
    folder = tmp_path / "shot"
    folder.mkdir()
    (folder / "report.html").write_bytes((faulty_report / "report.html").read_bytes())
    headless.screenshot(browser, framed(folder, width, 1600, None), png, tmp_path / "profile-shot", (max(width, MIN_WINDOW), 1600),
                        (*FLAGS_FOR_FRAMES, *extra))
    print(f"screenshot at {width} px, {scheme}: {png}")
    pixels = headless.read_png(png)[:, :width]
    assert headless.colour_share(pixels, "#0d1117" if scheme == "dark" else "#ffffff") > 0.5
    assert headless.colour_share(pixels, "#cf222e" if scheme == "light" else "#da3633") > 0.0005, "the verdict's colour is drawn"


def test_report_md_counts_the_eps_results_apart_from_onnxruntimes(cpu_reports):
    data = json.loads((cpu_reports / "report.json").read_text(encoding="utf-8"))
    lines = (cpu_reports / "report.md").read_text(encoding="utf-8").splitlines()
    (ep_line,) = [line for line in lines if line.startswith("Results of the EP: ")]
    (runtime_line,) = [line for line in lines if line.startswith("onnxruntime's own contracts")]
    assert "fail" not in ep_line and "crash" not in ep_line
    assert f"{sum(r['outcome'] == 'fail' for r in data['findings'])} fail" in runtime_line
