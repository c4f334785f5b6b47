"""The public face: the names a user's code imports from `ablations` itself (#44). A refactor
moves modules; it must not remove one of these silently, nor break an old path without a
warning naming the new one."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ablations
from tests.conftest import ROOT

PUBLIC = {
    "__version__",
    "Workload",
    "WorkloadFactory",
    "Evaluation",
    "Predictions",
    "InputGroup",
    "InputReport",
    "Split",
    "Splits",
    "DataProblem",
    "ResumableLoader",
    "TERMINATE",
    "TerminateRequest",
    "ExternalWorkload",
    "RunSpec",
    "Session",
    "Reply",
}
"""What users import: removing one is a breaking change, made here on purpose or not at all."""

MOVED = {
    "ablations.workload": "ablations.run.workload",
    "ablations.preemption": "ablations.process.preemption",
    "ablations.records": "ablations.run.records",
}
"""Old paths of public modules (`git log --stat`: moved in 921222f) -> where they are now."""


def _python(code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-c", code], cwd=ROOT, capture_output=True, text=True
    )


def test_the_public_names_are_pinned() -> None:
    assert set(ablations.__all__) == PUBLIC
    assert len(ablations.__all__) == len(PUBLIC)  # no name listed twice
    assert set(dir(ablations)) >= PUBLIC


@pytest.mark.parametrize("name", sorted(PUBLIC - {"__version__"}))
def test_each_public_name_is_the_object_its_module_defines(name: str) -> None:
    value = getattr(ablations, name)
    module = sys.modules[ablations._PUBLIC[name]]
    assert getattr(module, name) is value
    if isinstance(value, type):  # defined there, not re-exported from somewhere else again
        assert value.__module__ == module.__name__


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'Workloads'"):
        _ = ablations.Workloads
    with pytest.raises(ImportError, match="Workloads"):
        exec("from ablations import Workloads", {})


def test_import_ablations_loads_neither_torch_nor_an_adapter() -> None:
    """What `ablate --help` pays first: each public name is imported on first use."""
    heavy = ("torch", "numpy", "ablations.run.workload", "ablations.byo.session")
    probe = f"import sys, ablations; print([m for m in {heavy!r} if m in sys.modules])"
    assert _python(probe).stdout.strip() == "[]"
    # On first use the name's module is imported (not torch, which no record needs).
    taken = _python(
        "import sys; from ablations import Evaluation; "
        "print('ablations.run.workload' in sys.modules, 'torch' in sys.modules)"
    )
    assert taken.stdout.strip() == "True False", taken.stderr


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_path_imports_with_a_warning_naming_the_new_one(old: str, new: str) -> None:
    code = f"import {old} as a, {new} as b; assert a is b; print('same')"
    shown = _python(code)  # the default filters show it: the importing line is __main__'s
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "same"
    assert re.search(rf"<string>:1: DeprecationWarning: {old} is deprecated: .*{new}", shown.stderr)
    refused = _python(f"import {old}", "-W", "error::DeprecationWarning")
    assert refused.returncode == 1
    assert new in refused.stderr.splitlines()[-1]


def _imports_of_ablations(text: str) -> list[str]:
    """Every `ablations...` module a piece of Python imports from."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [name for name in found if name.split(".")[0] == "ablations"]


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)


def test_the_docs_and_recipes_import_only_the_public_face() -> None:
    """What users copy must keep working when a module moves."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    snippets = {
        f"{page.name} block {i}": block
        for page in pages
        for i, block in enumerate(_python_blocks(page))
    }
    recipes = {
        str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "ablations/recipes").rglob("*.py")
    }
    deep = []
    for where, text in {**snippets, **recipes}.items():
        try:
            names = _imports_of_ablations(text)
        except SyntaxError:  # a fragment (`def f(): ...` bodies elided): read it line by line
            names = re.findall(r"^\s*(?:from|import) (ablations[\w.]*)", text, re.MULTILINE)
        deep += [(where, name) for name in names if name != "ablations"]
    assert deep == []
    assert any("from ablations import" in block for block in snippets.values())
    prose = "\n".join(page.read_text() for page in pages)
    assert not re.search(r"from ablations\.\w", prose)
