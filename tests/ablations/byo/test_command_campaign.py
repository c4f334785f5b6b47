"""`ablate run` on a command workload, end to end: one campaign killed with `kill -9` in its
main phase and run again, then `ablate verify`. Asserted on it: verdicts, the diverging level
stopped with its rule and step, and no step trained twice beyond the checkpoint interval."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.ablations.byo.campaigns import assert_retrained_after_a_commit, manifest
from tests.ablations.byo.test_command import SCRIPT
from tests.faults.conftest import Campaign, kill_when

pytestmark = pytest.mark.slow

INTERVAL = 20
PLAN: dict[str, Any] = {
    "campaign": {"id": "byo-cmd", "question": "Does the step size matter?", "decision": "lr"},
    "workload": {
        "command": ["python", str(SCRIPT), "--lr", "{lr}"],
        "steps": 100,
        "eval_every": 25,
    },
    "control": {"params": {"lr": 0.05}},
    "factors": {"lr": {"category": "essential", "levels": [0.1, 5000.0]}},
    "seeds": [0, 1],
    "metric": {"name": "mse", "direction": "minimize", "threshold": 0.5, "useful_effect": 0.05},
    "stop_rules": {"quality": {"warmup_steps": 50}},
    "pilot": {"steps": 50, "seeds": [0]},
    "checkpoint": {"store": "file://./ckpt", "interval": {"steps": INTERVAL}, "keep_last": 2},
    "resources": {"devices": 2},
}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    root = tmp_path_factory.mktemp("byo-campaign")
    done = Campaign(root / "c", PLAN, root / "prefect-home")
    trained = root / "trained"
    trained.mkdir()
    slow = {"TRAINED_LOG": str(trained), "STEP_SLEEP": "0.03"}
    process = done.start(**slow)

    def main_checkpoint_committed() -> bool:
        found = (done.out / "ckpt" / "byo-cmd").glob("lr-0.1-*/step-00000060/COMMIT.json")
        return any(found)

    kill_when(process, main_checkpoint_committed)
    result = done.run(**slow)
    assert result.returncode == 0, result.stdout + result.stderr
    return done


def test_verdicts_and_verify(campaign: Campaign) -> None:
    runs = manifest(campaign)
    assert runs["control s0 main"]["status"] == "accepted"
    assert runs["lr=0.1 s1 main"]["status"] == "accepted"
    report = (campaign.out / "REPORT.md").read_text()
    assert "diverges" in report
    verify = subprocess.run(
        [sys.executable, "-m", "ablations.cli", "verify", str(campaign.out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "note: no final model is re-evaluated: a command's model is its program's" in (
        verify.stderr
    )


def test_the_programs_code_is_in_the_record(campaign: Campaign) -> None:
    """The script's folder, hashed at registration (the kill and rerun kept it), is in the
    manifest and named at the top of the report beside what verify checks."""
    import json

    registered = json.loads((campaign.out / "registration.json").read_text())["code"]
    code = json.loads((campaign.out / "manifest.json").read_text())["code_version"]["workload"]
    assert code == registered and code["paths"] == [str(SCRIPT.parent)] and not code["declared"]
    report = (campaign.out / "REPORT.md").read_text()
    assert f"**Code.** {SCRIPT.parent} ({code['files']} files, sha256 {code['sha256'][:12]})" in (
        report
    )
    assert "**Verification.** `ablate verify` re-hashes every file" in report
    assert "it re-evaluates no model: a command's model is its program's own" in report


def test_the_diverging_level_is_stopped_with_its_rule_and_step(campaign: Campaign) -> None:
    stopped = [r for r in manifest(campaign).values() if r["variant"] == "lr=5000.0"]
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
        if log.name.startswith("5000.0"):
            continue  # stopped: it never reaches the end
        assert_retrained_after_a_commit(log, 100, INTERVAL)


def test_the_report_holds_the_error_analysis_from_the_programs_predictions(
    campaign: Campaign,
) -> None:
    """The documented `ABLATE_PREDICTIONS` file, end to end: exported for every accepted main
    run (the killed and resumed one included), read into the report's flips."""
    runs = manifest(campaign)
    accepted = [r for r in runs.values() if r["phase"] == "main" and r["status"] == "accepted"]
    assert accepted
    for run in accepted:
        assert any(a["kind"] == "predictions" for a in run["artifacts"]), run["run_id"]
    report = (campaign.out / "REPORT.md").read_text()
    errors = report.split("## Error analysis", 1)[1].split("\n## ", 1)[0]
    assert "| Variant | Seed | Regressions | Improvements | First regressions |" in errors
    assert "| lr=0.1 | 0 |" in errors and "| lr=0.1 | 1 |" in errors  # paired by seed
