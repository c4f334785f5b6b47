"""`ablate run` on a Hugging Face Trainer workload (the LoRA recipe's, made tiny), end to end:
killed with `kill -9` in its main phase and run again, then `ablate verify`. Asserted on it:
verdicts, the diverging level stopped with its rule and step, and no step trained twice
beyond the checkpoint interval."""

from __future__ import annotations

from typing import Any

import pytest

from tests.ablations.byo.campaigns import (
    assert_retrained_after_a_commit,
    killed_and_rerun,
    manifest,
    verify,
)
from tests.ablations.byo.test_hf import PARAMS, TINY
from tests.faults.conftest import Campaign

# `make test-long` (40 s each on 2 cores): the command campaign (test_command_campaign.py) keeps
# a kill and its resume in `make test`; these two check the same through Lightning and HF.
pytestmark = [pytest.mark.slow, pytest.mark.long]

INTERVAL = 10
PLAN: dict[str, Any] = {
    "campaign": {"id": "byo-hf", "question": "Does the step size matter?", "decision": "lr"},
    "workload": {"hf_trainer": f"{TINY}:make_trainer", "steps": 60, "eval_every": 20},
    "control": {"params": PARAMS},
    "factors": {"lr": {"category": "essential", "levels": [0.01, 1e30]}},
    "seeds": [0, 1],
    "metric": {
        "name": "eval_loss", "direction": "minimize", "threshold": 5.0, "useful_effect": 0.05
    },
    "stop_rules": {"quality": {"warmup_steps": 20}},
    "pilot": {"steps": 20, "seeds": [0]},
    "checkpoint": {"store": "file://./ckpt", "interval": {"steps": INTERVAL}, "keep_last": 2},
    "resources": {"devices": 2},
}  # fmt: skip


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    root = tmp_path_factory.mktemp("byo-hf")
    (root / "trained").mkdir()
    env = {"TRAINED_LOG": str(root / "trained"), "STEP_SLEEP": "0.05"}
    return killed_and_rerun(root, PLAN, "lr-0.01-*/step-00000040/COMMIT.json", **env)


def test_verdicts_and_verify(campaign: Campaign) -> None:
    runs = manifest(campaign)
    assert runs["control s0 main"]["status"] == "accepted"
    assert runs["lr=0.01 s1 main"]["status"] == "accepted"
    assert "diverges" in (campaign.out / "REPORT.md").read_text()
    verify(campaign)


def test_the_diverging_level_is_stopped_with_its_rule_and_step(campaign: Campaign) -> None:
    stopped = [r for r in manifest(campaign).values() if r["variant"] == "lr=1e+30"]
    assert stopped and all(r["status"] == "stopped" for r in stopped), manifest(campaign)
    for run in stopped:
        assert run["stop"]["rule"] == "non_finite_loss"
        assert 0 < run["stop"]["step"] < 60
        assert f"at step {run['stop']['step']}" in run["stop"]["message"]


def test_the_killed_run_resumed_from_its_last_commit(campaign: Campaign) -> None:
    runs = manifest(campaign)
    resumed = [r for r in runs.values() if (r["checkpoint"] or {}).get("resumed_from_step")]
    assert any(r["variant"] == "lr=0.01" for r in resumed), resumed
    for log in (campaign.cwd.parent / "trained").glob("*.log"):
        if not log.name.startswith("1e+30"):  # stopped: it never reaches the end
            assert_retrained_after_a_commit(log, 60, INTERVAL)
