"""The package's layers hold by structure: no class over 150 lines, and no import cycle among the
modules of the checks side (imports inside functions count, since they run all the same)."""

from __future__ import annotations

import ast
from pathlib import Path

import conformance

PACKAGE = Path(conformance.__file__).parent
MAX_CLASS_LINES = 150
# Being split on other branches of the same change; the merge empties this.
SPLIT_ELSEWHERE = {"isolation.py::Worker", "plugin.py::ConformanceRun"}
# The checks side: the registry and checks, what they work with, and what decides about a result.
CHECKS_SIDE = ("checks", "context", "runner", "eps", "applicability", "contracts", "outcomes", "waivers", "strict", "spec",
               "apis", "calls", "findings", "tensors", "models")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def classes_over(limit: int) -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > limit:
                found.append(f"{path.relative_to(PACKAGE).as_posix()}::{node.name}")
    return found


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The kit's modules `path` imports, anywhere in it; `from conformance import x` counts as
    importing module x where x is one."""
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets.add(node.module)
            targets.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {t for t in targets if t in known}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state = [], {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                found.append(trail[trail.index(target):] + [target])
            elif target not in state:
                visit(target, trail + [target])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def checks_side_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    mine = {name: path for name, path in paths.items() if name.split(".")[1:2] and name.split(".")[1] in CHECKS_SIDE}
    return {name: imports_of(path, set(mine)) - {name} for name, path in mine.items()}


def test_no_class_is_over_150_lines():
    assert sorted(set(classes_over(MAX_CLASS_LINES)) - SPLIT_ELSEWHERE) == []


def test_the_checks_side_has_no_import_cycle():
    assert cycles(checks_side_graph()) == []


def test_the_cycle_finder_finds_an_import_inside_a_function(tmp_path):
    graph = {"conformance.checks": {"conformance.checks.copy"}, "conformance.checks.copy": {"conformance.checks"}}
    assert cycles(graph) == [["conformance.checks", "conformance.checks.copy", "conformance.checks"]]
    (tmp_path / "m.py").write_text("def f():\n    from conformance.checks import load_all\n", encoding="utf-8")
    assert imports_of(tmp_path / "m.py", {"conformance.checks"}) == {"conformance.checks"}
