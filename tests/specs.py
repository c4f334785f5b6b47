"""Run specs for tests that run a workload without a plan.

A campaign's spec carries the plan's sections whole (`RunSpec.of`); a test of the driver, a
worker or a store needs only the few fields it sets. `bare_spec` builds those sections from
them (every other field at the plan's default), so each test names what it is about."""

from __future__ import annotations

from typing import Any, Literal

from ablations.plan.experiment import MetricSection
from ablations.plan.section import Category
from ablations.plan.variants import Phase
from ablations.plan.workload import LightningSection, WorkloadSection
from ablations.run.records import RunSpec

DIGITS = "ablations.workloads.digits:DigitsWorkload"


def bare_spec(
    *,
    entry: str = DIGITS,
    eval_every: int = 50,
    metric: str = "accuracy",
    direction: Literal["maximize", "minimize"] = "maximize",
    threshold: float = 0.0,
    command: list[str] | None = None,
    lightning: LightningSection | None = None,
    hf_trainer: str | None = None,
    data_sha256: str | None = None,
    run_id: str = "control-s0-0123456789",
    campaign_id: str = "c",
    plan_hash: str = "h",
    variant: str = "control",
    category: Category = "essential",
    phase: Phase = "main",
    seed: int = 0,
    **run: Any,
) -> RunSpec:
    """A spec of the workload `entry` (or `command`, `lightning`, `hf_trainer`) judged on
    `metric`; `run` holds the rest of the run's own fields (`params`, `steps`, `checkpoint`,
    `out_dir`, `until`, `device`...)."""
    adapter = {"command": command, "lightning": lightning, "hf_trainer": hf_trainer}
    given = {name: value for name, value in adapter.items() if value is not None}
    workload = WorkloadSection(
        **({} if given else {"entry": entry}),
        **given,
        eval_every=eval_every,
        data_sha256=data_sha256,
    )
    judged = MetricSection(
        name=metric, direction=direction, threshold=threshold, useful_effect=0.01
    )
    return RunSpec(
        run_id=run_id,
        campaign_id=campaign_id,
        plan_hash=plan_hash,
        variant=variant,
        category=category,
        phase=phase,
        seed=seed,
        workload=workload,
        metric=judged,
        **run,
    )
