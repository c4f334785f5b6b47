"""`ablate run` with a variant whose program hangs and `workload.report_timeout_seconds: 2` in
the plan: each of its runs fails with "no report for 2 s" within seconds, and the campaign goes
on to its decision with the other runs (exit 0)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import Campaign

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("maybe_hanging.py")
PLAN: dict[str, Any] = {
    "campaign": {"id": "hangs", "question": "Does the step size matter?", "decision": "lr"},
    "workload": {
        "command": ["python", str(SCRIPT), "{hang}", "--lr", "{lr}"],
        "steps": 100,
        "eval_every": 25,
        "report_timeout_seconds": 2,
    },
    "control": {"params": {"lr": 0.05, "hang": False}},
    "factors": {
        "lr": {"category": "essential", "levels": [0.1]},
        "hang": {"category": "exploratory", "levels": [True]},  # not in the pilot: main only
    },
    "seeds": [0, 1],
    "metric": {"name": "mse", "direction": "minimize", "threshold": 0.5, "useful_effect": 0.05},
    "stop_rules": {"quality": {"warmup_steps": 50}},
    "pilot": {"steps": 50, "seeds": [0]},
    "checkpoint": {"store": "file://./ckpt", "interval": {"steps": 25}},
    "resources": {"devices": 2},
}


def test_a_hanging_variant_fails_its_runs_and_the_campaign_goes_on(tmp_path: Path) -> None:
    campaign = Campaign(tmp_path / "c", PLAN, tmp_path / "prefect-home")
    result = campaign.run()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Traceback" not in output
    runs = json.loads((campaign.out / "manifest.json").read_text())["runs"]
    hung = [r for r in runs if r["variant"] == "hang=true"]
    assert len(hung) == 2, runs
    for run in hung:
        assert run["status"] == "failed" and run["error"]["type"] == "NoReport", run
        assert run["error"]["message"].startswith("no report for 2 s (after step 0; ")
        assert run["error"]["cause"] == "workload"
        assert run["ended_at"] - run["started_at"] < 10  # the plan's 2 s, not ten minutes
    others = [r for r in runs if r["variant"] != "hang=true" and r["phase"] == "main"]
    assert others and all(r["status"] == "accepted" for r in others), others
