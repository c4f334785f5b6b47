"""The Lightning recipe (#44): `ablations/recipes/lightning.yaml`, a whole plan, with its
module (batch norm, dropout, OneCycleLR, gradient clipping) in `ablations/recipes/`: it
validates, and `ablate run` takes it as written through the preflight's restart check (an
exact resume), the pilot, the gate and the main phase, then `ablate verify` passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ablations.plan.io import load_plan
from tests.conftest import ROOT
from tests.faults.conftest import Campaign

RECIPE = ROOT / "ablations" / "recipes" / "lightning.yaml"


def test_the_recipe_validates_with_its_module_found() -> None:
    plan = load_plan(RECIPE)  # imports the module: the classes and the trainer are checked
    assert plan.workload.lightning is not None
    assert plan.workload.lightning.trainer == {"gradient_clip_val": 1.0}


@pytest.mark.slow
def test_the_recipe_runs_as_written_and_verifies(tmp_path: Path) -> None:
    campaign = Campaign(tmp_path / "c", yaml.safe_load(RECIPE.read_text()), tmp_path / "home")
    result = campaign.run(timeout=480)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "preflight: passed" in result.stdout + result.stderr  # the resume is exact
    runs = json.loads((campaign.out / "manifest.json").read_text())["runs"]
    assert len(runs) == 8 and all(r["status"] == "accepted" for r in runs)
    resumed = [r for r in runs if r["phase"] == "main" and r["checkpoint"]["resumed_from_step"]]
    assert {r["variant"] for r in resumed} == {"control", "norm=false"}  # from their pilots
    verified = subprocess.run(
        [sys.executable, "-m", "ablations.cli", "verify", str(campaign.out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr
