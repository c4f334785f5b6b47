"""`spec_for`: a registered run becomes the spec a slot's worker executes. A pilot trains the
first `pilot.steps` of its main run's length under that run's id, and the main run resumes
there; a run without a pilot starts at 0. (Placing a relative store inside the folder is
pinned in tests/ablations/checkpoint/test_store.py.)"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from ablations.campaign.campaign import Campaign
from ablations.campaign.opening import register
from ablations.campaign.specs import spec_for
from ablations.plan.model import Plan
from ablations.plan.variants import PlannedRun
from ablations.run.records import RunSpec
from tests.flows.conftest import TINY_PLAN, plan_text


@pytest.fixture
def registered(tmp_path: Path) -> tuple[Plan, list[PlannedRun], dict[str, RunSpec], Path]:
    data = copy.deepcopy(TINY_PLAN)
    data["checkpoint"] = {"store": "file://ckpt", "interval": {"steps": 20}}
    data["metric"] = {"name": "loss", "direction": "minimize", "threshold": 2.5}
    data["metric"]["useful_effect"] = 0.01
    data["workload"] = {"steps": 60, "eval_every": 15, "params": {"batch_size": 32}}
    data["pilot"] = {"steps": 30}
    out = tmp_path / "out"
    registration = register(plan_text(data), out)
    campaign = Campaign.load(out)
    plan = campaign.plan
    runs = list(campaign.runs)
    specs = {r.run_id: spec_for(plan, registration, r) for r in runs}
    return plan, runs, specs, out.resolve()


def test_every_spec_carries_its_run_and_the_plans_shared_settings(
    registered: tuple[Plan, list[PlannedRun], dict[str, RunSpec], Path],
) -> None:
    plan, runs, specs, out = registered
    assert len(specs) == len(runs)  # run ids are distinct: one spec each
    for run in runs:
        spec = specs[run.run_id]
        assert (spec.variant, spec.category, spec.phase, spec.seed) == (
            run.variant,
            run.category,
            run.phase,
            run.seed,
        )
        assert spec.params == run.params
        assert spec.campaign_id == plan.campaign.id == "tiny"
        # the plan's sections whole, not fields copied one by one
        assert spec.workload == plan.workload and spec.metric == plan.metric
        assert (spec.metric.name, spec.metric.direction, spec.metric.threshold) == (
            "loss",
            "minimize",
            2.5,
        )
        assert spec.workload.eval_every == 15 and spec.stop_rules == plan.stop_rules
        assert spec.out_dir == str(out)
        assert spec.checkpoint is not None and spec.checkpoint.store == f"file://{out}/ckpt"
        assert spec.device == "cpu" and spec.attempt is None  # filled in by the slot / pool


def test_a_pilot_trains_the_first_steps_of_its_main_runs_length_under_that_runs_id(
    registered: tuple[Plan, list[PlannedRun], dict[str, RunSpec], Path],
) -> None:
    plan, runs, specs, _ = registered
    pilots = [r for r in runs if r.phase == "pilot"]
    main_ids = {r.run_id for r in runs if r.phase == "main"}
    assert pilots
    for pilot in pilots:
        spec = specs[pilot.run_id]
        # built with the whole run's length (its schedules match the main run's) and
        # stopped at the pilot's steps
        assert spec.steps == plan.workload.steps == 60
        assert spec.until == plan.pilot_steps == 30
        assert spec.checkpoint_id == pilot.continues and spec.checkpoint_id in main_ids
        assert spec.checkpoint_id != spec.run_id
        assert spec.resume_step == 0


def test_a_main_run_resumes_where_its_pilot_ended_and_one_without_a_pilot_starts_at_zero(
    registered: tuple[Plan, list[PlannedRun], dict[str, RunSpec], Path],
) -> None:
    plan, runs, specs, _ = registered
    continued = {r.continues for r in runs if r.phase == "pilot"}
    mains = [r for r in runs if r.phase == "main"]
    with_pilot = [r for r in mains if r.run_id in continued]
    without = [r for r in mains if r.run_id not in continued]
    # the tiny plan pilots the control and the essential factor on the first seed only
    assert with_pilot and without
    for run in mains:
        spec = specs[run.run_id]
        assert spec.steps == 60 and spec.until is None and spec.checkpoint_id is None
        assert spec.resume_step == (plan.pilot_steps if run in with_pilot else 0)
    assert {specs[r.run_id].variant for r in without} >= {"keep_pixels=32"}


def test_the_main_run_resumes_from_the_checkpoint_its_pilots_spec_committed(
    registered: tuple[Plan, list[PlannedRun], dict[str, RunSpec], Path],
) -> None:
    from ablations.workers.jobs import run_spec

    plan, runs, specs, out = registered
    pilot = next(r for r in runs if r.phase == "pilot" and r.variant == "control")
    assert pilot.continues is not None
    pilot_record = run_spec(specs[pilot.run_id])
    assert pilot_record.error is None and pilot_record.steps_done == plan.pilot_steps
    assert pilot_record.checkpoint.uri is not None
    assert pilot_record.checkpoint.uri.startswith(f"file://{out}/ckpt/tiny/{pilot.continues}/")

    main = run_spec(specs[pilot.continues])
    assert main.error is None and main.steps_done == plan.workload.steps
    assert main.checkpoint.resumed_from_step == plan.pilot_steps
    assert main.steps_trained == plan.workload.steps - plan.pilot_steps
