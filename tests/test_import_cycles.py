"""The package order among `ablations/`, `tasks/` and `flows/`, read from the source (nothing is
imported): `tests/import_graph.py` finds every dependency (top-level, deferred, type-only and
relative imports, modules named by string) and `python -m tests.package_loops` prints what
these tests find.

Each package is one unit on one layer of `LAYERS` (a first-level subpackage of `ablations`, the
root module `ablations.errors`, `tasks`, `flows`). A unit imports only from its own layer or
those below; no two units know each other (a package loop); no two modules do either (a module
circle, type-only and string edges included); a unit no layer names fails, so a new package
must be placed.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from tests.conftest import ROOT
from tests.import_graph import OrderReport, check_order, edges


def _external_imports(path: Path) -> set[str]:
    """Every top-level package a module imports: in functions and type-only ones too."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
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


def test_the_output_folder_names_and_writer_import_nothing_of_the_project() -> None:
    """`ablations.files` is the bottom: every layer writes the output folder through it."""
    found = [e for e in edges(ROOT) if e.importer.startswith("ablations.files") and not e.implied]
    assert [
        (e.importer, e.imported) for e in found if not e.imported.startswith("ablations.files")
    ] == []


def test_the_exception_tree_imports_nothing_of_the_project() -> None:
    """`ablations.errors` holds every exception class (httpx's pattern): any module may raise
    one, so it may import none."""
    assert [e.imported for e in edges(ROOT) if e.importer == "ablations.errors"] == []


# -- the package order ------------------------------------------------------------------------

LAYERS: tuple[tuple[str, ...], ...] = (
    # the bottom: the exception tree, the output folder's names and writer, how a process ends,
    # the lazy public names of a package;
    # nothing of the project but each other
    ("ablations.errors", "ablations.files", "ablations.process", "ablations.lazy"),
    # what the campaign refuses or hides; how numbers print and the progress channel
    ("ablations.security", "ablations.text"),
    ("ablations.plan",),
    # what one run is, and the slots a machine offers
    ("ablations.run", "ablations.slots"),
    ("ablations.analysis", "ablations.checkpoint", "ablations.workloads"),
    ("ablations.training",),
    # what a worker process runs besides a built-in run: an external workload, the preflight
    ("ablations.byo", "ablations.preflight"),
    # the public face (`ablations/__init__`: the names a user's code imports, from the layers
    # below) and the old paths of moved public modules, kept for a release with a warning
    ("ablations", "ablations.workload", "ablations.preemption", "ablations.records"),
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
"""The package order, lowest first (ARCHITECTURE.md, *Package order*): a unit imports only from
its own layer or those below, every kind of dependency included. Only units are listed."""


# -- the finder, on small trees ----------------------------------------------------------------


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


def test_strict_no_package_loop() -> None:
    assert [loop.members for loop in _strict().loops] == []


def test_strict_every_dependency_follows_the_package_order() -> None:
    assert [pair for pair, _ in _strict().upward] == []


def test_strict_every_package_has_a_layer() -> None:
    assert _strict().unlisted == ()


def test_strict_the_layers_name_whole_packages() -> None:
    assert _strict().not_units == ()


def test_strict_no_module_circle_type_only_and_string_imports_included() -> None:
    assert [circle for circle, _ in _strict().module_circles] == []


def test_every_entry_name_resolves() -> None:
    """A `module:attr` the code names (a plan's default `workload.entry`, an adapter's) names
    a module and attribute that exist: a move cannot break one silently."""
    assert _strict().missing_entries == ()
