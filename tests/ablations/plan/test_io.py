"""`ablate validate` checks the modules a workload names without importing them (#44: it
answers in a fraction of a second, without torch): found, then read for the name."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ablations.plan.io import _source_limits, workload_module_problem


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "site"
    (root / "userpkg").mkdir(parents=True)
    (root / "userpkg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(root))
    for name in [name for name in sys.modules if name.split(".")[0] == "userpkg"]:
        monkeypatch.delitem(sys.modules, name)  # another test's package of the same name
    yield root / "userpkg"
    for name in [name for name in sys.modules if name.split(".")[0] == "userpkg"]:
        del sys.modules[name]


@pytest.mark.parametrize(
    "source",
    [
        "class Net: ...\n",
        "import torch\ntry:\n    from fast import Net\nexcept ImportError:\n    class Net: ...\n",
        "if True:\n    Net = object\n",
        "from other import *\n",  # a star import: only importing it could tell
        "def __getattr__(name): ...\n",
    ],
)
def test_a_defined_name_is_found_without_importing_the_module(package: Path, source: str) -> None:
    (package / "model.py").write_text(source)
    assert workload_module_problem("userpkg.model:Net") is None
    assert "userpkg.model" not in sys.modules


def test_a_missing_name_and_a_syntax_error_are_named(package: Path) -> None:
    (package / "model.py").write_text("class Nett: ...\n")
    problem = workload_module_problem("userpkg.model:Net", "workload.lightning.module")
    assert problem is not None and problem.path == "workload.lightning.module"
    assert problem.message == "module 'userpkg.model' has no 'Net'"
    (package / "model.py").write_text("class Net:\n    def f(self:\n")
    problem = workload_module_problem("userpkg.model:Net")
    assert problem is not None
    assert problem.message.startswith("module 'userpkg.model' does not parse (line 2)")
    assert workload_module_problem("userpkg.absent:Net") is not None
    assert "userpkg.model" not in sys.modules


def test_a_dependency_that_is_not_installed_is_named(package: Path) -> None:
    """What importing it would fail on first (a missing extra, say), found without importing:
    an unconditional top-level import that cannot be found. One inside `try` is optional."""
    (package / "model.py").write_text(
        "import json\nimport yaml\nfrom no_such_framework.core import Module\n"
        "try:\n    import no_such_accelerator\nexcept ImportError:\n    pass\n"
        "class Net(Module): ...\n"
    )
    problem = workload_module_problem("userpkg.model:Net")
    assert problem is not None
    assert problem.message.startswith(
        "module 'userpkg.model' imports 'no_such_framework', which cannot be found here"
    )
    (package / "model.py").write_text("import json\nimport yaml\nclass Net: ...\n")
    assert workload_module_problem("userpkg.model:Net") is None


@pytest.mark.parametrize(
    "entry",
    ["ablations.workloads.digits:DigitsWorkload", "ablations.workloads.charlm:CharLMWorkload"],
)
def test_a_built_in_workloads_limits_read_from_its_source_are_the_imported_ones(
    entry: str,
) -> None:
    """validate reads `PARAM_LIMITS` without importing torch: the same bounds as imported."""
    import importlib

    module, _, attr = entry.partition(":")
    read = _source_limits(module, attr)
    assert read and read == dict(getattr(importlib.import_module(module), attr).PARAM_LIMITS)


def test_limits_only_running_could_tell_are_left_to_importing(package: Path) -> None:
    (package / "model.py").write_text(
        "import os\nBIG = int(os.environ.get('BIG', 8))\n"
        "class Net:\n    PARAM_LIMITS = {'width': (1, BIG)}\n"
        "class Base:\n    PARAM_LIMITS = {'width': (1, 8)}\n"
        "class Child(Base): ...\n"
        "class Plain: ...\n"
    )
    assert _source_limits("userpkg.model", "Net") is None  # BIG is computed at import
    assert _source_limits("userpkg.model", "Child") is None  # it may inherit some
    assert _source_limits("userpkg.model", "Plain") == {}
    assert "userpkg.model" not in sys.modules
