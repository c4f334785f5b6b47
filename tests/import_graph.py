"""Every dependency among the project's modules, read from the source (nothing is imported).

`tests/test_import_cycles.py`'s strict order tests and `python -m tests.package_loops` read the
tree through this module. An edge is counted however it is written:

- `import a.b` and `from a.b import c`, at module level (`top`), inside a function
  (`deferred`), or under `if TYPE_CHECKING:` (`type`): an annotation naming a type of another
  package is a dependency a reader follows, and the first step of a circle;
- relative imports (`from .x import y`, `from .. import z`), resolved against the importer;
- a string literal that is exactly a project module's name (`string`): what `import_module`,
  a fork server's preload or `python -m` loads; it breaks as silently as an import when the
  module moves. A docstring (any bare string statement) never counts;
- a string `module:attr` naming a project module (`entry`): the form a plan's
  `workload.entry` takes, a public name users write in their YAML. It is not layered (the plan
  names built-in workloads that sit far above it) but must name a module and attribute that
  exist (`missing_entries`), so that a move cannot break one silently.

Importing a module runs its packages' `__init__` first: an edge to `a.b.c` is also one to
`a.b` and `a` (unless the importer lies inside them).

At package level, a *unit* is what sits on one layer: for a package split into units
(`ablations`) each first-level subpackage (`ablations.campaign`, with everything below it) and
each module loose at its root (`ablations.run.records`); `ablations` itself is only its
`__init__`. Every other top-level package (`tasks`, `flows`) is one unit.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["top", "deferred", "type", "string", "entry"]

PACKAGES = ("ablations", "tasks", "flows")
"""The product's top-level packages (`tests/` and `bench/` are not layered)."""
SPLIT = ("ablations",)
"""Top-level packages whose subpackages and loose modules are units of their own."""

_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
_ENTRY_NAME = re.compile(r"(?P<module>[A-Za-z_]\w*(\.[A-Za-z_]\w*)*):(?P<attr>[A-Za-z_]\w*)")


@dataclass(frozen=True, order=True)
class Edge:
    """One module depending on another, where the source says so."""

    importer: str
    imported: str
    kind: Kind
    path: str
    """The importer's file, relative to the root."""
    line: int
    implied: bool = False
    """An edge to a package above the named module (its `__init__` runs first)."""

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path, packages: Sequence[str] = PACKAGES) -> dict[str, Path]:
    """Every module of `packages` under `root`, by dotted name."""
    return {
        module_name(root, path): path
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str | None:
    """The module a `from ... import` names, relative ones resolved against `module`."""
    if node.level == 0:
        return node.module
    base = module.split(".") if _is_package(path) else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    if not base:
        return None  # above the top-level package: Python refuses it too
    return ".".join([*base, node.module] if node.module else base)


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, Kind]]:
    """Each import statement of the module with how it is reached: at import (`top`), once a
    function runs (`deferred`), or by the type checker only (`type`)."""

    def visit(node: ast.AST, kind: Kind) -> Iterator[tuple[ast.Import | ast.ImportFrom, Kind]]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, kind
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from visit(child, "type")
            for child in node.orelse:
                yield from visit(child, kind)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            kind = "type" if kind == "type" else "deferred"
        for child in ast.iter_child_nodes(node):
            yield from visit(child, kind)

    yield from visit(tree, "top")


def _strings(tree: ast.Module) -> Iterator[ast.Constant]:
    """Every string literal that is not a statement of its own (docstrings, including the
    attribute docstrings under pydantic fields, are such statements)."""
    bare = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare:
            yield node


def _containing(name: str, known: Iterable[str]) -> str | None:
    """The longest module of `known` that is `name` or a package above it."""
    found = set(known)
    while name and name not in found:
        name = name.rpartition(".")[0]
    return name or None


def _edges_to(
    importer: str, name: str, kind: Kind, where: str, line: int, found: dict[str, Path]
) -> Iterator[Edge]:
    """The edges of importing `name`: to the module it names, and, since importing a module
    runs its packages' `__init__` first, to each package above it (`implied`), those of the
    importer itself left out (they run already)."""
    target, implied = _containing(name, found), False
    while target:
        if target != importer and not importer.startswith(f"{target}."):
            yield Edge(importer, target, kind, where, line, implied)
        parent, implied = target.rpartition(".")[0], True
        target = _containing(parent, found) if parent else None


