"""Import circles among `ablations/`, `tasks/` and `flows/`, found by parsing (nothing imported).

A circle at module level breaks an import outright; one closed by a deferred import (inside a
function) works, but means the two concepts are not layered: each knows the other. Imports
under `if TYPE_CHECKING:` are for annotations only and do not count.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.import_graph import OrderReport, check_order, edges

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


Reader = Callable[[ast.Module], list[ast.Import | ast.ImportFrom]]


def import_graph(*, deferred: bool, reader: Reader | None = None) -> dict[str, set[str]]:
    """Each project module and the project modules it imports (with their packages); `reader`
    picks a module's imports (by default `_imports`, which leaves out type-only ones)."""
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        tree = ast.parse(path.read_text(), str(path))
        nodes = reader(tree) if reader else _imports(tree, deferred=deferred)
        for node in nodes:
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


# -- the package order ------------------------------------------------------------------------

LAYERS: tuple[tuple[str, ...], ...] = (
    # the bottom: the exception tree, the output folder's names and writer, how a process ends;
    # nothing of the project but each other
    ("ablations", "ablations.errors", "ablations.files", "ablations.process"),
    # what the campaign refuses or hides; how numbers print and the progress channel
    ("ablations.security", "ablations.text"),
    ("ablations.plan",),
    # what one run is, and the slots a machine offers
    ("ablations.run", "ablations.slots"),
    ("ablations.analysis", "ablations.checkpoint", "ablations.workloads"),
    ("ablations.training",),
    # what a worker process runs besides a built-in run: an external workload, the preflight
    ("ablations.byo", "ablations.preflight"),
    # the worker process per slot and its jobs; a work pool's hosts
    ("ablations.workers", "ablations.pool"),
    ("ablations.probe",),
    ("ablations.budget",),
    # the campaign, its folder, state, steps, gate, looks, manifest model and progress lines
    ("ablations.campaign",),
    ("ablations.report",),
    ("ablations.results",),
    ("ablations.verify",),
    # this machine's executor: it hands the results step to its first worker
    ("ablations.local",),
    # the commands; the shipped plans and example scripts (nothing imports them)
    ("ablations.cli", "ablations.recipes"),
    ("tasks",),
    ("flows",),
)
"""The package order, lowest first (ARCHITECTURE.md): a module imports only from its own layer
or those below, type-only and deferred imports included. A module takes the layer of the
longest name listed that contains it (`ablations.slots.devices` sits below `ablations.slots`)."""

ORDER_EXCEPTIONS: dict[tuple[str, str], str] = {}
"""Imports against the order that remain, each with why; the list may only shrink."""


def layer_of(module: str) -> int:
    """The index in `LAYERS` of the longest listed name that is the module or contains it."""
    best, found = -1, -1
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(f"{name}.")) and len(name) > best:
                best, found = len(name), index
    assert found >= 0, f"{module} is in no layer of LAYERS: add it"
    return found


def against_the_order(graph: dict[str, set[str]]) -> list[str]:
    """Each import from a lower layer to a higher one, as 'importer -> imported'. A package
    whose `__init__` imports nothing of the project counts for nothing: importing
    `ablations.campaign.manifest` runs `ablations/results/__init__.py`, which brings in no layer."""

    def empty_package(target: str, targets: set[str]) -> bool:
        return not graph.get(target) and any(t.startswith(f"{target}.") for t in targets)

    return [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
        and (module, target) not in ORDER_EXCEPTIONS
        and not empty_package(target, targets)
    ]


def _all_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


def test_the_order_finder_names_both_modules() -> None:
    graph = {"ablations.plan.model": {"ablations.campaign.gate"}, "ablations.campaign.gate": set()}
    assert against_the_order(graph) == ["ablations.plan.model -> ablations.campaign.gate"]


def test_every_import_follows_the_package_order() -> None:
    """Type-only imports count too: an annotation naming a higher layer's type is a dependency
    a reader must follow, and the first step of a circle."""
    graph = import_graph(deferred=True, reader=_all_imports)
    assert against_the_order(graph) == []


def test_the_exceptions_are_still_needed() -> None:
    graph = import_graph(deferred=True, reader=_all_imports)
    imports = {(module, target) for module, targets in graph.items() for target in targets}
    assert sorted(set(ORDER_EXCEPTIONS) - imports) == []


def test_the_names_import_nothing_of_the_project() -> None:
    graph = import_graph(deferred=True, reader=_all_imports)
    assert graph["ablations.files.names"] == set()
    assert graph["ablations.files.atomic"] == set()


# -- the strict order (#37): every kind of dependency, at package level ------------------------
#
# `tests/import_graph.py` reads relative imports, type-only ones and modules named by string,
# and sees each package as one unit on one layer: `LAYERS` may name only units (a subpackage of
# `ablations`, a module loose at its root, `tasks`, `flows`), and a unit it does not name fails
# (the root package no longer takes in whatever is new). `python -m tests.package_loops` prints
# what these tests find. Today's tree fails them: the moves of #37 make them pass, after the
# branches of #34-#36 merge; until then they are expected to fail, strictly (a test that starts
# passing fails, and its marker goes).

