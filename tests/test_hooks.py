"""The hooks a vendor implements (conformance/plugin/hookspecs.py), in child pytest runs: a conftest
hears every result once, serial and under xdist, and the finished report once, after it is
written."""

from __future__ import annotations

import csv
import json

import pytest

TIMEOUT = 180

# A vendor's conftest.py: each result as it is decided, and the report once it is written,
# into a CSV beside report.json (the README's example).
VENDOR_CONFTEST = """
    import csv
    import json

    HEARD = []
    REPORTS = []


    def pytest_conformance_result(result, config):
        assert not hasattr(config, "workerinput")  # never on an xdist worker
        HEARD.append(result.to_dict())


    def pytest_conformance_report(report, folder, config):
        assert (folder / "report.json").is_file() and (folder / "report.html").is_file()
        with open(folder / "results.csv", "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["contract", "device", "params", "outcome"])
            for entry in report["results"]:
                writer.writerow([entry["contract"], entry["device"], json.dumps(entry["params"]), entry["outcome"]])
        REPORTS.append(report["verdict"])
        (folder / "heard.json").write_text(json.dumps({"results": HEARD, "reports": REPORTS}))
"""


def heard_in(pytester: pytest.Pytester, *args: str) -> tuple[dict, dict, list[dict]]:
    pytester.makeconftest(VENDOR_CONFTEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ep=cpu", "-k", "roundtrip", *args, timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    reports = pytester.path / "reports"
    report = json.loads((reports / "report.json").read_text())
    with open(reports / "results.csv", newline="") as rows:
        table = list(csv.DictReader(rows))
    return report, json.loads((reports / "heard.json").read_text()), table


def key(entry: dict) -> tuple:
    return entry["nodeid"], entry["outcome"], entry["message"]


def test_a_conftest_hears_every_result_and_the_report(pytester):
    report, heard, table = heard_in(pytester)
    assert report["results"] and heard["results"] == report["results"]  # each result, in the report's order
    assert heard["reports"] == [report["verdict"]]  # once
    assert [(row["contract"], row["outcome"]) for row in table] == [(r["contract"], r["outcome"]) for r in report["results"]]


def test_under_xdist_each_result_is_heard_once_on_the_controller(pytester):
    report, heard, _ = heard_in(pytester, "-n", "2")
    assert len(heard["results"]) == len(report["results"]) == report["run"]["collected"] > 1
    assert sorted(map(key, heard["results"])) == sorted(map(key, report["results"]))