def edges(root: Path, packages: Sequence[str] = PACKAGES) -> list[Edge]:
    """Every dependency of every module on another module of the project, with its kind and
    where it is written. An import of a package's attribute that is a module
    (`from ablations import names`) is an edge to that module."""
    found = modules(root, packages)
    result: set[Edge] = set()
    for importer, path in found.items():
        where = str(path.relative_to(root))
        tree = ast.parse(path.read_text(), str(path))
        named: list[tuple[str, Kind, int]] = []
        for node, kind in _imports(tree):
            if isinstance(node, ast.Import):
                named += [(alias.name, kind, node.lineno) for alias in node.names]
                continue
            base = _absolute(importer, path, node)
            if base is not None:
                named += [
                    (f"{base}.{alias.name}" if alias.name != "*" else base, kind, node.lineno)
                    for alias in node.names
                ]
        for constant in _strings(tree):
            text = constant.value
            entry = _ENTRY_NAME.fullmatch(text)
            if _MODULE_NAME.fullmatch(text) and text in found:
                named.append((text, "string", constant.lineno))
            elif entry and entry["module"] in found:
                named.append((entry["module"], "entry", constant.lineno))
        for name, kind, line in named:
            result.update(_edges_to(importer, name, kind, where, line, found))
    return sorted(result)


def module_graph(all_edges: Iterable[Edge], *, kinds: Iterable[Kind]) -> dict[str, set[str]]:
    """Module -> the modules it depends on, by the edges of `kinds`."""
    wanted = set(kinds)
    graph: dict[str, set[str]] = defaultdict(set)
    for edge in all_edges:
        graph.setdefault(edge.imported, set())
        graph.setdefault(edge.importer, set())
        if edge.kind in wanted:
            graph[edge.importer].add(edge.imported)
    return dict(graph)


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one node (Tarjan's algorithm; recursive:
    the graphs are a few hundred nodes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups, key=lambda group: sorted(group))


