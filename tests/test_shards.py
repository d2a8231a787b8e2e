"""One run spread over machines: `--conformance-shard=K/N` and `ort-conformance merge`. Two shards
of a CPU run, merged, give the results and verdict of a full run; a shard alone never certifies;
shards that are not the N shards of one run (another build, a shard missing or given twice) are
refused, saying why."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from conformance import cli
from conformance.plugin.shards import shard_of, shard_option
from conformance.tools import bundle


@pytest.fixture(scope="module")
def shards(cpu_shards) -> list[Path]:
    return cpu_shards


def report(folder: Path) -> dict:
    return json.loads((folder / "report.json").read_text())


def by_case(data: dict) -> dict[tuple, tuple]:
    return {(r["ep"], r["contract"], r["device"], json.dumps(r["params"], sort_keys=True)): (r["outcome"], r["message"], r["severity"], r["subject"])
            for r in data["results"]}


@pytest.fixture(scope="module")
def merged(shards, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("merged") / "reports"
    assert cli.main(["merge", *map(str, shards), "-o", str(out)]) == 0
    return out


def test_two_shards_of_a_cpu_run_merged_give_the_results_and_verdict_of_a_full_run(merged, cpu_reports):
    whole, full = report(merged), report(cpu_reports)
    assert by_case(whole) == by_case(full) and len(whole["results"]) == len(full["results"])
    assert (whole["verdict"], whole["verdict_reasons"], whole["summary"]) == (full["verdict"], full["verdict_reasons"], full["summary"])
    assert whole["shard"] is None and whole["selection"]["complete"] is True
    assert whole["spec_digest"] == full["spec_digest"] and whole["ep"]["library_sha256"] == full["ep"]["library_sha256"]


def test_the_merged_run_bundles_into_a_complete_and_consistent_submission(merged, tmp_path):
    archive, _ = bundle.write(merged, tmp_path / "merged.tar.gz")
    files = bundle.read(archive)
    assert bundle.verify(archive, files) == []
    assert len([n for n in files if n.startswith("models/")]) > 0


def test_a_shard_alone_is_not_certified_and_says_which_shard_it_is(shards):
    for index, folder in enumerate(shards, start=1):
        data = report(folder)
        assert data["shard"] == {"index": index, "count": 2, "text": f"shard {index} of 2"}
        assert data["verdict"] == "incomplete"
        assert data["verdict_reasons"][0].startswith(f"shard {index} of 2: a shard alone never certifies")
        assert not data["selection"]["complete"] and f"shard {index} of 2" in data["selection"]["text"]
        assert f"shard {index} of 2" in (folder / "report.md").read_text() and f"shard {index} of 2" in (folder / "summary.md").read_text()


def test_a_shards_bundle_does_not_verify(shards, tmp_path):
    archive, _ = bundle.write(shards[0], tmp_path / "shard.tar.gz")
    problems = [str(p) for p in bundle.verify(archive, bundle.read(archive))]
    assert any("shard 1 of 2 of a run: a shard alone is no submission" in p for p in problems)


def test_the_split_is_deterministic_and_each_case_in_exactly_one_shard(shards, cpu_reports):
    first, second = ({r["nodeid"] for r in report(folder)["results"]} for folder in shards)
    assert not first & second and first | second == {r["nodeid"] for r in report(cpu_reports)["results"]}
    assert all(shard_of(nodeid, 2) == 1 for nodeid in first) and all(shard_of(nodeid, 2) == 2 for nodeid in second)
    # the node id's SHA-256 decides: the same shard on every machine
    assert shard_of("ort-conformance/copy::copy.required-directions[cpu-cpu>default]", 4) == 4


def altered(folder: Path, tmp_path: Path, name: str, change) -> Path:
    """A copy of the shard's folder whose journal's lines `change` alters in place."""
    copy = tmp_path / name
    shutil.copytree(folder, copy)
    lines = [json.loads(line) for line in (copy / "journal.jsonl").read_text().splitlines()]
    for line in lines:
        change(line)
    (copy / "journal.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return copy


def other_library(line: dict) -> None:
    if line["kind"] == "eps":
        line["eps"][0]["library_sha256"] = "0" * 64


def refusal(capsys, *folders: Path, out: Path) -> str:
    assert cli.main(["merge", *map(str, folders), "-o", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("ort-conformance: ") and len(error.strip().splitlines()) == 1
    assert not (out / "report.json").exists()
    return error


def test_merging_shards_of_different_builds_is_refused(shards, tmp_path, capsys):
    error = refusal(capsys, shards[0], altered(shards[1], tmp_path, "other-build", other_library), out=tmp_path / "out")
    assert "not the shards of one run: shards of different EP builds (provider, library sha256, options, devices)" in error
    assert "0000000000" in error


def test_merging_shards_of_different_catalogues_or_onnxruntime_builds_is_refused(shards, tmp_path, capsys):
    def other_specs(line):
        if line["kind"] == "eps":
            line["spec_digest"] = "f" * 64

    error = refusal(capsys, shards[0], altered(shards[1], tmp_path, "specs", other_specs), out=tmp_path / "out")
    assert "shards of different catalogues (spec digest)" in error
    other = tmp_path / "ort"
    shutil.copytree(shards[1], other)
    data = report(other)
    data["onnxruntime"]["version"] = "1.0.0"
    (other / "report.json").write_text(json.dumps(data))
    assert "shards of different onnxruntime builds" in refusal(capsys, shards[0], other, out=tmp_path / "out")


def test_a_missing_shard_a_shard_given_twice_and_a_whole_run_are_refused(shards, cpu_reports, tmp_path, capsys):
    assert "shard 2 of 2 missing: every shard of the run is needed" in refusal(capsys, shards[0], out=tmp_path / "out")
    twice = refusal(capsys, shards[0], shards[0], shards[1], out=tmp_path / "out")
    assert "shard 1 of 2 given twice" in twice and "has a result in" not in twice.split("given twice")[0]
    assert "not a shard: its run was not started with --conformance-shard K/N" in refusal(capsys, cpu_reports, out=tmp_path / "out")
    before = (shards[0] / "report.json").read_bytes()
    assert cli.main(["merge", *map(str, shards), "-o", str(shards[0])]) == 2
    assert "is one of the shards' folders" in capsys.readouterr().err and (shards[0] / "report.json").read_bytes() == before


def test_a_case_in_two_shards_is_refused(shards, tmp_path, capsys):
    def renumbered(line):
        if line["kind"] == "run":
            line["shard"] = {"index": 2, "count": 3, "text": "shard 2 of 3"}

    def third(line):
        if line["kind"] == "run":
            line["shard"] = {"index": 3, "count": 3, "text": "shard 3 of 3"}

    def first_of_three(line):
        if line["kind"] == "run":
            line["shard"] = {"index": 1, "count": 3, "text": "shard 1 of 3"}

    folders = [altered(shards[0], tmp_path, "a", first_of_three), altered(shards[1], tmp_path, "b", renumbered), altered(shards[1], tmp_path, "c", third)]
    assert "has a result in" in refusal(capsys, *folders, out=tmp_path / "out")


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0", "1/1001", "-1/2"])
def test_a_shard_option_that_is_not_k_of_n_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="expects K/N"):
        shard_option(text)


def test_the_shard_option_reads_k_of_n():
    assert shard_option("3/4").text == "shard 3 of 4" and shard_option("1/1").holds("anything")
