"""`ort-conformance rebuild`: a run's report set written from its journal (a run killed, or one
whose report could not be written), saying exactly what was written and what was not.

Must not know: pytest, how the checks ran.
"""

from __future__ import annotations

import sys
from pathlib import Path


def rebuild(folder: Path) -> int:
    """The report set of the run in `folder`, rebuilt from its journal; the exit status (2: no
    journal to read, or its spec files changed or cannot be read; 3: a write failed)."""
    from conformance.run import journal, runfolder
    from conformance import report
    from conformance.catalogue.spec import load_catalogue
    from conformance.errors import SpecErrors

    try:
        lock = runfolder.claim(folder) if folder.is_dir() else None  # not while a run writes there
        contents = journal.read(folder)
    except (runfolder.FolderRefused, journal.JournalError) as exc:
        print(f"ort-conformance: {exc}", file=sys.stderr)
        return 2
    try:
        catalogue = load_catalogue(contents.run.get("specs"))
    except SpecErrors as exc:
        print(f"ort-conformance: the run's spec files cannot be read again:\n{exc}", file=sys.stderr)
        return 2
    digest = contents.digest
    if digest and digest != catalogue.digest:
        print(f"ort-conformance: {folder / journal.NAME}: the run's spec files changed since it ran (digest {digest[:12]}, now "
              f"{catalogue.digest[:12]}): its report would describe other contracts", file=sys.stderr)
        return 2
    data = report.build(journal.record(contents, catalogue))
    try:
        return write_rebuilt(folder, contents, data)
    finally:
        if lock:
            lock.close()


def write_rebuilt(folder: Path, contents, data: dict) -> int:
    """The rebuilt report set (with its junit.xml, so that the folder can be bundled) and the
    failing cases' scripts written, saying exactly what was written and what was not."""
    from conformance.run import runfolder
    from conformance import report, safe_io
    from conformance.report import repro_files
    from conformance.tools import rebuilt_junit

    try:
        written = report.write_all(data, folder, {"junit.xml": rebuilt_junit.render(data)})
    except safe_io.UnsafeFile as exc:
        print(f"ort-conformance: the report was not written: {exc}", file=sys.stderr)
        return 3
    runfolder.mark_finished(folder)
    notes = ["the last line, cut short when the run was killed, was left out"] if contents.cut_short else []
    if contents.duplicates:
        cases = sorted(set(contents.duplicates))
        notes.append(f"{len(contents.duplicates)} result lines written again were counted once: {', '.join(cases[:5])}"
                     + (f" and {len(cases) - 5} more" if len(cases) > 5 else ""))
    print(f"{len(contents.results)} results of a run that {'finished' if contents.finished else 'did not finish (interrupted)'}, "
          f"verdict {data['verdict']}: " + ", ".join(str(p) for p in written))
    for note in notes:
        print(f"note: {note}")
    try:
        repro_files.write(data, folder)
    except safe_io.UnsafeFile as exc:
        print(f"ort-conformance: the reproducers (repro/) were not written: {exc}; the report was: "
              f"{', '.join(p.name for p in written)}", file=sys.stderr)
        return 3
    return 0
