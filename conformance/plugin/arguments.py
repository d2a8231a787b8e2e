"""The command line of a conformance run: the kit's options (and the wrapper's ini option), and
the spec files, items of them and shipped cases' ids named on it (what the catalogue adds, what
the run selects).

Must not know: the run, the catalogue's contents, the checks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conformance.data import contracts_dir, shipped_spec_dirs
from conformance.options import WRAPPER_VARIABLE, duration, emulator_of, ep_options, seconds, unknown_options, wrapper_command
from conformance.plugin import ids
from conformance.plugin.shards import shard_option
from conformance.run.reruns import reruns_option


def add_options(parser: pytest.Parser) -> None:
    """The kit's options, in a group of pytest's --help (and the ini option of the wrapper)."""
    group = parser.getgroup("conformance", "ONNX Runtime EP conformance (ort-ep-conformance)")
    group.addoption("--ep", action="append", default=[], metavar="NAME",
                    help="EP to check: an alias from the EP specs (cpu, webgpu, refdev, ...) or the provider's own name "
                         "(e.g. CUDAExecutionProvider); repeatable. "
                         "Without --ep the plugin collects nothing. Spec files named on the command line "
                         "(myep.yaml) are checked with the shipped catalogue; one declaring a shipped EP replaces its shipped spec. "
                         "Examples: pytest --ep=cpu; pytest --ep=cpu --junitxml=reports/junit.xml -n 2")
    group.addoption("--ep-library", metavar="PATH",
                    help="register this plugin EP library first; --ep names the EP it provides "
                         "(e.g. pytest --ep-library=./libmy_ep.so --ep MyEp)")
    group.addoption("--ep-option", action="append", default=[], metavar="KEY=VALUE",
                    help="provider option for the EP (keys starting with 'session.' become session config entries); "
                         "repeatable (e.g. --ep-option device_id=1)")
    group.addoption("--conformance-report", metavar="DIR", default="reports",
                    help="folder for report.json, report.md, report.html and the models used (default: reports/)")
    group.addoption("--conformance-timeout", metavar="SECONDS", type=seconds, default=60.0,
                    help="time one check may take before its worker is killed and the check recorded as timeout (default: 60)")
    group.addoption("--conformance-isolation", choices=("worker", "none"), default="worker",
                    help="worker (default): checks run in a child process per EP; none: in the pytest process (for measurements "
                         "only), except contracts marked isolated or own_process (bad requests, the library's lifecycle), which "
                         "always run in a worker: they can take the process down. An EP that aborts in another check takes "
                         "pytest down with it: the results before are in the journal (ort-conformance rebuild)")
    group.addoption("--conformance-wrapper", metavar="COMMAND",
                    help="run every process the kit starts that loads an EP (workers, their spares, the fork server, own-process "
                         "checks, the probe) under this command, e.g. \"qemu-x86_64 -cpu Skylake-Client-v4\", \"taskset -c 0\", "
                         f"\"valgrind -q\" (default: ${WRAPPER_VARIABLE}, else the ini option conformance_wrapper); "
                         "under a qemu emulator the report says the CPU was emulated and measures no GB/s figures")
    parser.addini("conformance_wrapper", "the command every process that loads an EP runs under (see --conformance-wrapper)", default="")
    group.addoption("--conformance-strict", action="store_true", default=False,
                    help="certification mode: a required contract that could not run on an EP device (or declared not applicable "
                         "by the EP spec), or an incomplete run, fails the run (exit 1 unless conformant); the report says it was a strict run")
    group.addoption("--conformance-rerun", metavar="N", type=reruns_option, default=0,
                    help="try a case that failed, crashed or timed out again, up to N times, each in a fresh worker (default 0; "
                         "a crash or hang is always tried once more before its call is quarantined, and a worker killed, stopped or starved "
                         "from outside that the next try does not repeat is not counted); a case whose tries' outcomes "
                         "differ is flaky: it counts as a failure and never certifies")
    group.addoption("--conformance-soak", metavar="DURATION", type=duration, default=0.0,
                    help="stretch the stress tier (contracts with tier: stress) to about this long per case: more iterations, "
                         "more threads, larger sizes, e.g. --conformance-soak=10m (default 0: the bounded form every run has; "
                         "-m 'not stress' leaves the tier out, and a strict run without it is incomplete)")
    group.addoption("--conformance-shard", metavar="K/N", type=shard_option, default=None,
                    help="run shard K of N: a deterministic Kth of the cases (by node id; the same split on every machine), "
                         "e.g. one job of a CI matrix; a shard alone never certifies: `ort-conformance merge` of all N report "
                         "folders gives the run's report and verdict")


def probe_sizes(config: pytest.Config, wrapper: tuple[str, ...]) -> list[int] | None:
    """The copy probe's sizes: none timed under --collect-only, nor under an emulator, whose GB/s
    figures would be the emulator's (options.emulator_of); the probe's own otherwise."""
    return [] if config.option.collectonly or emulator_of(wrapper) else None


def wrapper(config: pytest.Config) -> tuple[str, ...]:
    """--conformance-wrapper, else $ORT_CONFORMANCE_WRAPPER, else the ini option (options.wrapper_command)."""
    given = config.getoption("conformance_wrapper")
    for text in (given, os.environ.get(WRAPPER_VARIABLE), config.getini("conformance_wrapper")):
        if text is not None:
            try:
                return wrapper_command(text)
            except ValueError as exc:
                raise pytest.UsageError(f"--conformance-wrapper: {exc}") from None
    return ()


def parse_options(pairs: list[str]) -> dict[str, str]:
    try:
        return ep_options(pairs)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def user_spec_args(config: pytest.Config) -> list[str]:
    """Spec files named on the command line, or items of them (`copy.yaml::copy.roundtrip-exact[...]`),
    or shipped families and cases by their id (`ort-conformance/copy::copy.roundtrip-exact[...]`)."""
    return [arg for arg in config.args if names_specs(arg)]


def names_specs(arg: str) -> bool:
    return Path(arg.split("::")[0]).suffix in (".yaml", ".yml") or ids.shipped_argument(arg, contracts_dir()) is not None


def spec_selections(config: pytest.Config) -> list[str]:
    """Those arguments, with a checkout's copy of a shipped spec file, or an id, named as the shipped file."""
    selections = []
    for arg in user_spec_args(config):
        by_id = ids.shipped_argument(arg, contracts_dir())
        file, separator, item = (by_id or arg).partition("::")
        selections.append(shipped_copy_of(file) + separator + item)
    return selections


