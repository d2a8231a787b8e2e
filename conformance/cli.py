"""`ort-conformance`: validate specs, print the copy-capability matrix, generate the catalogue.

Parses arguments, calls the library, sets the exit code. Errors are one clear message on
stderr and a non-zero exit, never a traceback. Conformance runs themselves are pytest runs:
`pytest --ep NAME`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from conformance.version import __version__
from conformance.matrix import STATUSES
from conformance.options import WRAPPER_VARIABLE, ep_options, reason_of, seconds, wrapper_command

EXAMPLES = """\
examples:
  ort-conformance validate                      check the shipped specs
  ort-conformance validate myep.yaml            check a vendor's EP declaration with the catalogue
  ort-conformance probe --ep cpu                which copy directions work, found by trying
  ort-conformance probe --ep-library=./libmy_ep.so --ep MyEp --json
  ort-conformance init --ep-library=./libmy_ep.so --ep MyEp -o myep.yaml   a draft of its spec (docs/new-ep.md)
  ort-conformance catalogue -o docs/contracts.md
  pytest --ep cpu                               a conformance run (report and junit.xml in reports/)
  ort-conformance bundle --vendor ACME -o acme.tar.gz   the submission bundle of that run
  ort-conformance verify acme.tar.gz            check a bundle: complete and consistent
  ort-conformance diff old/report.json new.tar.gz   what a new build broke (exit 1 on regressions)
  ort-conformance found reports/*/report.json -o docs/found.md   "What we found" from lane reports
  ort-conformance fleet reports/*/report.json acme.tar.gz -o fleet/   many runs in one capability table
  ort-conformance answers reports/fleet/fleet.json -o docs/answers.md   seed 000's questions answered from it
  pytest --ep cpu --conformance-shard=1/2 --conformance-report s1   one shard of a run (a CI matrix job)
  ort-conformance merge s1 s2 -o reports         the shards' reports merged: the run's verdict
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ort-conformance",
        description="Conformance kit for the memory and copy contract of ONNX Runtime execution providers.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, summary: str, details: str, examples: str):
        return commands.add_parser(name, help=summary, description=f"{summary[0].upper()}{summary[1:]}.\n\n{details}",
                                   epilog=f"examples:\n{examples}", formatter_class=argparse.RawDescriptionHelpFormatter)

    validate = command("validate", "check spec files against the schemas and the catalogue",
                       "A file of yours is checked together with the shipped catalogue it refers to. Every error is\n"
                       "printed as file:line:column. Exit 0 when valid, 1 with the errors, 2 when a path does not exist.",
                       "  ort-conformance validate                 the shipped specs\n"
                       "  ort-conformance validate myep.yaml       your EP declaration (or contracts) with the catalogue")
    validate.add_argument("paths", nargs="*", metavar="PATH", help="spec files or folders of them (default: the shipped specs)")

    probe = command("probe", "print the copy-capability matrix of EP devices",
                    "Tries every copy direction among CPU memory, each EP device's DEFAULT and HOST_ACCESSIBLE memory\n"
                    "and other EP devices' memory, with real bytes in a worker process: supported, unverified,\n"
                    "broken, required_but_missing, not_required or unsupported, with GB/s figures.\n"
                    "The JSON (--json) follows conformance/schemas/probe.schema.json.\n"
                    "Exit 0; 1 when a pair's status is one --fail-on names (default: broken) or the probe of a\n"
                    "device was lost (crash or timeout); 2 on bad input or an EP that is not here; 3 when the EP's\n"
                    "worker could not start.",
                    "  ort-conformance probe --ep cpu\n"
                    "  ort-conformance probe --ep cuda --no-throughput --fail-on broken,required_but_missing\n"
                    "  ort-conformance probe --ep-library=./libmy_ep.so --ep MyEp --json")
    _ep_arguments(probe, "EP alias or provider name (default: every EP listed by get_ep_devices())",
                  "time the probe of one EP device may take before its worker is killed (default: 60)",
                  f"run the probe's processes under this command (e.g. \"qemu-x86_64 -cpu Skylake-Client-v4\"; default: "
                  f"${WRAPPER_VARIABLE}); under a qemu emulator no GB/s figures are measured")
    probe.add_argument("--json", action="store_true", help="print JSON instead of a table")
    probe.add_argument("--fail-on", type=statuses, default=("broken",), metavar="STATUS[,STATUS]",
                       help=f"exit 1 when a pair has one of these statuses ({', '.join(STATUSES)}; 'none' for never; default: broken)")
    probe.add_argument("--no-throughput", action="store_true", help="skip the GB/s figures (the probe takes a fraction of a second)")

    init = command("init", "draft an EP's spec from what the EP itself shows",
                   "Loads the EP in a worker, as a run does, and writes a spec `validate` accepts: names, packages (or the\n"
                   "library's sha256), device type, memory, the copy directions that moved the bytes, where session values\n"
                   "lived, the importer and, for a narrow EP, the ops and types it takes; each claim observed and unconfirmed,\n"
                   "the file marked a draft (a strict run with it is incomplete). What breaks a contract is a warning on\n"
                   "stderr and a comment beside the claim; docs/new-ep.md goes on from there. Exit 0; 2 on bad input, nothing\n"
                   "written: a library missing or not loading, an EP it lacks, an EP that lists no device, crashes or hangs\n"
                   "as it loads, or FILE existing without --force.",
                   "  ort-conformance init --ep-library=./libmy_ep.so --ep MyEp -o myep.yaml\n"
                   "  pytest myep.yaml --ep-library=./libmy_ep.so --ep MyEp")
    _ep_arguments(init, "the EP's provider name (or an alias the kit knows)", "time the EP may take to answer (default: 60)",
                  f"run the EP's worker under this command (default: ${WRAPPER_VARIABLE})")
    init.add_argument("-o", "--output", metavar="FILE", help="the draft to write (default: NAME.yaml here, NAME the draft's)")
    init.add_argument("--force", action="store_true", help="replace FILE when it exists (it is kept otherwise)")

    catalogue = command("catalogue", "generate the contract catalogue (Markdown) from the YAML",
                        "The catalogue is generated from specs/contracts/*.yaml, the single source of truth.",
                        "  ort-conformance catalogue -o docs/contracts.md\n"
                        "  ort-conformance catalogue --check -o docs/contracts.md   in CI: exit 1 when it is stale")
    catalogue.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    catalogue.add_argument("--check", action="store_true", help="write nothing; exit 1 when FILE differs from what would be generated")

    bundle = command("bundle", "write the submission archive of a conformance run",
                     "One .tar.gz: manifest.json (versions, hashes of every file), report.json/.md/.html, junit.xml,\n"
                     "the worker logs and the models used. Exit 0, or 2 when an input is missing or unreadable.",
                     "  pytest --ep cpu\n"
                     "  ort-conformance bundle --vendor ACME -o acme.tar.gz")
    bundle.add_argument("--report-dir", default="reports", metavar="DIR", help="the run's report folder (default: reports/)")
    bundle.add_argument("--junit", metavar="FILE", help="the run's JUnit file (default: DIR/junit.xml)")
    bundle.add_argument("-o", "--output", metavar="FILE", help="the archive to write (default: conformance-<EP label>.tar.gz)")
    bundle.add_argument("--vendor", metavar="NAME", help="who submits the bundle (recorded in the manifest)")

    verify = command("verify", "check a submission bundle; exit 1 with the list of problems",
                     "Complete (every required contract on every device, no skip without a reason) and consistent\n"
                     "(hashes, versions, summary, verdict and junit.xml agree). It does not prove authorship.\n"
                     "Exit 0, 1 with the problems, 2 when the file is not a bundle this kit can read (not a tar, a member\n"
                     "not a regular file under a plain name, past the size limits) or the library cannot be read.",
                     "  ort-conformance verify acme.tar.gz\n"
                     "  ort-conformance verify acme.tar.gz --library ./libmy_ep.so")
    verify.add_argument("bundle", metavar="BUNDLE", help="the .tar.gz written by `ort-conformance bundle`")
    verify.add_argument("--library", metavar="PATH", help="also check that this EP library is the one the bundle was made with (sha256)")

    diff = command("diff", "compare two runs (report.json, report folders or bundles); exit 1 on regressions",
                   "Lists regressions (a case that now fails, crashes, times out or errors, a copy direction that\n"
                   "broke, or a worse verdict), cases no longer checked, fixes, new findings against onnxruntime and\n"
                   "contract changes; cases by their pytest ids. Exit 0, 1 on a regression (or, with\n"
                   "--fail-on-findings, a new finding against onnxruntime), 2 when either side is not a report.",
                   "  ort-conformance diff old/report.json reports/\n"
                   "  ort-conformance diff old.tar.gz new.tar.gz --json")
    diff.add_argument("old", metavar="OLD", help="the earlier run: report.json, its folder, or a bundle")
    diff.add_argument("new", metavar="NEW", help="the later run, in any of the same forms")
    diff.add_argument("--json", action="store_true", help="print JSON instead of text")
    diff.add_argument("--fail-on-findings", action="store_true",
                      help="exit 1 on new findings against onnxruntime too (by default they are shown apart, not gating)")

    found = command("found", "regenerate \"What we found\" (Markdown) from conformance reports",
                    "One section per lane: what the EP spec claims, whether the run verified it, and each failure\n"
                    "with the upstream issue it matches. Exit 0, 2 when a report cannot be read.",
                    "  ort-conformance found reports/*/report.json -o docs/found.md")
    found.add_argument("reports", nargs="+", metavar="REPORT", help="report.json files, one per lane (reports/<lane>/report.json)")
    found.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")

    fleet = command("fleet", "gather runs (report.json files or verified bundles) into one capability table",
                    "One row per EP device of each run: the memory kinds it advertises, each copy direction's status,\n"
                    "the importer and its handle types, where session inputs and outputs live, the verdict and its date.\n"
                    "Writes DIR/fleet.json (conformance/schemas/fleet.schema.json; read it with conformance.fleet.load)\n"
                    "and DIR/fleet.html (one filterable table, each cell linking to the run's report). A bundle that\n"
                    "does not verify is refused. A run given twice (its folder and its bundle) is taken once. Exit 0;\n"
                    "2 when an input is not a report or a verified bundle, or DIR cannot be written.",
                    "  ort-conformance fleet reports/*/report.json -o reports/fleet --answers docs/answers.md\n"
                    "  ort-conformance fleet acme-cuda.tar.gz other-vendor.tar.gz reports/cpu -o fleet")
    fleet.add_argument("runs", nargs="+", metavar="REPORT_OR_BUNDLE", help="report.json files, folders holding one, or bundles")
    fleet.add_argument("-o", "--output", required=True, metavar="DIR", help="the folder to write fleet.json and fleet.html into")
    fleet.add_argument("--answers", metavar="FILE", help="also write the answers page (as `ort-conformance answers DIR/fleet.json -o FILE`)")

    answers = command("answers", "answer seed 000's questions for every EP of a fleet table (Markdown)",
                      "Per EP device: is its DEFAULT memory other than CPU, which copy_tensors directions work between\n"
                      "CPU, DEFAULT and HOST_ACCESSIBLE, does it give an importer (handle types, imported tensors' memory),\n"
                      "where session inputs and outputs live; each answer linking to its run, and the seed's claims about\n"
                      "OpenVINO weighed against the OpenVINO rows; what a run could not measure is \"not known\", with why.\n"
                      "Exit 0; 2 when FLEET is not a fleet table (not a regular file, over 256 MiB, or not of its schema)\n"
                      "or FILE cannot be written.",
                      "  ort-conformance answers reports/fleet/fleet.json -o docs/answers.md")
    answers.add_argument("fleet", metavar="FLEET", help="fleet.json (or the folder holding it) written by `ort-conformance fleet`")
    answers.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")

    merge = command("merge", "merge the report folders of the N shards of one run into the run's report set",
                    "Each DIR is a shard's report folder (pytest --conformance-shard=K/N --conformance-report DIR), e.g.\n"
                    "one job of a CI matrix each. Refused, saying why, unless they are every shard of one run: one N and\n"
                    "each index once, the same catalogue digest, kit, onnxruntime and EP build (library sha256), each\n"
                    "finished, no case twice and every case of the catalogue once. Writes report.json/md/html, summary.md,\n"
                    "junit.xml and the journal with the verdict a single full run gives, the report set last: a merge\n"
                    "that fails writes none. Exit 0; 2 when refused (a shard's file truncated or malformed included) or\n"
                    "OUT cannot be written.",
                    "  ort-conformance merge shard-1 shard-2 shard-3 -o reports\n"
                    "  ort-conformance merge artifacts/shard-* -o merged && ort-conformance bundle --report-dir merged -o acme.tar.gz")
    merge.add_argument("shards", nargs="+", metavar="DIR", help="the shards' report folders")
    merge.add_argument("-o", "--output", required=True, metavar="OUT", help="the folder to write the merged report set into")

    rebuild = command("rebuild", "write a run's report set again from its results journal",
                      "Every result a pytest run decides is appended to DIR/journal.jsonl as it comes. A run that\n"
                      "was killed (SIGKILL, the OOM killer, an EP that aborted the pytest process) or could not write\n"
                      "its report (a full disk) leaves its results there: this writes report.json, report.md and\n"
                      "report.html from them, marked interrupted unless the run had finished. The run's spec files\n"
                      "are read again, and must be those the run read. Exit 0; 2 when there is no journal to read, it\n"
                      "is not one, the spec files changed or a run holds the folder; 3 when the report cannot be written.",
                      "  ort-conformance rebuild\n"
                      "  ort-conformance rebuild reports/refdev")
    rebuild.add_argument("report_dir", nargs="?", default="reports", metavar="DIR", help="the run's report folder (default: reports/)")

    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return {"validate": _validate, "probe": _probe, "init": _init, "catalogue": _catalogue, "bundle": _bundle, "verify": _verify, "diff": _diff,
                "found": _found, "fleet": _fleet, "answers": _answers, "merge": _merge, "rebuild": _rebuild}[args.command](args)
    except KeyboardInterrupt:
        print("ort-conformance: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        # A path the system refuses before any command's own checks can word it (one longer
        # than the system allows): one line, never a traceback.
        from conformance.run.runfolder import shown

        where = f"{shown(Path(str(exc.filename)))}: " if exc.filename else ""
        print(f"ort-conformance: {where}cannot be used: {exc.strerror or exc}", file=sys.stderr)
        return 2


def _ep_arguments(parser: argparse.ArgumentParser, ep: str, timeout: str, wrapper: str) -> None:
    """The options that name an EP and how its worker runs, as `probe` and `init` share them."""
    parser.add_argument("--ep", metavar="NAME", help=ep)
    parser.add_argument("--ep-library", metavar="PATH", help="register this plugin EP library first (needs --ep)")
    parser.add_argument("--ep-option", action="append", default=[], metavar="KEY=VALUE", help="provider option; repeatable")
    parser.add_argument("--timeout", type=seconds, default=60.0, metavar="SECONDS", help=timeout)
    parser.add_argument("--wrapper", metavar="COMMAND", help=wrapper)


def _validate(args) -> int:
    from conformance.checks import known_checks
    from conformance.catalogue.spec import load_catalogue, spec_files
    from conformance.data import shipped_spec_dirs
    from conformance.errors import SpecErrors

    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        print(f"ort-conformance: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    empty = [p for p in args.paths if Path(p).is_dir() and not spec_files([p])]
    if empty:
        print(f"ort-conformance: no spec files (*.yaml, *.yml) in {', '.join(empty)}", file=sys.stderr)
        return 2
    shipped = [str(p) for p in shipped_spec_dirs()]
    # A vendor's file is checked together with the shipped catalogue it refers to.
    paths = shipped + [p for p in args.paths if Path(p).resolve() not in {Path(s).resolve() for s in shipped}]
    try:
        catalogue = load_catalogue(paths, known_checks=known_checks())
    except SpecErrors as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        print(f"{len(exc.errors)} error{'s' if len(exc.errors) != 1 else ''} in spec files", file=sys.stderr)
        return 1
    print(f"valid: {len(catalogue.files)} files, {len(catalogue.contracts)} contracts, {len(catalogue.eps)} EP declarations")
    for ep in catalogue.eps:
        if ep.overrides:
            print(f"EP '{ep.name}': {ep.location.path} overrides the shipped {ep.overrides.path}")
    return 0


def _probe(args) -> int:
    from conformance.isolation.controller import WorkerLost, WorkerRefused
    from conformance.run.probing import probe_eps
    from conformance.tools import matrix_text

    try:
        options = ep_options(args.ep_option)
        wrapper = wrapper_command(args.wrapper if args.wrapper is not None else os.environ.get(WRAPPER_VARIABLE))
    except ValueError as exc:
        print(f"ort-conformance: {exc}", file=sys.stderr)
        return 2
    if args.ep_library and not args.ep:
        print("ort-conformance: --ep-library needs --ep naming the EP the library provides", file=sys.stderr)
        return 2
    try:
        matrix = probe_eps(args.ep, library=args.ep_library, options=options, timeout=args.timeout, throughput=not args.no_throughput,
                           wrapper=wrapper)
    except WorkerRefused as exc:
        print(f"ort-conformance: {exc}", file=sys.stderr)
        return 2
    except WorkerLost as exc:
        under = f" (its processes run under the wrapper {' '.join(wrapper)!r})" if wrapper else ""
        print(f"ort-conformance: the EP could not be loaded{under}: {exc}", file=sys.stderr)
        return 3
    if args.json:
        print(matrix.to_json())
    else:
        for line in matrix_text.lines(matrix.to_dict()):
            print(line)
    failing = sorted(matrix.statuses() & set(args.fail_on))
    if failing:
        print(f"ort-conformance: pairs that are {' or '.join(failing)} (--fail-on {','.join(args.fail_on) or 'none'})", file=sys.stderr)
    return 1 if matrix.lost or failing else 0


def _init(args) -> int:
    from conformance.tools import init

    try:
        wrapper = wrapper_command(args.wrapper if args.wrapper is not None else os.environ.get(WRAPPER_VARIABLE))
        return init.run(init.Request(args.ep, args.ep_library, ep_options(args.ep_option), args.timeout, wrapper,
                                     Path(args.output) if args.output else None, args.force))
    except (init.InitError, ValueError) as exc:
        return _refused(exc)


def statuses(text: str) -> tuple[str, ...]:
    """--fail-on's value: statuses of the matrix, comma-separated, or 'none'."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if names == ("none",):
        return ()
    unknown = [name for name in names if name not in STATUSES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"not a status: {', '.join(unknown) or repr(text)} (statuses: {', '.join(STATUSES)}, or none)")
    return names


def _catalogue(args) -> int:
    from conformance.catalogue.markdown import render
    from conformance.checks import known_checks
    from conformance.catalogue.spec import load_catalogue
    from conformance.errors import SpecErrors

    try:
        text = render(load_catalogue(known_checks=known_checks()))
    except SpecErrors as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.check:
        if not args.output:
            print("ort-conformance: --check needs --output FILE", file=sys.stderr)
            return 2
        try:
            current = Path(args.output).read_text(encoding="utf-8") if Path(args.output).exists() else ""
        except (OSError, UnicodeDecodeError) as exc:
            print(f"ort-conformance: {args.output}: cannot be read: {reason_of(exc)}", file=sys.stderr)
            return 2
        if current != text:
            print(f"{args.output} is stale: regenerate it with `ort-conformance catalogue -o {args.output}`", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    return _emit(text, args.output)


def _emit(text: str, output: str | None) -> int:
    """Writes `text` to `output` (stdout when None), whole or not at all (safe_io.write_file:
    a symlink planted at `output`, or as its folder, is refused); one that cannot be written
    is exit 2."""
    from conformance import safe_io

    if not output:
        sys.stdout.write(text)
        return 0
    path = Path(output)
    try:
        safe_io.write_file(path.parent, path.name, text)
    except safe_io.UnsafeFile as exc:
        print(f"ort-conformance: {output}: cannot be written: {exc}", file=sys.stderr)
        return 2
    return 0


def _bundle(args) -> int:
    from conformance.tools import bundle

    try:
        output, data = bundle.write(Path(args.report_dir), Path(args.output) if args.output else None,
                                    junit_file=Path(args.junit) if args.junit else None, vendor=args.vendor)
    except bundle.BundleError as exc:
        print(f"ort-conformance: {exc}", file=sys.stderr)
        return 2
    print(f"{output}: {len(data['files'])} files, EP {data['ep']['name']}, verdict {data['verdict']}")
    return 0


def _verify(args) -> int:
    from conformance.errors import FileError
    from conformance.tools import bundle

    path = Path(args.bundle)
    try:
        files = bundle.read(path)
        library = bundle.check_library(files, Path(args.library)) if args.library else []
    except FileError as exc:
        # Bad input, refused as diff and fleet refuse it; exit 1 is the verdict on a bundle read.
        return _refused(exc)
    problems = bundle.verify(path, files, required_contracts=_shipped_required_contracts(files)) + library
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"{args.bundle}: {len(problems)} problem{'s' if len(problems) != 1 else ''}", file=sys.stderr)
        return 1
    print(f"{args.bundle}: complete and consistent")
    return 0


def _shipped_required_contracts(files: dict[str, bytes]) -> set[str]:
    """The required contracts of this kit's catalogue, when the bundle (its `files`) was made
    with this kit version: a bundle may add contracts, never drop shipped ones."""
    from conformance.checks import known_checks
    from conformance.report.schema import parse_json
    from conformance.catalogue.spec import load_catalogue
    from conformance.errors import SpecErrors

    try:
        report = parse_json(files["report.json"])
    except (KeyError, ValueError):
        return set()
    if not isinstance(report, dict) or report.get("kit_version") != __version__:
        return set()  # verify() says what is wrong with the report, if anything
    try:
        catalogue = load_catalogue(known_checks=known_checks())
    except SpecErrors:
        return set()
    return {c.id for c in catalogue.contracts if c.severity == "required"}


def _diff(args) -> int:
    from conformance.tools import diff
    from conformance.tools.bundle import BundleError

    try:
        result = diff.compare(diff.load(Path(args.old)), diff.load(Path(args.new)))
    except BundleError as exc:
        print(f"ort-conformance: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n" if args.json else diff.render(result))
    return 1 if result.failed(fail_on_findings=args.fail_on_findings) else 0


def _found(args) -> int:
    from conformance.checks import known_checks
    from conformance.tools.found import ReportError, load_reports, render
    from conformance.catalogue.spec import load_catalogue
    from conformance.errors import SpecErrors

    try:
        text = render(load_reports(args.reports), load_catalogue(known_checks=known_checks()))
    except (ReportError, SpecErrors) as exc:
        return _refused(exc)
    status = _emit(text, args.output)
    if args.output and status == 0:
        print(f"wrote {args.output} from {len(args.reports)} reports")
    return status


def _refused(error: Exception | str) -> int:
    """Bad input: its one line on stderr, exit 2."""
    print(f"ort-conformance: {error}", file=sys.stderr)
    return 2


def _fleet(args) -> int:
    from conformance.tools import fleet

    output = Path(args.output)
    try:
        runs, repeated = fleet.distinct([fleet.load_run(Path(path), _shipped_required_contracts) for path in args.runs])
        for note in repeated:
            print(f"ort-conformance: {note}", file=sys.stderr)
        data, pages = fleet.build(runs, output)
        fleet.write(data, pages, output)
    except fleet.FleetError as exc:
        return _refused(exc)
    eps = sorted({row["ep"] for row in data["rows"]})
    print(f"{output / fleet.JSON_NAME}, {output / fleet.HTML_NAME}: {len(data['rows'])} EP devices of {len(runs)} runs ({', '.join(eps)})")
    return _answers(argparse.Namespace(fleet=str(output / fleet.JSON_NAME), output=args.answers)) if args.answers else 0


def _answers(args) -> int:
    from conformance.tools import answers
    from conformance.tools.fleet_reader import FleetError, load

    try:
        table = load(args.fleet)
    except FleetError as exc:
        return _refused(exc)
    text = answers.render({"rows": table.rows}, Path(table.path), Path(args.output) if args.output else None)
    status = _emit(text, args.output)
    if args.output and status == 0:
        print(f"wrote {args.output}: {len(table.rows)} EP devices of {table.path}")
    return status


def _merge(args) -> int:
    from conformance.tools import merge

    try:
        shards = [merge.load(Path(folder)) for folder in args.shards]
        reasons = merge.refusals(shards)
        if reasons:
            return _refused("not the shards of one run: " + "; ".join(reasons))
        data, files, results = merge.merge(shards, merge.catalogue_of(shards), "ort-conformance merge " + " ".join(args.shards))
        merge.write(data, files, Path(args.output), shards)
    except merge.MergeError as exc:
        return _refused(exc)
    print(f"{args.output}: {len(results)} results of {len(shards)} shards, verdict {data['verdict']}")
    return 0


def _rebuild(args) -> int:
    from conformance.tools.rebuild import rebuild

    return rebuild(Path(args.report_dir))


if __name__ == "__main__":
    sys.exit(main())
