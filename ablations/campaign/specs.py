"""From a registered run to the spec a slot's worker executes."""

from __future__ import annotations

from ablations.campaign.folder import Registration
from ablations.plan.model import Plan
from ablations.plan.variants import PlannedRun
from ablations.run.records import RunSpec


def spec_for(plan: Plan, registration: Registration, run: PlannedRun) -> RunSpec:
    """The run spec of one registered run (device is filled in by the slot)."""
    return RunSpec(
        run_id=run.run_id,
        campaign_id=registration.campaign_id,
        plan_hash=registration.plan_hash,
        variant=run.variant,
        category=run.category,
        phase=run.phase,
        seed=run.seed,
        params=run.params,
        steps=run.length or run.steps,
        eval_every=plan.workload.eval_every,
        workload=plan.workload.entry,
        command=plan.workload.command,
        lightning=plan.workload.lightning,
        hf_trainer=plan.workload.hf_trainer,
        data_sha256=plan.workload.data_sha256,
        metric=plan.metric.name,
        direction=plan.metric.direction,
        threshold=plan.metric.threshold,
        stop_rules=plan.stop_rules,
        checkpoint=plan.checkpoint.in_folder(registration.out_dir),
        out_dir=registration.out_dir,
        until=run.steps if run.phase == "pilot" else None,
        checkpoint_id=run.continues,
        resume_step=run.start_step,
    )
