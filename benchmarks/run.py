"""The kit's benchmark: `python benchmarks/run.py` prints what a conformance run costs and how
close each EP's copies come to the machine's limits, with the targets met or not.

Figures are the best of several trials (noise from other processes only ever adds time). This
is a script that prints figures, not a test: nothing here fails on a slow machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import copies  # noqa: E402
import conformance_run  # noqa: E402
import large_catalogue  # noqa: E402
import stress_tier  # noqa: E402
from device_memcpy import DeviceMemcpy  # noqa: E402

from conformance.testbed import bandwidth  # noqa: E402
from conformance.testbed.eps import EpUnavailable  # noqa: E402

# Targets on the CPU lane (the kit's own 2-core development machine).
CHECKS_PER_SECOND = 1000
COLLECTION_SECONDS_PER_1000 = 1.0
ISOLATION_SHARE = 0.20
# A run within this of the work it cannot avoid: the checks' own time plus pytest's for as many tests.
MACHINERY_RATIO = 1.15
HOST_COPY_RATIO_AT_256MIB = 0.9
# The GPU lane's target: an EP's device-to-device copy within 0.8x of the device's own memcpy.
DEVICE_COPY_RATIO_AT_256MIB = 0.8


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, metavar="N", help="runs per timing; the best counts (default: 3)")
    parser.add_argument("--max-size", default="256MiB", metavar="SIZE", help="largest copy, e.g. 16MiB (default: 256MiB)")
    parser.add_argument("--ep", metavar="NAME", help="time the copies of this EP only (default: cpu, refdev, webgpu, cuda where present)")
    parser.add_argument("--ep-library", metavar="PATH", help="plugin EP library providing --ep")
    parser.add_argument("--skip-run", action="store_true", help="copies only, no conformance runs")
    parser.add_argument("--skip-stress", action="store_true", help="leave out what the stress tier costs (two more runs per EP)")
    parser.add_argument("--skip-large", action="store_true",
                        help=f"leave out the vendor's large catalogue ({large_catalogue.TARGET_CONTRACTS} contracts, --repeat runs of about 10 s)")
    parser.add_argument("--json", metavar="PATH", help="also write the copy figures as JSON (rows, host and device limits)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat expects 1 or more runs, got {args.repeat}")
    largest = _parse_size(args.max_size)
    if largest is None:
        print(f"benchmarks/run.py: --max-size expects a size such as 4KiB or 64MiB, got {args.max_size!r}", file=sys.stderr)
        return 2
    verdicts = []
    if not args.skip_run:
        verdicts += _conformance_section(args.repeat)
        if not args.skip_stress:
            verdicts += _stress_section()
        if not args.skip_large:
            verdicts += _large_catalogue_section(args.repeat)
    verdicts += _copy_section(tuple(n for n in copies.SIZES if n <= largest), args.ep, args.ep_library, args.json)
    _print_table("targets (CPU lane)", ["target", "figure", "met"], verdicts)
    return 0


def _conformance_section(repeat: int) -> list[list[str]]:
    full = conformance_run.conformance_run(["--ep=cpu"], [], repeat)
    selection = conformance_run.without_isolated_contracts()
    isolated = conformance_run.conformance_run(["--ep=cpu"], selection, repeat)
    in_process = conformance_run.conformance_run(["--ep=cpu"], ["--conformance-isolation", "none", *selection], repeat)
    collected = conformance_run.collection(["--ep=cpu"], repeat)
    rate = full.checks / full.wall
    share = max(0.0, isolated.wall - in_process.wall) / isolated.wall
    per_1000 = collected.seconds * 1000 / collected.items
    _print_table("conformance run, CPU EP (best of %d, interpreter start included)" % repeat,
                 ["run", "checks", "wall s", "checks/s", "pytest s", "exit"],
                 [_run_row("full catalogue, in workers (the default)", full),
                  _run_row("without isolated contracts, in workers", isolated),
                  _run_row("without isolated contracts, in-process (--conformance-isolation none)", in_process)])
    floors = conformance_run.floor(full.checks, repeat)
    _print_table("floor: what any run of this many checks costs here (best of %d)" % repeat, ["command", "wall s", "checks/s at most"],
                 [[what, f"{wall:.2f}", f"{full.checks / wall:.0f}"] for what, wall in floors.items()])
    # A ratio taken in the same run holds on a busy machine, where the absolute figures do not.
    pytest_floor = floors[conformance_run.PYTEST_FLOOR.format(items=full.checks)]
    print(f"full run / pytest with as many empty tests = {full.wall / pytest_floor:.2f}")
    # What the kit's machinery adds to the work it cannot avoid: the checks' own time (as their
    # workers timed them) and pytest's own cost for as many tests (see benchmarks/README.md).
    machinery = full.wall / (full.checks_seconds + pytest_floor)
    print(f"full run / (the checks' own {full.checks_seconds:.2f} s + pytest with as many empty tests) = {machinery:.2f}\n")
    _print_table("collection", ["items", "seconds", "seconds per 1000 items"],
                 [[collected.items, f"{collected.seconds:.3f}", f"{per_1000:.3f}"]])
    print(f"isolation (same checks, isolated contracts left out): worker/in-process = {isolated.wall / in_process.wall:.2f}; "
          f"share of the isolated run = {share:.0%}\n")
    return [
        [f"checks per second >= {CHECKS_PER_SECOND}", f"{rate:.0f}", _met(rate >= CHECKS_PER_SECOND)],
        [f"collection of 1000 items < {COLLECTION_SECONDS_PER_1000:g} s", f"{per_1000:.3f} s", _met(per_1000 < COLLECTION_SECONDS_PER_1000)],
        [f"isolation <= {ISOLATION_SHARE:.0%} of the run", f"{share:.0%}", _met(share <= ISOLATION_SHARE)],
        [f"machinery: run / (checks + pytest floor) <= {MACHINERY_RATIO:.2f}x", f"{machinery:.2f}x", _met(machinery <= MACHINERY_RATIO)],
    ]


def _stress_section() -> list[list[str]]:
    """What the stress tier adds to a certification run, per EP, both runs side by side."""
    rows = stress_tier.measure()
    _print_table("stress tier: the whole run against the same run with -m 'not stress' (one of each, side by side)",
                 ["ep", "whole s", "without s", "tier adds s", "stress cases", "their own s", "peak RSS", "peak RSS without",
                  "largest tensor", f"adds <= {stress_tier.ADDED_SECONDS:g} s", "measured in s"], rows)
    return [[f"stress tier adds <= {stress_tier.ADDED_SECONDS:g} s ({row[0]})", f"{row[3]} s", _met(row[9] == "yes")] for row in rows]


def _large_catalogue_section(repeat: int) -> list[list[str]]:
    """A vendor's catalogue of 10 000 contracts against pytest's floor for as many items, both
    the best of `repeat`, measured in this run (see benchmarks/large_catalogue.py)."""
    run = large_catalogue.measure(large_catalogue.TARGET_CONTRACTS, repeat)
    print(f"## a vendor's large catalogue (best of {repeat})\n{run.line()}\n")
    target = f"{large_catalogue.TARGET_CONTRACTS} contracts: run / pytest floor <= {large_catalogue.TARGET_RATIO:g}x"
    if run.error:
        return [[target, "no report", _met(False)]]
    return [[target, f"{run.ratio:.2f}x", _met(run.ratio <= large_catalogue.TARGET_RATIO)]]


def _copy_section(sizes: tuple[int, ...], ep: str | None, library: str | None, json_path: str | None = None) -> list[list[str]]:
    host = copies.host_limits(sizes)
    device = DeviceMemcpy()
    rows, skipped = [], []
    for target in copies.targets(library, ep):
        if target.skipped:
            skipped.append(f"{target.name}: {target.skipped}")
            continue
        try:
            rows += copies.measure(target, sizes, device)
        except EpUnavailable as exc:
            skipped.append(f"{target.name}: {str(exc).splitlines()[0]}")
    _print_table("host memcpy (numpy, host to host)", ["size", "GB/s"],
                 [[bandwidth.size_label(n), f"{g:.2f}"] for n, g in host.items()])
    table = []
    for row in rows:
        label = bandwidth.size_label(row.nbytes)
        if row.error:
            table.append([row.ep, row.device, row.method, f"{row.source}>{row.destination}", label, "refused", "", "", row.error[:60]])
            continue
        to_device = f"{row.gbps / row.device_memcpy:.2f}" if row.device_memcpy else ""
        table.append([row.ep, row.device, row.method, f"{row.source}>{row.destination}", label, f"{row.gbps:.2f}",
                      f"{row.gbps / host[row.nbytes]:.2f}", to_device, ""])
    _print_table("copy throughput (best of 5 trials)",
                 ["ep", "device", "method", "direction", "size", "GB/s", "x host memcpy", "x device memcpy", "note"], table)
    print("device memcpy: " + (device.tool if device.gbps else f"not measured: {device.reason}"))
    for line in skipped:
        print(f"skipped: {line}")
    print()
    if json_path:
        copies.write_json(json_path, rows, host, device.tool or f"not measured: {device.reason}", skipped)
    return [host_copy_verdict(rows, host, max(sizes)), *device_copy_verdicts(rows, max(sizes))]


def host_copy_verdict(rows: list, host: dict[int, float], largest: int) -> list[str]:
    """The host-copy target's row: judged at 256 MiB only; with a smaller --max-size it says
    the size was not measured rather than judging smaller copies against it."""
    target = f"host copies >= {HOST_COPY_RATIO_AT_256MIB:g} x memcpy at {bandwidth.size_label(copies.SIZES[-1])}"
    if largest < copies.SIZES[-1]:
        return [target, f"not measured: --max-size {bandwidth.size_label(largest)}", "-"]
    host_copies = [r for r in rows if r.source == r.destination == "cpu" and r.nbytes == largest and not r.error]
    worst = min((r.gbps / host[largest] for r in host_copies), default=None)
    if worst is None:
        return [target, "no host copy measured", _met(False)]
    return [target, f"worst {worst:.2f} of {len(host_copies)}", _met(worst >= HOST_COPY_RATIO_AT_256MIB)]


def device_copy_verdicts(rows: list, largest: int) -> list[list[str]]:
    """The GPU target's rows, one per method, where a device-to-device figure has the device's
    own memcpy beside it (a CUDA device with PyTorch or CuPy); none elsewhere."""
    verdicts = []
    for method, label in (("copy_tensors", "copy_tensors"), ("update_inplace", "update_inplace(OrtValue)")):
        measured = [r for r in rows if r.method == method and r.source == r.destination == "default" and r.device_memcpy and not r.error]
        if not measured:
            continue
        target = f"{label} device>device >= {DEVICE_COPY_RATIO_AT_256MIB:g} x device memcpy at {bandwidth.size_label(copies.SIZES[-1])}"
        at_largest = [r for r in measured if r.nbytes == copies.SIZES[-1]]
        if largest < copies.SIZES[-1] or not at_largest:
            verdicts.append([target, f"not measured: --max-size {bandwidth.size_label(largest)}", "-"])
            continue
        worst = min(r.gbps / r.device_memcpy for r in at_largest)
        verdicts.append([target, f"{worst:.2f}", _met(worst >= DEVICE_COPY_RATIO_AT_256MIB)])
    return verdicts


def _run_row(label: str, run) -> list:
    return [label, run.checks, f"{run.wall:.2f}", f"{run.checks / run.wall:.0f}", f"{run.pytest_seconds:.2f}", run.exit_code]


def _met(condition: bool) -> str:
    return "yes" if condition else "NO"


def _parse_size(text: str) -> int | None:
    for unit, factor in (("KiB", bandwidth.KIB), ("MiB", bandwidth.MIB)):
        if text.endswith(unit) and text[: -len(unit)].isdigit():
            return int(text[: -len(unit)]) * factor
    return None


def _print_table(title: str, header: list[str], rows: list[list]) -> None:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    print(f"## {title}")
    for index, row in enumerate(cells):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        if index == 0:
            print("  ".join("-" * width for width in widths))
    print()


if __name__ == "__main__":
    sys.exit(main())
