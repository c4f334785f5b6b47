"""Import circles among `ablations/`, `tasks/` and `flows/`, found by parsing (nothing imported).

A circle at module level breaks an import outright; one closed by a deferred import (inside a
function) works, but means the two concepts are not layered: each knows the other. Imports
under `if TYPE_CHECKING:` are for annotations only and do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("ablations", "tasks", "flows")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imports(tree: ast.Module, *, deferred: bool) -> list[ast.Import | ast.ImportFrom]:
    """The module's imports: its top level only, or (`deferred`) those in functions too."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            elif deferred or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.stmt):
                        visit([child])
                    elif isinstance(child, ast.ExceptHandler):
                        visit(child.body)

    visit(tree.body)
    return found


def import_graph(*, deferred: bool) -> dict[str, set[str]]:
    """Each project module and the project modules it imports (with their packages)."""
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path)), deferred=deferred):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif node.level == 0 and node.module:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                names = []
            for imported in names:
                target = known(imported)
                while target:  # importing a module runs its packages' __init__ first
                    if not name.startswith(f"{target}."):  # its own packages run already
                        targets.add(target)
                    target = target.rpartition(".")[0] or None
                    target = known(target) if target else None
        targets.discard(name)
        graph[name] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [{"a", "b", "c"}]


def test_no_circle_at_module_level() -> None:
    assert circles(import_graph(deferred=False)) == []


def test_no_circle_through_deferred_imports() -> None:
    assert circles(import_graph(deferred=True)) == []


def _external_imports(path: Path) -> set[str]:
    """Every top-level package a module imports, in functions too."""
    found = set()
    for node in _imports(ast.parse(path.read_text(), str(path)), deferred=True):
        if isinstance(node, ast.Import):
            found |= {alias.name.partition(".")[0] for alias in node.names}
        elif node.level == 0 and node.module:
            found.add(node.module.partition(".")[0])
    return found


def test_the_domain_never_imports_prefect_or_the_flows() -> None:
    """`ablations/` runs without Prefect: the work pool's client side and `ablate run` live in
    `flows/`; tasks wrap domain calls and never reach back into the flows."""
    offending = {
        str(path.relative_to(ROOT)): sorted(_external_imports(path) & {"prefect", "flows"})
        for path in sorted((ROOT / "ablations").rglob("*.py"))
    }
    assert {k: v for k, v in offending.items() if v} == {}
    tasks = {p.name: "flows" in _external_imports(p) for p in (ROOT / "tasks").glob("*.py")}
    assert not any(tasks.values())
