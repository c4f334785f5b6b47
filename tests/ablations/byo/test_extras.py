"""The core install stays as it is: no module of `ablations` (the adapters included) imports
Lightning or transformers until a plan's run needs them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

CHECK = """
import importlib, pkgutil, sys
import ablations
for module in pkgutil.walk_packages(ablations.__path__, "ablations."):
    if not module.name.startswith("ablations.workloads.") and not module.name.endswith(".__main__"):
        importlib.import_module(module.name)
print(sorted({m.split(".")[0] for m in sys.modules} & {"lightning", "transformers", "peft"}))
"""


@pytest.mark.slow  # imports every module in a fresh interpreter
def test_no_core_module_imports_a_framework() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
