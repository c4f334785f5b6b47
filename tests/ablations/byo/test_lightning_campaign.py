"""`ablate run` on a Lightning workload, end to end: killed with `kill -9` in its main phase
and run again, then `ablate verify`. Asserted on it: verdicts, the diverging level stopped
with its rule and step, and no step trained twice beyond the checkpoint interval."""

from __future__ import annotations

from typing import Any

import pytest

from tests.ablations.byo.campaigns import (
    assert_retrained_after_a_commit,
    killed_and_rerun,
    manifest,
    verify,
)
from tests.ablations.byo.test_lightning import LIGHTNING
from tests.faults.conftest import Campaign

# `make test-long` (40 s each on 2 cores): the command campaign (test_command_campaign.py) keeps
# a kill and its resume in `make test`; these two check the same through Lightning and HF.
pytestmark = [pytest.mark.slow, pytest.mark.long]

INTERVAL = 20
PLAN: dict[str, Any] = {
    "campaign": {"id": "byo-l", "question": "Does the step size matter?", "decision": "lr"},
    # a resumable loader: the preflight's restart check needs an exact resume
    "workload": {
        "lightning": LIGHTNING,
        "steps": 100,
        "eval_every": 25,
        "params": {"resumable": True},
    },
    "control": {"params": {"lr": 0.05}},
    "factors": {"lr": {"category": "essential", "levels": [0.1, 10000.0]}},
    "seeds": [0, 1],
    "metric": {"name": "mse", "direction": "minimize", "threshold": 0.6, "useful_effect": 0.05},
    "stop_rules": {"quality": {"warmup_steps": 50}},
    "pilot": {"steps": 50, "seeds": [0]},
    "checkpoint": {"store": "file://./ckpt", "interval": {"steps": INTERVAL}, "keep_last": 2},
    "resources": {"devices": 2},
}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    root = tmp_path_factory.mktemp("byo-lightning")
    (root / "trained").mkdir()
    env = {"TRAINED_LOG": str(root / "trained"), "STEP_SLEEP": "0.03"}
    return killed_and_rerun(root, PLAN, "lr-0.1-*/step-00000060/COMMIT.json", **env)


def test_verdicts_and_verify(campaign: Campaign) -> None:
    runs = manifest(campaign)
    assert runs["control s0 main"]["status"] == "accepted"
    assert runs["lr=0.1 s1 main"]["status"] == "accepted"
    assert "diverges" in (campaign.out / "REPORT.md").read_text()
    verify(campaign)


def test_the_diverging_level_is_stopped_with_its_rule_and_step(campaign: Campaign) -> None:
    stopped = [r for r in manifest(campaign).values() if r["variant"] == "lr=10000.0"]
    assert stopped and all(r["status"] == "stopped" for r in stopped)
    for run in stopped:
        assert run["stop"]["rule"] == "non_finite_loss"
        assert 0 < run["stop"]["step"] < 100
        assert f"at step {run['stop']['step']}" in run["stop"]["message"]


def test_the_killed_run_resumed_from_its_last_commit(campaign: Campaign) -> None:
    runs = manifest(campaign)
    resumed = [r for r in runs.values() if (r["checkpoint"] or {}).get("resumed_from_step")]
    assert any(r["variant"] == "lr=0.1" for r in resumed), resumed
    for log in (campaign.cwd.parent / "trained").glob("*.log"):
        if not log.name.startswith("10000.0"):  # stopped: it never reaches the end
            assert_retrained_after_a_commit(log, 100, INTERVAL)


def test_the_report_holds_the_error_analysis_and_the_framework(campaign: Campaign) -> None:
    """`predict_step` over the data module's `predict_dataloader`, end to end; and the
    Lightning version the runs recorded, in their environment and the report."""
    runs = manifest(campaign)
    accepted = [r for r in runs.values() if r["phase"] == "main" and r["status"] == "accepted"]
    assert accepted
    for run in accepted:
        assert any(a["kind"] == "predictions" for a in run["artifacts"]), run["run_id"]
        assert set(run["environment"]["frameworks"]) == {"lightning"}
    report = (campaign.out / "REPORT.md").read_text()
    assert "| Variant | Seed | Regressions | Improvements | First regressions |" in report
    version = accepted[0]["environment"]["frameworks"]["lightning"]
    assert f"**Frameworks.** lightning {version}" in report
