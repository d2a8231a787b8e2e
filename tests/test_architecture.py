"""The package's shape, held by tests: no import cycle among the kit's modules (imports kept inside
functions for start-up speed count as much as those at the top), and no class longer than a reader
can hold in mind. See docs/architecture.md for the layers these keep."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "conformance"
MAX_CLASS_LINES = 150
MAX_MODULE_LINES = 500
# Generated, not written: the slot table is made from onnxruntime's C API header (see its docstring).
GENERATED = {"conformance.testbed.interop.slots"}


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the kit's modules it imports anywhere in its body: inside functions too (they run
    all the same), and under `if TYPE_CHECKING:` too (a type named from a floor above is a
    dependency on it, whether or not it loads). `from a import b` names the module `a.b` where
    that is a module, else `a`; relative imports are resolved."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in modules)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    if f"{source}.{alias.name}" in modules:
                        edges.add(f"{source}.{alias.name}")
                    elif source in modules:
                        edges.add(source)
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_kits_modules_import_one_another_without_a_cycle():
    cycle = find_cycle(import_graph(_modules()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_sees_a_cycle_through_an_import_inside_a_function(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def late():\n    from . import a\n")
    modules = {"pkg": package / "__init__.py", "pkg.a": package / "a.py", "pkg.b": package / "b.py"}
    assert find_cycle(import_graph(modules)) == ["pkg.a", "pkg.b", "pkg.a"]


def test_the_cycle_finder_counts_an_import_made_for_the_type_checker_alone(tmp_path):
    """A scheduler naming the plugin's item class under `if TYPE_CHECKING:` loads nothing, but
    depends on the plugin all the same: it is a circle."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    modules = {"pkg": package / "__init__.py", "pkg.a": package / "a.py", "pkg.b": package / "b.py"}
    assert find_cycle(import_graph(modules)) == ["pkg.a", "pkg.b", "pkg.a"]


def _classes() -> list[tuple[str, str, int]]:
    found = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                found.append((name, node.name, node.end_lineno - node.lineno + 1))
    return found


def test_no_module_of_the_kit_is_longer_than_a_reader_can_hold():
    long = {name: lines for name, path in _modules().items()
            if name not in GENERATED and (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them along their concerns): {long}"


def test_no_class_of_the_kit_is_longer_than_a_reader_can_hold():
    long = [f"{module}.{cls}: {lines} lines" for module, cls, lines in _classes() if lines > MAX_CLASS_LINES]
    assert not long, f"classes over {MAX_CLASS_LINES} lines: " + ", ".join(long)


# The floors, from the bottom up: a module imports from its own floor and those below, never from
# one above (docs/architecture.md). The root's leaves are the floor every other may use; the
# package itself, cli.py and the worker's public path are the entries, above everything.
FLOORS = ["leaves", "catalogue", "testbed", "checks", "engine", "isolation", "rules", "run", "report", "plugin", "tools", "entries"]
ENTRIES = {"conformance", "conformance.cli", "conformance.worker", "conformance.fleet"}


def floor_of(module: str) -> str:
    if module in ENTRIES:
        return "entries"
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in FLOORS) else "leaves"


def test_every_module_is_on_a_floor_and_the_root_holds_few():
    modules = _modules()
    assert {floor_of(name) for name in modules} <= set(FLOORS)
    # 17: the leaves every floor shares, what a check can prove (`proofs`) the latest of them.
    assert len([path for name, path in modules.items() if path.parent == PACKAGE and path.name != "__init__.py"]) <= 17


def test_no_module_imports_from_a_floor_above_its_own():
    graph = import_graph(_modules())
    upward = sorted(f"{name} -> {target}" for name, targets in graph.items() for target in targets
                    if FLOORS.index(floor_of(target)) > FLOORS.index(floor_of(name)))
    assert not upward


def test_the_floor_rule_sees_an_import_from_above():
    assert FLOORS.index(floor_of("conformance.plugin.hooks")) > FLOORS.index(floor_of("conformance.report.markdown"))
    assert floor_of("conformance.findings") == "leaves" and floor_of("conformance.cli") == "entries"


def test_the_leaf_modules_import_only_leaves():
    graph = import_graph(_modules())
    leaves = [name for name in graph if floor_of(name) == "leaves"]
    assert {name: sorted(t for t in graph[name] if floor_of(t) != "leaves") for name in leaves if any(floor_of(t) != "leaves" for t in graph[name])} == {}


