"""Every path a document names exists: ARCHITECTURE.md is the design of record, README.md and
the pages of docs/ are what users read, and a renamed module any of them still names misleads
the next reader (#37).

A name counts when it is quoted in backticks and reads as a place in the repository:
`flows/cli.py`, `tests/faults/`, `workers/jobs.py` (short for `ablations/workers/jobs.py`), a
module and what it defines (`campaign/state.register`, `tests/faults/conftest.py:Campaign`,
`results/job.ResultsJob`), or a dotted module (`ablations.process.preemption`). Names of the output
folder (`records/<run_id>.json`, `DIR/.lock`, `metrics/`) and commands are not the
repository's and are left out.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from tests.conftest import ROOT
from tests.import_graph import top_level_names

TOP = ("ablations", "flows", "tasks", "tests", "bench", "docs")
"""The repository's folders a document may name without `ablations/` in front."""
_QUOTED = re.compile(r"`([^`\s]+)`")
_CALL = re.compile(r"\(.*\)$")
_DOTTED = re.compile(r"(ablations|flows|tasks)(\.[A-Za-z_]\w*)+")


def _short_roots() -> set[str]:
    """First components that name a place: the top folders and `ablations`' own packages
    and modules (`campaign/`, `names.py`)."""
    inside = {p.name for p in (ROOT / "ablations").iterdir() if not p.name.startswith(("_", "."))}
    return set(TOP) | inside


@cache
def _defines(path: Path) -> set[str]:
    """What a module defines at its top level and, as `Class.name`, in its classes."""
    names = top_level_names(path)
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.ClassDef):
            names |= {
                f"{node.name}.{child.name}"
                for child in node.body
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            }
            names |= {
                f"{node.name}.{child.target.id}"
                for child in node.body
                if isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name)
            }
    return names


def _places(relative: str) -> list[Path]:
    """Where a relative name may point: from the root, or inside `ablations/`."""
    return [ROOT / relative, ROOT / "ablations" / relative]


def _module_file(base: Path) -> Path | None:
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _exists_with(module: str, attribute: str | None) -> bool:
    """Whether `module` (a path without `.py`) is a module of the repository and, when
    `attribute` is given, defines it."""
    for base in _places(module):
        path = _module_file(base)
        if path is not None and (attribute is None or attribute in _defines(path)):
            return True
    return False


def stale(name: str) -> bool | None:
    """True when `name` reads as a place in the repository that does not exist; False when it
    exists; None when it is no place of the repository."""
    name = _CALL.sub("", name).rstrip(".,;:")
    if "<" in name or "*" in name or name.startswith(("DIR/", "/", "http")):
        return None
    if "/" not in name:
        if not _DOTTED.fullmatch(name):
            return None
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):  # the longest module, then what it defines
            module = "/".join(parts[:cut])
            if _module_file(ROOT / module) is not None:
                return not _exists_with(module, ".".join(parts[cut:]) or None)
        return True
    if name.split("/")[0] not in _short_roots():
        return None
    path, _, attribute = name.partition(":")
    if any(place.exists() for place in _places(path)):
        return bool(attribute) and not _exists_with(path.removesuffix(".py"), attribute)
    folder, _, last = path.rpartition("/")
    module, _, attribute = last.partition(".")  # `dir/module.what_it_defines`, or `dir/module`
    return not _exists_with(f"{folder}/{module}", attribute or None)


def stale_names(document: Path) -> list[str]:
    """The names in `document` that read as places of the repository and do not exist."""
    found = _QUOTED.findall(document.read_text())
    return sorted({name for name in found if stale(name)})


def test_the_finder_tells_a_stale_name_from_a_live_one() -> None:
    assert stale("flows/cli.py") is False
    assert stale("campaign/opening.open_campaign") is False
    assert stale("campaign/campaign.Campaign.load") is False
    assert stale("tests/faults/conftest.py:Campaign") is False
    assert stale("tests/faults/") is False
    assert stale("ablations.checkpoint.store") is False
    assert stale("training/driver.no_such_function") is True
    assert stale("flows/no_such_module") is True
    assert stale("ablations.no_such_module") is True
    assert stale("records/<run_id>.json") is None  # the output folder's, not the repository's
    assert stale("metrics/") is None
    assert stale("ABLATE_FAULT") is None


def test_every_path_architecture_names_exists() -> None:
    assert stale_names(ROOT / "ARCHITECTURE.md") == []


def test_every_path_the_readme_and_the_pages_name_exists() -> None:
    """The user's documents too: a page naming a moved module sends the reader nowhere."""
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    stale_by_document = {doc.name: stale_names(doc) for doc in documents}
    assert {name: found for name, found in stale_by_document.items() if found} == {}
