"""A workload defect found by preflight ends `ablate run` with exit 1 and what to do next."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.faults.conftest import Campaign, fault_plan
from tests.faults.workloads import LOSE_CURSOR


@pytest.mark.slow
def test_a_failed_restart_check_exits_1_and_names_the_fix(tmp_path: Path) -> None:
    campaign = Campaign(tmp_path / "c", fault_plan(), tmp_path / "prefect-home")
    result = campaign.run(**{LOSE_CURSOR: "1"})
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output
    assert "gate: fix (" in output and "restart check" in output
    assert f"fix the defect above, then rerun with --out {campaign.out}" in output
    gate = json.loads((campaign.out / "gate.json").read_text())
    assert gate["decision"] == "fix"
    assert campaign.finished() == []  # nothing trained on a workload that cannot resume
