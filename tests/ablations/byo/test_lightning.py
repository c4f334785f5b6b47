"""A Lightning workload run by itself (no campaign): reports, stop rules, Lightning's own
checkpoints in the S3-protocol store, resume (bitwise with a resumable loader; measured, not
bitwise, with a plain shuffling DataLoader), and the mistakes a plan can make."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ablations.byo.lightning import LightningWorkload, trainer_arguments
from ablations.byo.run import execute
from ablations.checkpoint.manager import CheckpointManager
from ablations.errors import InputError, WorkloadError
from ablations.plan.infrastructure import CheckpointSection
from ablations.plan.model import parse_plan
from ablations.plan.workload import LIGHTNING_ENTRY, LightningSection
from ablations.run.records import RunRecord, RunSpec
from tests.ablations.byo.campaigns import committed_on_request
from tests.specs import bare_spec

NET = "tests.ablations.byo.lightning_net"
LIGHTNING = {"module": f"{NET}:Net", "data": f"{NET}:Sine"}


def spec_for(tmp_path: Path, **changes: Any) -> RunSpec:
    fields: dict[str, Any] = dict(
        run_id="control-s0-abc", campaign_id="byo", plan_hash="0" * 16, variant="control",
        category="essential", phase="main", seed=0, params={"lr": 0.05}, steps=40,
        eval_every=20, entry=LIGHTNING_ENTRY, lightning=LIGHTNING, metric="mse",
        direction="minimize", threshold=0.6, out_dir=str(tmp_path / "out"),
    )  # fmt: skip
    fields.update(changes)
    return bare_spec(**fields)


def run(spec: RunSpec) -> RunRecord:
    hook = CheckpointManager(spec) if spec.checkpoint is not None else None
    return execute(spec, LightningWorkload, hook)


def straight_then_resumed(
    tmp_path: Path, store: CheckpointSection, params: dict[str, Any], log: Path
) -> tuple[RunRecord, RunRecord]:
    """The run straight through, and the same run stopped at step 20 (as a pilot is, mid
    epoch: 8 batches an epoch) and continued from the store."""
    log.mkdir()
    straight = run(spec_for(tmp_path, params=params))
    assert straight.status == "accepted", straight
    (log / f"{params['lr']}-0.log").unlink()  # count the stopped and resumed run's steps
    first = run(spec_for(tmp_path, params=params, checkpoint=store, until=20, phase="pilot"))
    assert first.steps_done == 20 and first.checkpoint.saves == 1, first
    second = run(spec_for(tmp_path, params=params, checkpoint=store))
    assert second.checkpoint.resumed_from_step == 20 and second.steps_done == 40, second
    trained = (log / f"{params['lr']}-0.log").read_text().split()
    assert trained == [str(step) for step in range(1, 41)]  # nothing trained twice
    return straight, second


@pytest.mark.slow
def test_a_resumable_loader_resumes_bitwise_from_s3(
    tmp_path: Path, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CheckpointSection(
        store="s3://ablate-test/byo-lightning", endpoint_url=s3_endpoint, interval={"steps": 30}
    )
    monkeypatch.setenv("TRAINED_LOG", str(tmp_path / "trained"))
    params = {"lr": 0.05, "resumable": True, "dropout": 0.1}  # dropout: the RNG is restored
    straight, resumed = straight_then_resumed(tmp_path, store, params, tmp_path / "trained")
    assert resumed.checkpoint.uri.endswith("byo-lightning/byo/control-s0-abc/step-00000030")
    assert resumed.metrics == straight.metrics  # bitwise: the loader's position was saved
    assert resumed.evaluations == straight.evaluations  # the history came back with it


@pytest.mark.slow
def test_a_pilot_validated_off_the_evaluation_steps_leaves_training_bitwise(
    tmp_path: Path,
) -> None:
    """A pilot validates at its last step (15), which the run straight through does not
    (every 20): the validation loader's seed comes from torch's generator, so without the
    fork the dropout masks after the resume were other ones."""
    store = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 1000})
    params = {"lr": 0.05, "resumable": True, "dropout": 0.1}
    straight = run(spec_for(tmp_path, params=params))
    first = run(spec_for(tmp_path, params=params, checkpoint=store, until=15, phase="pilot"))
    assert first.steps_done == 15 and first.evaluations[-1]["step"] == 15, first
    resumed = run(spec_for(tmp_path, params=params, checkpoint=store))
    assert resumed.checkpoint.resumed_from_step == 15
    assert resumed.metrics == straight.metrics
    assert resumed.evaluations[-1] == straight.evaluations[-1]


@pytest.mark.slow
def test_the_module_is_told_it_trains_a_pilot_and_how_far(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "phases"
    monkeypatch.setenv("PHASE_LOG", str(log))
    monkeypatch.delenv("ABLATE_PHASE", raising=False)
    record = run(spec_for(tmp_path, until=10, phase="pilot"))
    assert record.steps_done == 10, record
    assert set(log.read_text().splitlines()) == {"pilot 10 40"}  # ablate_report, in-process
    assert "ABLATE_PHASE" not in os.environ  # as it was, once the run is done


@pytest.mark.slow
def test_a_plain_dataloader_resumes_at_its_step_with_a_fresh_shuffle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What docs/own-code.md states: Lightning restarts an interrupted epoch's DataLoader, so the
    batches after a mid-epoch resume differ (the step, weights and optimizer do not)."""
    store = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 100})
    monkeypatch.setenv("TRAINED_LOG", str(tmp_path / "trained"))
    straight, resumed = straight_then_resumed(tmp_path, store, {"lr": 0.05}, tmp_path / "trained")
    assert resumed.evaluations[0] == straight.evaluations[0]  # step 20: before the stop
    assert resumed.metrics != straight.metrics  # measured: not bitwise after it
    assert abs(resumed.metrics["mse"] - straight.metrics["mse"]) < 0.05


