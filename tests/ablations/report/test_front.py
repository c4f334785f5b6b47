"""`ablations.report`'s names, each imported on first use: the campaign process imports two small
modules of the package (`md_html` for the flow, `artifact` for its tasks) and draws no plot."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ablations.report
from tests.conftest import ROOT


def test_the_campaign_process_imports_neither_matplotlib_nor_pandas() -> None:
    """They cost it a CPU-second (measured 0.46 s after Prefect) in every `ablate run`; the
    results step that needs them runs in a slot worker."""
    probe = (
        "import sys, flows.campaign, tasks.results, tasks.curves; "
        "print([m for m in ('matplotlib', 'pandas') if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ablations.report.__all__)
def test_each_name_is_the_object_its_module_defines(name: str) -> None:
    value = getattr(ablations.report, name)
    assert getattr(sys.modules[ablations.report._PUBLIC[name]], name) is value
    assert name in dir(ablations.report)


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'buildd'"):
        _ = ablations.report.buildd  # type: ignore[attr-defined]