STRICT = pytest.mark.xfail(
    strict=True,
    raises=AssertionError,  # only the findings are expected: a finder that crashes fails
    reason="#37: folders are not layers yet (python -m tests.package_loops; plan in 37-plan.md)",
)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def _pkg(root: Path, files: dict[str, str], layers: tuple[tuple[str, ...], ...]) -> OrderReport:
    base = {"pkg/__init__.py": "", "pkg/a/__init__.py": "", "pkg/b/__init__.py": ""}
    return check_order(_tree(root, base | files), layers, packages=("pkg",), split=("pkg",))


_AB = (("pkg",), ("pkg.a",), ("pkg.b",))
_TYPE_ONLY = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import {}\n"


def test_relative_type_only_deferred_and_string_imports_are_all_read(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a/__init__.py": "",
            "pkg/a/x.py": """
                from typing import TYPE_CHECKING
                from . import z
                from ..b.y import thing
                if TYPE_CHECKING:
                    from pkg.b import w
                def later():
                    from ..b import v
                    return import_module("pkg.b.u")
                DEFAULT = "pkg.b.t:Maker"
                "pkg.b.s"
                \"\"\"A docstring naming pkg.b.s is no import.\"\"\"
            """,
            "pkg/a/z.py": "",
            **{f"pkg/b/{name}.py": "" for name in ("y", "w", "v", "u", "t", "s")},
        },
    )
    found = {
        (e.imported, e.kind, e.line)
        for e in edges(root, ("pkg",))
        if e.importer == "pkg.a.x" and not e.implied
    }
    assert found == {
        ("pkg.a.z", "top", 3),
        ("pkg.b.y", "top", 4),
        ("pkg.b.w", "type", 6),
        ("pkg.b.v", "deferred", 8),
        ("pkg.b.u", "string", 9),
        ("pkg.b.t", "entry", 10),
    }


def test_a_package_loop_is_found_with_the_edge_that_closes_it(tmp_path: Path) -> None:
    """`a` imports `b`, and `b` names a type of `a`: no module circle (x -> y -> z), but the
    two packages know each other; the type-only import goes up the order and closes it."""
    b_below_a = (("pkg",), ("pkg.b",), ("pkg.a",))
    report = _pkg(
        tmp_path,
        {
            "pkg/a/x.py": "from pkg.b.y import thing\n",
            "pkg/a/z.py": "",
            "pkg/b/y.py": _TYPE_ONLY.format("pkg.a.z"),
        },
        b_below_a,
    )
    assert report.module_circles == ()
    assert [loop.members for loop in report.loops] == [("pkg.a", "pkg.b")]
    [(pair, path, found)] = report.loops[0].closing
    assert (pair, path) == (("pkg.b", "pkg.a"), ("pkg.a", "pkg.b"))
    assert [(e.importer, e.imported, e.kind) for e in found if not e.implied] == [
        ("pkg.b.y", "pkg.a.z", "type")
    ]
    assert [pair for pair, _ in report.upward] == [("pkg.b", "pkg.a")]
    flipped = _pkg(tmp_path, {}, _AB)  # a below b: now the plain import goes up
    assert [pair for pair, _ in flipped.upward] == [("pkg.a", "pkg.b")]
    assert [c[0] for c in flipped.loops[0].closing] == [("pkg.a", "pkg.b")]


def test_a_module_circle_counts_type_only_imports(tmp_path: Path) -> None:
    report = _pkg(
        tmp_path,
        {
            "pkg/a/x.py": "import pkg.a.z\n",
            "pkg/a/z.py": _TYPE_ONLY.format("pkg.a.x"),
        },
        _AB,
    )
    assert [circle for circle, _ in report.module_circles] == [("pkg.a.x", "pkg.a.z")]
    assert not report.clean


def test_a_new_module_and_a_submodule_in_the_layers_fail(tmp_path: Path) -> None:
    """The root package's layer takes in nothing new, and a layer names whole packages."""
    report = _pkg(tmp_path, {"pkg/new.py": "", "pkg/a/x.py": ""}, (*_AB, ("pkg.a.x",)))
    assert report.unlisted == ("pkg.new",)
    assert report.not_units == ("pkg.a.x",)
    assert not report.clean
    assert _pkg(tmp_path / "clean", {"pkg/b/x.py": "import pkg.a\n"}, _AB).clean


def test_an_entry_name_must_resolve(tmp_path: Path) -> None:
    files = {"pkg/a/x.py": 'ENTRY = "pkg.b.y:Maker"\n', "pkg/b/y.py": "class Other: ...\n"}
    report = _pkg(tmp_path, files, _AB)
    assert [(e.importer, e.imported) for e in report.missing_entries] == [("pkg.a.x", "pkg.b.y")]


def _strict() -> OrderReport:
    return check_order(ROOT, LAYERS)


@STRICT
def test_strict_no_package_loop() -> None:
    assert [loop.members for loop in _strict().loops] == []


@STRICT
def test_strict_every_dependency_follows_the_package_order() -> None:
    assert [pair for pair, _ in _strict().upward] == []


def test_strict_every_package_has_a_layer() -> None:
    assert _strict().unlisted == ()


def test_strict_the_layers_name_whole_packages() -> None:
    assert _strict().not_units == ()


@STRICT
def test_strict_no_module_circle_type_only_and_string_imports_included() -> None:
    assert [circle for circle, _ in _strict().module_circles] == []


def test_every_entry_name_resolves() -> None:
    """A `module:attr` the code names (a plan's default `workload.entry`, an adapter's) names
    a module and attribute that exist: a move cannot break one silently."""
    assert _strict().missing_entries == ()
