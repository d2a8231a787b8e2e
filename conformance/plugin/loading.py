"""The catalogue as pytest's process holds it: loaded and validated (every spec error in one usage
error, each at its `path:line:column`), indexed by spec file for collection, and the EPs under
test as the catalogue alone describes them (--collect-only), none of them named twice.

Must not know: the run's workers and scheduling, the report.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import pytest

from conformance.errors import SpecError
from conformance.facts import DeviceFacts, EpFacts
from conformance.run.pool import EpUnderTest

if TYPE_CHECKING:
    from conformance.catalogue.contracts import Catalogue, Contract


def load(paths: list[str], *, check_ids: bool = True) -> Catalogue:
    """The catalogue, validated; `check_ids`: also that every contract names a known check
    (which imports the checks, and with them numpy and onnx)."""
    from conformance.checks import CHECKS, load_all
    from conformance.catalogue.spec import collector_paused, load_catalogue
    from conformance.errors import SpecErrors

    if check_ids:
        load_all()
    with collector_paused():
        try:
            catalogue = load_catalogue(paths, known_checks=CHECKS if check_ids else ())
        except SpecErrors as exc:
            raise invalid_specs(exc.errors) from None
        # The catalogue lives until the process ends: frozen out of the cyclic collector before
        # it runs again, its objects are never traversed. Left in, the first allocation after
        # the load made them one young generation and collected it whole, then again as they
        # aged (0.36 s of a 10 000-contract run's start, of 2.3 s of CPU, with the load's own
        # pause already in place: spec.load_catalogue). Collection freezes the items likewise.
        gc.freeze()
    return catalogue


def invalid_specs(errors: Sequence[SpecError]) -> pytest.UsageError:
    return pytest.UsageError(f"invalid spec files ({len(errors)} error{'s' if len(errors) != 1 else ''}):\n" + "\n".join(f"  {e}" for e in errors))


def by_file(catalogue: Catalogue) -> dict[Path, list[Contract]]:
    """The catalogue's spec files, resolved, each with its contracts (a contract's `file` is
    its file resolved; EP declarations are files without contracts): indexed once, so that
    collecting a file does not look through every contract of every other file."""
    files: dict[Path, list[Contract]] = {Path(f).resolve(): [] for f in catalogue.files}
    for contract in catalogue.contracts:
        files.setdefault(Path(contract.file), []).append(contract)
    return files


def unprobed(catalogue: Catalogue, name: str) -> EpUnderTest:
    """EP `name` as the catalogue alone describes it (--collect-only): its provider and label from
    its declaration, or from the name given, and one device."""
    from conformance.testbed.eps import EpTarget

    spec = catalogue.ep_spec(name)
    target = EpTarget(name, spec.provider if spec else name, spec, [], {})
    facts = EpFacts(name, target.provider, target.label, declared=spec is not None, devices=(DeviceFacts(0, target.label),))
    return EpUnderTest(name, facts, None)


def refuse_twice(eps: list[EpUnderTest], ep: EpUnderTest) -> None:
    same = next((other for other in eps if other.facts.provider == ep.facts.provider), None)
    if same:
        raise pytest.UsageError(f"--ep {same.requested} and --ep {ep.requested} name the same EP ({ep.facts.provider}): give it once")