def shortest_path(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """The shortest path from `start` to `goal` (both included), or None."""
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = [node]
            while (step := previous[path[-1]]) is not None:
                path.append(step)
            return path[::-1]
        for target in sorted(graph.get(node, ())):
            if target not in previous:
                previous[target] = node
                queue.append(target)
    return None


# -- units: what sits on one layer ------------------------------------------------------------


def unit_of(module: str, split: Sequence[str] = SPLIT) -> str:
    """The unit a module belongs to: its first-level subpackage or its own name where its
    top-level package is split into units, else its top-level package."""
    parts = module.split(".")
    if parts[0] in split:
        return ".".join(parts[:2])
    return parts[0]


def units(root: Path, packages: Sequence[str] = PACKAGES, split: Sequence[str] = SPLIT) -> set[str]:
    return {unit_of(name, split) for name in modules(root, packages)}


def unit_edges(
    all_edges: Iterable[Edge], split: Sequence[str] = SPLIT, *, layered: bool = True
) -> dict[tuple[str, str], list[Edge]]:
    """(importer's unit, imported unit) -> the module edges that make it. With `layered`,
    entry names (`module:attr`) are left out: they are public names, not imports."""
    found: dict[tuple[str, str], list[Edge]] = defaultdict(list)
    for edge in all_edges:
        if layered and edge.kind == "entry":
            continue
        pair = (unit_of(edge.importer, split), unit_of(edge.imported, split))
        if pair[0] != pair[1]:
            found[pair].append(edge)
    return dict(found)


def unit_graph(pairs: dict[tuple[str, str], list[Edge]]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for importer, imported in pairs:
        graph[importer].add(imported)
        graph.setdefault(imported, set())
    return dict(graph)


# -- the order ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Loop:
    """A group of units that depend on each other, and the edges that close it: those going
    up the order (or, on one layer, every edge of the group)."""

    members: tuple[str, ...]
    closing: tuple[tuple[tuple[str, str], tuple[str, ...], tuple[Edge, ...]], ...]
    """Per closing unit edge: the pair, the loop it closes (a path back), its module edges."""


@dataclass(frozen=True)
class OrderReport:
    """What the strict order test finds."""

    unlisted: tuple[str, ...]
    """Units of the tree that no layer names."""
    not_units: tuple[str, ...]
    """Names in the layers that are no unit: a module inside a package (a package sits on one
    layer), or a name that no longer exists."""
    upward: tuple[tuple[tuple[str, str], tuple[Edge, ...]], ...]
    """Unit edges from a lower layer to a higher one, with their module edges."""
    loops: tuple[Loop, ...]
    """Groups of units depending on each other (the edges of every kind but `entry`)."""
    module_circles: tuple[tuple[tuple[str, ...], tuple[Edge, ...]], ...]
    """Groups of modules depending on each other, type-only and string imports included, each
    with its edges of those two kinds (what a check of imports alone does not see)."""
    missing_entries: tuple[Edge, ...]
    """Entry names whose module lacks the attribute."""

    @property
    def clean(self) -> bool:
        return not (
            self.unlisted
            or self.not_units
            or self.upward
            or self.loops
            or self.module_circles
            or self.missing_entries
        )


def layer_index(layers: Sequence[Sequence[str]]) -> dict[str, int]:
    return {name: index for index, names in enumerate(layers) for name in names}


def top_level_names(path: Path) -> set[str]:
    """What a module defines or imports at its top level (what `module:attr` may name)."""
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names |= {(alias.asname or alias.name).partition(".")[0] for alias in node.names}
    return names


def missing_entries(root: Path, all_edges: Iterable[Edge], packages: Sequence[str]) -> list[Edge]:
    """The `entry` edges whose `module:attr` names an attribute the module does not define."""
    found = modules(root, packages)
    missing = []
    for edge in all_edges:
        if edge.kind != "entry":
            continue
        path = root / edge.path
        for constant in _strings(ast.parse(path.read_text(), str(path))):
            match = _ENTRY_NAME.fullmatch(constant.value)
            if (
                constant.lineno == edge.line
                and match
                and match["module"] == edge.imported
                and match["attr"] not in top_level_names(found[edge.imported])
            ):
                missing.append(edge)
    return missing


def check_order(
    root: Path,
    layers: Sequence[Sequence[str]],
    packages: Sequence[str] = PACKAGES,
    split: Sequence[str] = SPLIT,
) -> OrderReport:
    """The tree under `root` against `layers` (lowest first), every kind of edge counted."""
    all_edges = edges(root, packages)
    known = units(root, packages, split)
    listed = layer_index(layers)
    pairs = unit_edges(all_edges, split)
    graph = unit_graph(pairs)

    def up(pair: tuple[str, str]) -> bool:
        low, high = listed.get(pair[0]), listed.get(pair[1])
        return low is not None and high is not None and high > low

    loops = []
    for group in strongly_connected(graph):
        inside = {pair: pair_edges for pair, pair_edges in pairs.items() if set(pair) <= group}
        # What closes the loop: the edges up the order; a loop on one layer (or among
        # unlisted units) has none, and then every edge of it is shown.
        closing = [pair for pair in inside if up(pair)] or list(inside)
        sub = {node: graph[node] & group for node in group}
        loops.append(
            Loop(
                members=tuple(sorted(group)),
                closing=tuple(
                    (pair, tuple(shortest_path(sub, pair[1], pair[0]) or ()), tuple(inside[pair]))
                    for pair in sorted(closing)
                ),
            )
        )
    circles = []
    for group in strongly_connected(
        module_graph(all_edges, kinds=("top", "deferred", "type", "string"))
    ):
        unseen = [
            edge
            for edge in all_edges
            if {edge.importer, edge.imported} <= group and edge.kind in ("type", "string")
        ]
        circles.append((tuple(sorted(group)), tuple(unseen)))
    return OrderReport(
        unlisted=tuple(sorted(known - set(listed))),
        not_units=tuple(sorted(set(listed) - known)),
        upward=tuple((pair, tuple(found)) for pair, found in sorted(pairs.items()) if up(pair)),
        loops=tuple(loops),
        module_circles=tuple(circles),
        missing_entries=tuple(missing_entries(root, all_edges, packages)),
    )


def _short(name: str) -> str:
    return name.removeprefix("ablations.")


def _edge_line(edge: Edge) -> str:
    return f"{edge.importer} -> {edge.imported} ({edge.kind}, {edge.where()})"


def describe(report: OrderReport, layers: Sequence[Sequence[str]]) -> list[str]:
    """The report as lines a person reads: counts first, then each finding with its place."""
    listed = layer_index(layers)
    lines = [
        f"package loops: {len(report.loops)}",
        f"upward imports: {sum(not e.implied for _, found in report.upward for e in found)} "
        f"(between {len(report.upward)} pairs of packages)",
        f"unlisted units: {len(report.unlisted)}",
        f"names in LAYERS that are no unit: {len(report.not_units)}",
        f"module circles: {len(report.module_circles)}",
        f"entry names that do not resolve: {len(report.missing_entries)}",
    ]
    for number, loop in enumerate(report.loops, 1):
        members = ", ".join(map(_short, loop.members))
        lines.append(f"\nloop {number} of {len(loop.members)}: {members}")
        for (importer, imported), path, found in loop.closing:
            back = " -> ".join(map(_short, path[1:])) if path else "?"
            lines.append(f"  closed by {_short(importer)} -> {_short(imported)} -> {back}")
            lines.extend(f"    {_edge_line(e)}" for e in found if not e.implied)
    if report.upward:
        lines.append("\nupward imports (importer's layer -> imported's layer):")
    for (importer, imported), found in report.upward:
        lines.append(
            f"  {_short(importer)} ({listed[importer]}) -> {_short(imported)} ({listed[imported]})"
        )
        lines.extend(f"    {_edge_line(e)}" for e in found if not e.implied)
    if report.unlisted:
        lines.append("\nunits in no layer: " + ", ".join(report.unlisted))
    if report.not_units:
        lines.append("names in LAYERS that are no unit: " + ", ".join(report.not_units))
    for circle, unseen in report.module_circles:
        lines.append(f"\nmodule circle of {len(circle)}: " + ", ".join(map(_short, circle)))
        lines.extend(f"  {_edge_line(e)}" for e in unseen if not e.implied)
    for edge in report.missing_entries:
        lines.append(f"entry name with no such attribute: {edge.imported} ({edge.where()})")
    return lines