def shipped_copy_of(file: str) -> str:
    """The shipped spec file that `file` is, or `file` itself. A checkout's `specs/contracts/x.yaml`
    is the shipped file when the kit was installed from that checkout (not editable): the
    installed package carries a copy, which is the one the catalogue holds."""
    path = Path(file)
    for folder in shipped_spec_dirs():
        if inside(file, folder):
            return file
        shipped = folder / path.name
        if path.parent.name == folder.name and shipped.is_file() and path.is_file() and shipped.read_bytes() == path.read_bytes():
            return str(shipped)
    return file


def user_spec_files(selections: list[str]) -> list[str]:
    """The files of those selections that the shipped specs do not already hold, each once."""
    files = dict.fromkeys(arg.split("::")[0] for arg in selections)
    return [file for file in files if not any(inside(file, folder) for folder in shipped_spec_dirs())]


def inside(file: str, folder: Path) -> bool:
    return Path(file).resolve().is_relative_to(folder.resolve())


def refuse_other_args(config: pytest.Config) -> None:
    """With --ep only spec files are collected: a test file or folder named on the command line
    would be dropped without a word, so it is a usage error."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return  # testpaths or the current folder, not the user's choice
    specs = user_spec_args(config)
    others = [arg for arg in config.args if arg not in specs]
    if others:
        raise pytest.UsageError(f"with --ep, pytest collects the contract catalogue and the spec files (*.yaml) named on the "
                                f"command line; not {', '.join(others)}")


def warn_of_unknown_options(config: pytest.Config, options: dict, eps: list) -> None:
    """A pytest warning for each --ep-option key an EP (its facts) does not report (options.unknown_options)."""
    for facts in eps:
        for text in unknown_options(options, facts.provider, [device.ep_options for device in facts.devices]):
            config.issue_config_time_warning(pytest.PytestConfigWarning(text), stacklevel=2)
