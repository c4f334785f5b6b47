"""A campaign whose essential variant's pilot is stopped by the quality rule, kept by the gate
and run in the main phase, verifies with exit 0: its main run's note (its pilot left no
checkpoint) names the folder's own store relative to the folder, as the plan wrote it, and
its verdict says the quality rule stopped it early, within the pilot's steps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.conftest import Campaign, fault_plan

pytestmark = pytest.mark.slow


def test_a_stopped_essential_pilot_run_in_the_main_phase_verifies(tmp_path: Path) -> None:
    plan = fault_plan(
        # lr 1e-6 learns nothing: below the threshold at the pilot's step-50 evaluation.
        factors={"lr": {"category": "essential", "levels": [1.0e-6]}},
        seeds=[0],
        gate={"mode": "auto"},  # trim_stopped keeps an essential variant stopped on one seed
    )
    campaign = Campaign(tmp_path / "c", plan, tmp_path / "prefect-home")
    result = campaign.run()
    assert result.returncode == 0, result.stdout + result.stderr

    runs = json.loads((campaign.out / "manifest.json").read_text())["runs"]
    pilot = next(r for r in runs if r["variant"] != "control" and r["phase"] == "pilot")
    assert pilot["status"] == "stopped" and pilot["stop"]["rule"] == "quality", pilot
    main = next(r for r in runs if r["variant"] != "control" and r["phase"] == "main")
    note = main["checkpoint"]["note"]
    # stopped at its step-50 evaluation, it never reached its last step (100) to commit there
    assert note is not None and "left no checkpoint at step 100 in file://ckpt" in note, note
    assert "resumed from its last checkpoint" in note or "trained from the start" in note, note
    assert str(campaign.out) not in json.dumps(runs)
    assert main["status"] == "stopped" and main["stop"]["step"] == 50, main
    report = (campaign.out / "REPORT.md").read_text()
    assert "stopped early (within the pilot's 100 steps, not a final result)" in report

    verify = subprocess.run(
        [sys.executable, "-m", "ablations.cli", "verify", str(campaign.out)],
        capture_output=True, text=True, env=campaign.env(), timeout=240,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "\x1b[" not in verify.stdout + verify.stderr