@pytest.mark.slow
def test_divergence_stops_with_the_rule_and_the_step(tmp_path: Path) -> None:
    record = run(spec_for(tmp_path, params={"lr": 1e4}))
    assert record.status == "stopped" and record.stop is not None
    assert record.stop.rule == "non_finite_loss"
    assert f"at step {record.stop.step} (as reported)" in record.stop.message
    assert record.steps_done == record.stop.step < 40  # on CPU each loss is read at its step
    steps = (tmp_path / "out" / record.artifacts["steps"]).read_text().splitlines()
    assert len(steps) == 1 + record.steps_done  # header, then one loss per step


@pytest.mark.slow  # imports Lightning
def test_a_parameter_no_class_takes_fails_the_run_and_the_preflight_by_name(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, params={"lr": 0.05, "widht": 8})
    record = run(spec)
    assert record.status == "failed" and record.error is not None
    assert "parameters ['widht'] are taken by neither" in record.error.message
    with pytest.raises(WorkloadError, match=r"\['widht'\]"):  # the campaign's preflight too
        LightningWorkload.preflight(spec)


def plan(**workload: Any) -> dict[str, Any]:
    return {
        "campaign": {"id": "l", "question": "q?", "decision": "d"},
        "workload": workload,
        "control": {"params": {"lr": 0.05}},
        "factors": {"lr": {"category": "essential", "levels": [0.1]}},
        "seeds": [0, 1],
        "metric": {"name": "mse", "direction": "minimize", "threshold": 1.0, "useful_effect": 0.1},
    }


def test_the_plan_names_the_lightning_entry_and_checks_its_placeholders() -> None:
    assert parse_plan(plan(lightning=LIGHTNING)).workload.entry == LIGHTNING_ENTRY
    with pytest.raises(InputError, match=r"give `entry` or `lightning`, not both"):
        parse_plan(plan(lightning=LIGHTNING, entry="pkg.mod:Other"))
    with pytest.raises(InputError, match=r"give one of \['command', 'lightning'\]"):
        parse_plan(plan(lightning=LIGHTNING, command=["python", "t.py"]))
    trainer = {**LIGHTNING, "trainer": {"precision": "{precison}"}}
    with pytest.raises(InputError, match=r"lightning.trainer.precision.*\{precison\} is no"):
        parse_plan(plan(lightning=trainer))


@pytest.mark.slow
def test_a_requested_checkpoint_is_saved_at_the_next_step(tmp_path: Path) -> None:
    store = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 1000})
    spec = spec_for(tmp_path, checkpoint=store, steps=10)
    uri = committed_on_request(spec, LightningWorkload)
    assert uri.endswith("/step-00000007")


def test_trainer_arguments_take_the_runs_parameters_and_leave_ablates_alone() -> None:
    section = LightningSection(
        module="m:Net", data="m:Data", trainer={"precision": "{precision}", "gradient_clip_val": 1}
    )
    arguments = trainer_arguments(section, {"precision": "bf16-mixed", "lr": 0.1})
    assert arguments == {"precision": "bf16-mixed", "gradient_clip_val": 1}
    owned = LightningSection(module="m:Net", data="m:Data", trainer={"max_steps": 5})
    with pytest.raises(WorkloadError, match=r"may not set \['max_steps'\]: ablate sets them"):
        trainer_arguments(owned, {})
