"""A Hugging Face Trainer workload (the LoRA recipe's) run by itself: reports, stop rules,
`checkpoint-N` folders in the S3-protocol store, a bitwise resume, and the mistakes a
`make_trainer` can make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ablations.byo.hf import TrainerWorkload
from ablations.byo.run import execute
from ablations.checkpoint.manager import CheckpointManager
from ablations.plan.infrastructure import CheckpointSection
from ablations.plan.io import load_plan
from ablations.plan.workload import HF_TRAINER_ENTRY
from ablations.run.records import RunRecord, RunSpec
from tests.ablations.byo.campaigns import committed_on_request
from tests.conftest import ROOT
from tests.specs import bare_spec

TINY = "tests.ablations.byo.hf_tiny"
PARAMS = {"lora_rank": 4, "precision": "fp32", "lr": 0.003, "max_seq_len": 32, "batch_size": 4}


def spec_for(tmp_path: Path, **changes: Any) -> RunSpec:
    fields: dict[str, Any] = dict(
        run_id="control-s0-abc", campaign_id="byo", plan_hash="0" * 16, variant="control",
        category="essential", phase="main", seed=0, params=PARAMS, steps=30, eval_every=10,
        entry=HF_TRAINER_ENTRY, hf_trainer=f"{TINY}:make_trainer", metric="eval_loss",
        direction="minimize", threshold=5.0, out_dir=str(tmp_path / "out"),
    )  # fmt: skip
    fields.update(changes)
    return bare_spec(**fields)


def run(spec: RunSpec) -> RunRecord:
    hook = CheckpointManager(spec) if spec.checkpoint is not None else None
    return execute(spec, TrainerWorkload, hook)


@pytest.mark.slow
def test_checkpoint_folders_in_s3_resume_bitwise_and_count_no_step_twice(
    tmp_path: Path, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CheckpointSection(
        store="s3://ablate-test/byo-hf", endpoint_url=s3_endpoint, interval={"steps": 8}
    )
    straight = run(spec_for(tmp_path))
    assert straight.status == "accepted", straight
    assert set(straight.metrics) == {"eval_loss"}  # HF's runtime figures are not metrics
    log = tmp_path / "trained"
    log.mkdir()
    monkeypatch.setenv("TRAINED_LOG", str(log))
    first = run(spec_for(tmp_path, checkpoint=store, until=20, phase="pilot"))
    assert first.steps_done == 20 and first.checkpoint.saves == 3, first  # 8, 16, 20
    second = run(spec_for(tmp_path, checkpoint=store))
    assert second.checkpoint.resumed_from_step == 20 and second.steps_done == 30, second
    assert second.checkpoint.uri.endswith("byo-hf/byo/control-s0-abc/step-00000024")
    assert second.metrics == straight.metrics  # bitwise: HF restores RNG and data position
    assert second.evaluations == straight.evaluations
    trained = (log / "0.003-0.log").read_text().split()
    assert trained == [str(step) for step in range(1, 31)]  # nothing trained twice


@pytest.mark.slow
def test_divergence_stops_with_the_rule_and_the_step(tmp_path: Path) -> None:
    """HF's own logging hides a NaN loss (`logging_nan_inf_filter`); the rule still sees it."""
    record = run(spec_for(tmp_path, params={**PARAMS, "lr": 1e30}))
    assert record.status == "stopped" and record.stop is not None
    assert record.stop.rule == "non_finite_loss"
    assert f"at step {record.stop.step} (as reported)" in record.stop.message
    assert record.steps_done == record.stop.step < 30


@pytest.mark.slow
def test_a_trainer_without_ablates_arguments_fails_the_run_by_name(tmp_path: Path) -> None:
    record = run(spec_for(tmp_path, hf_trainer=f"{TINY}:ignores_arguments"))
    assert record.status == "failed" and record.error is not None
    assert "TrainingArguments.max_steps is 5, not 30" in record.error.message
    assert "TrainingArguments(**args, ...)" in record.error.message


def test_the_lora_recipe_names_the_trainer_entry_and_its_four_factors() -> None:
    plan = load_plan(ROOT / "ablations" / "recipes" / "lora.yaml")
    assert plan.workload.entry == HF_TRAINER_ENTRY
    assert set(plan.factors) == {"lora_rank", "precision", "lr", "max_seq_len"}


@pytest.mark.slow
def test_a_requested_checkpoint_is_saved_at_the_next_step(tmp_path: Path) -> None:
    store = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 1000})
    spec = spec_for(tmp_path, checkpoint=store, steps=10)
    uri = committed_on_request(spec, TrainerWorkload)
    assert uri.endswith("/step-00000007")
