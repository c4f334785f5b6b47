"""Variants (the control, one factor at a time, declared interactions) and the registered runs.

A run id is a readable prefix plus a short hash of (plan hash, variant parameters, seed,
steps): a changed configuration gets a new id by construction.

A pilot run is the prefix of its main run: the same variant, seed and configuration (its
workload is built with the main `steps`, so schedules see the real length), trained to
`pilot.steps`. It keeps its checkpoints under the main run's id (`continues`), and that main
run resumes from them (`start_step`) instead of training those steps again.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from ablations.plan_sections import CATEGORY_RANK, Category, ParamValue

if TYPE_CHECKING:
    from ablations.plan import Plan

Phase = Literal["pilot", "main"]
CONTROL = "control"


class Variant(BaseModel):
    """The control, or the control with one factor (or a declared interaction) changed."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Readable name: `control`, `width=16`, `width=16+dropout=0.3`."""
    category: Category
    """essential, useful or exploratory (the control is essential)."""
    overrides: dict[str, ParamValue]
    """What differs from the control."""
    params: dict[str, ParamValue]
    """Every parameter the workload receives."""

    @property
    def factor(self) -> str | None:
        """The factor changed ('+'-joined for an interaction; None for the control)."""
        return "+".join(self.overrides) or None

    @property
    def level(self) -> ParamValue | None:
        """The level set, for a one-factor variant."""
        return next(iter(self.overrides.values())) if len(self.overrides) == 1 else None


class PlannedRun(BaseModel):
    """One variant on one seed in one phase: what is registered, before anything runs."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    variant: str
    factor: str | None
    level: ParamValue | None
    seed: int
    category: Category
    phase: Phase
    steps: int
    """The last step this run trains to: `pilot.steps` for a pilot, `workload.steps` else."""
    params: dict[str, ParamValue]
    length: int = 0
    """The run's length as its workload sees it (`workload.steps`, also for a pilot)."""
    start_step: int = 0
    """A main run whose pilot trains its first steps resumes there (`pilot.steps`); else 0."""
    pilot: str | None = None
    """A main run: the pilot run that trains its first `start_step` steps."""
    continues: str | None = None
    """A pilot: the main run whose first `steps` steps it trains. Its checkpoints are kept
    under that run's id, so the main run resumes where the pilot ended."""

    @property
    def trained_steps(self) -> int:
        """Steps this run itself trains (a main run's pilot trained the ones before)."""
        return self.steps - self.start_step


def _name(overrides: dict[str, ParamValue]) -> str:
    return "+".join(f"{k}={_show(v)}" for k, v in overrides.items())


def _show(value: ParamValue) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def variants(plan: Plan) -> list[Variant]:
    """The control first, then each factor's levels in plan order, then the interactions."""
    base = plan.control_params
    out = [Variant(name=CONTROL, category="essential", overrides={}, params=base)]
    for name, factor in plan.factors.items():
        for level in factor.levels:
            overrides = {name: level.value}
            out.append(
                Variant(
                    name=_name(overrides),
                    category=factor.category_of(level),
                    overrides=overrides,
                    params={**base, **overrides},
                )
            )
    for interaction in plan.interactions:
        overrides = dict(interaction.set)
        out.append(
            Variant(
                name=_name(overrides),
                category=interaction.category,
                overrides=overrides,
                params={**base, **overrides},
            )
        )
    return out


def variant_names(plan: Plan) -> list[str]:
    """Names of every variant of the plan."""
    return [v.name for v in variants(plan)]


_UNSAFE = re.compile(r"[^A-Za-z0-9._]+")


def run_id(
    plan_hash: str,
    params: dict[str, ParamValue],
    seed: int,
    steps: int,
    prefix: str,
    until: int | None = None,
) -> str:
    """`<prefix>-s<seed>-<10 hex>`: safe in paths and S3 keys, stable, changed by any value.

    `until`: a pilot's last step (the prefix of a run of `steps` steps)."""
    identity = {"plan": plan_hash, "params": params, "seed": seed, "steps": steps}
    if until is not None:
        identity["until"] = until
    payload = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(payload.encode()).hexdigest()[:10]
    slug = _UNSAFE.sub("-", prefix).strip("-.")[:48] or "run"
    return f"{slug}-s{seed}-{digest}"


_PLANNED: dict[str, tuple[PlannedRun, ...]] = {}
"""Runs by plan hash: a campaign asks for its runs once per task, the answer never changes."""


def planned_runs(plan: Plan, plan_hash: str) -> list[PlannedRun]:
    """Every registered run: the pilot's first, then the main phase (every variant x seed)."""
    known = _PLANNED.get(plan_hash)
    if known is None:
        known = _PLANNED[plan_hash] = tuple(_planned_runs(plan, plan_hash))
    return list(known)


def _planned_runs(plan: Plan, plan_hash: str) -> list[PlannedRun]:
    all_variants = variants(plan)
    pilot_names = set(
        plan.pilot.variants or [v.name for v in all_variants if v.category == "essential"]
    )
    pilot_names.add(CONTROL)  # the gate judges the pilot against the control: it always runs
    steps, until = plan.workload.steps, plan.pilot_steps

    def planned(variant: Variant, seed: int, phase: Phase, **fields: object) -> PlannedRun:
        return PlannedRun.model_validate(
            {
                "variant": variant.name,
                "factor": variant.factor,
                "level": variant.level,
                "seed": seed,
                "category": variant.category,
                "phase": phase,
                "params": variant.params,
                "length": steps,
                **fields,
            }
        )

    def main_id(variant: Variant, seed: int) -> str:
        return run_id(plan_hash, variant.params, seed, steps, variant.name)

    pilots = [
        planned(
            variant,
            seed,
            "pilot",
            run_id=run_id(plan_hash, variant.params, seed, steps, f"pilot-{variant.name}", until),
            steps=until,
            continues=main_id(variant, seed),
        )
        for variant in all_variants
        if variant.name in pilot_names
        for seed in plan.pilot_seeds
    ]
    pilot_of = {run.continues: run.run_id for run in pilots}
    mains = []
    for variant in all_variants:
        for seed in plan.seeds:
            identity = main_id(variant, seed)
            pilot = pilot_of.get(identity)
            mains.append(
                planned(
                    variant,
                    seed,
                    "main",
                    run_id=identity,
                    steps=steps,
                    start_step=until if pilot else 0,
                    pilot=pilot,
                )
            )
    return pilots + mains


def by_category(runs: list[PlannedRun]) -> list[PlannedRun]:
    """Runs ordered essential first, exploratory last (stable within a category)."""
    return sorted(runs, key=lambda r: CATEGORY_RANK[r.category])