def imported(path: Path) -> set[str]:
    """The modules `path` imports, at its top or inside functions: `from conformance.report
    import x` counts as importing conformance.report itself."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", ["markdown", "html", "common", "throughput", "page", "summary", "curve"])
def test_the_reports_renderers_and_helpers_do_not_import_the_report_package(module):
    """report/__init__ builds and writes the report with its renderers: they import only its
    leaves (common, throughput), never it, so there is no cycle."""
    assert "conformance.report" not in imported(PACKAGE / "report" / f"{module}.py")


def test_the_report_and_the_run_record_know_nothing_of_pytest_or_the_plugin():
    for path in [PACKAGE / "record.py", *sorted((PACKAGE / "report").glob("*.py"))]:
        assert not [name for name in imported(path) if name == "pytest" or name.startswith(("conformance.plugin", "conformance.run"))], path


def test_no_test_module_imports_another():
    """Tests share what they share through conftest.py's fixtures and helper modules that are not
    test modules (pytest_runs, headless): a test module imported by another runs its module-level
    code twice and drags its fixtures along."""
    tests = Path(__file__).resolve().parent
    names = {path.stem for path in tests.glob("test_*.py")}
    offenders = {path.name: sorted(imported(path) & names) for path in sorted(tests.glob("test_*.py")) if imported(path) & names}
    assert not offenders, offenders


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The kit's modules that importing `start` may load: its imports, theirs, and so on."""
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_only_the_plugin_and_its_hookspecs_import_pytest():
    """Everything else is a library that a worker, the cli or a vendor's script loads without pytest
    (selection.py's SelectionWatch is a plugin of its own beside the run, watching deselection, and
    junit_files.py's JunitFiles another, beside pytest's JUnit writers)."""
    importing = {name for name, path in _modules().items() if {"pytest", "_pytest"} & imported(path)}
    assert importing and all(floor_of(name) == "plugin" for name in importing), importing


# The worker's side (the checks, their context, the runner, the matrix) and what it must never load
# of the parent's: the process side that starts it, the plugin, the verdict rules and the reports.
WORKER_SIDE = ("engine", "checks")
PARENT_SIDE = ("isolation", "run", "rules", "report", "plugin", "tools", "entries")


def test_the_worker_side_loads_nothing_of_the_parents():
    graph = import_graph(_modules())
    parents = {name for name in graph if floor_of(name) in PARENT_SIDE} | {"conformance.record"}
    crossing = {name: sorted(reachable(graph, name) & parents) for name in graph if floor_of(name) in WORKER_SIDE}
    assert not {name: parents for name, parents in crossing.items() if parents}


def test_spec_loading_and_the_contracts_reach_no_module_that_imports_onnxruntime():
    modules = _modules()
    graph = import_graph(modules)
    with_ort = {name for name, path in modules.items() if {"onnxruntime", "onnx"} & imported(path)}
    for name in ("conformance.catalogue.spec", "conformance.catalogue.contracts", "conformance.catalogue.markdown"):
        assert not ({name} | reachable(graph, name)) & with_ort, name


# The process side runs workers and attributes their losses: it handles requests and replies as
# data and names a check only by its id, so it never loads a check, its context or a report.
def test_the_process_side_knows_no_check_and_no_report():
    graph = import_graph(_modules())
    inner = ("conformance.checks", "conformance.engine.runner", "conformance.report", "conformance.engine.serve")
    crossing = {name: sorted(m for m in reachable(graph, name) if m in inner or m.startswith(tuple(f"{i}." for i in inner)))
                for name in graph if floor_of(name) in ("isolation", "run")}
    assert not {name: found for name, found in crossing.items() if found}


def test_every_package_of_the_kit_is_installed():
    """pyproject.toml lists the packages a wheel or a plain `pip install .` carries: a subpackage
    left off works in a checkout (and an editable install) and is missing everywhere else."""
    tomllib = pytest.importorskip("tomllib")
    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    packages = {".".join(path.parent.relative_to(PACKAGE.parent).parts) for path in PACKAGE.rglob("__init__.py")}
    assert packages - listed == set()


def _families_registered() -> dict[str, set[str]]:
    """Each module of checks/ -> the contract families whose checks it registers (`@check("copy.x")`
    registers one of family copy); a helper module of a family registers none."""
    found = {}
    for name, path in _modules().items():
        if path.parent == PACKAGE / "checks" and path.name not in ("__init__.py", "registry.py"):
            found[name] = {m.split(".")[0] for m in re.findall(r'@check\("([^"]+)"', path.read_text(encoding="utf-8"))}
    return found


def test_no_check_family_borrows_from_another():
    """What families share lives in checks/context/ (reference values, the bad requests and the
    valid request beside each), not in another family's module: a module registering checks of
    some families imports no module registering checks of another."""
    graph, families = import_graph(_modules()), _families_registered()
    borrowed = {name: sorted(target for target in graph[name] if families.get(target) and not families[target] <= families[name])
                for name in families if families[name]}
    assert len([name for name in families if families[name]]) > 10 and not {name: b for name, b in borrowed.items() if b}
