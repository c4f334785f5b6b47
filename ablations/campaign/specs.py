"""From a registered run to the spec a slot's worker executes."""

from __future__ import annotations

from pathlib import Path

from ablations.campaign.folder import Registration
from ablations.plan.model import Plan
from ablations.plan.variants import PlannedRun
from ablations.run.records import RunSpec


def spec_for(plan: Plan, registration: Registration, run: PlannedRun) -> RunSpec:
    """The run spec of one registered run (device is filled in by the slot)."""
    return RunSpec.of(
        plan,
        registration.plan_hash,
        run_id=run.run_id,
        variant=run.variant,
        category=run.category,
        phase=run.phase,
        seed=run.seed,
        params=run.params,
        steps=run.length or run.steps,
        checkpoint=plan.checkpoint.in_folder(registration.out_dir),
        out_dir=registration.out_dir,
        until=run.steps if run.phase == "pilot" else None,
        checkpoint_id=run.continues,
        resume_step=run.start_step,
        workdir=str(Path.cwd()),  # a command's relative paths: here, on whichever host runs it
    )
