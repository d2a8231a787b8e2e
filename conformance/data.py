"""Where the shipped specs and model recipes are.

In the source tree they sit at the top (`specs/`, `models/`), where vendors and reviewers look
for them; an installed wheel carries them inside the package (see pyproject.toml's
package-dir mapping). Both layouts are found from this file's location.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parent


def _first_existing(*candidates: Path) -> Path:
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"none of {', '.join(map(str, candidates))} exists; the installation is incomplete")


def contracts_dir() -> Path:
    return _first_existing(_PACKAGE / "specs" / "contracts", _PACKAGE.parent / "specs" / "contracts")


def eps_dir() -> Path:
    return _first_existing(_PACKAGE / "specs" / "eps", _PACKAGE.parent / "specs" / "eps")


def shipped_spec_dirs() -> list[Path]:
    """The catalogue and EP declarations that ship inside the package."""
    return [contracts_dir(), eps_dir()]


def recipes_file() -> Path:
    return _first_existing(_PACKAGE / "recipes", _PACKAGE.parent / "models") / "recipes.yaml"


def read_recipes(path: Path | None = None) -> dict[str, Any]:
    """The recipes file as parsed, not yet made into recipes (`models.recipes_from`): the pytest
    process, which never imports numpy, reads it to hand to its workers with the catalogue."""
    import yaml

    # libyaml's loader where PyYAML has it, as for the catalogue.
    return yaml.load((path or recipes_file()).read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def known_issues_file() -> Path:
    """The kit's own table of onnxruntime defects, beside the catalogue that it annotates."""
    return _PACKAGE / "catalogue" / "known_issues.yaml"


def upstream_invariants_file() -> Path:
    """onnxruntime's own EP conformance invariants, mapped onto the catalogue's contracts."""
    return _PACKAGE / "catalogue" / "upstream_invariants.yaml"


def schemas_dir() -> Path:
    return _PACKAGE / "schemas"
