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
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ablations.plan.experiment import Factor, Interaction
from ablations.plan.section import Category, ParamValue, shown

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
    look: int = 0
    """The look (0-based) whose batch of seeds holds this run: it runs only while its variant
    is still open at that look (a fixed list of seeds has one look)."""

    @property
    def trained_steps(self) -> int:
        """Steps this run itself trains (a main run's pilot trained the ones before)."""
        return self.steps - self.start_step


def variant_name(overrides: dict[str, ParamValue]) -> str:
    """A variant's name from what it sets: `lr=0.01`, `lr=0.01+width=64` (an interaction)."""
    return "+".join(f"{k}={shown(v)}" for k, v in overrides.items())


def variant_names(factors: dict[str, Factor], interactions: list[Interaction]) -> list[str]:
    """Names of every variant of a plan with these factors and interactions (in `variants`
    order, without building them)."""
    names = [CONTROL]
    names += [variant_name({n: level.value}) for n, f in factors.items() for level in f.levels]
    return names + [variant_name(dict(interaction.set)) for interaction in interactions]


_UNSAFE = re.compile(r"[^A-Za-z0-9._]+")


def run_id(
    plan_hash: str,
    params: dict[str, ParamValue],
    seed: int,
    steps: int,
    prefix: str,
    until: int | None = None,
    *,
    params_json: str | None = None,
) -> str:
    """`<prefix>-s<seed>-<10 hex>`: safe in paths and S3 keys, stable, changed by any value.

    `until`: a pilot's last step (the prefix of a run of `steps` steps). `params_json` is
    `params` already rendered by `_ParamsJson` (the same bytes, made once per variant instead
    of once per run)."""
    if params_json is None:
        identity: dict[str, object] = {
            "plan": plan_hash,
            "params": params,
            "seed": seed,
            "steps": steps,
        }
        if until is not None:
            identity["until"] = until
        payload = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    else:  # json.dumps's sorted keys: params, plan, seed, steps, until
        payload = (
            f'{{"params":{params_json},"plan":{json.dumps(plan_hash)},'
            f'"seed":{json.dumps(seed)},"steps":{json.dumps(steps)}'
            + (f',"until":{json.dumps(until)}' if until is not None else "")
            + "}"
        )
    digest = hashlib.sha256(payload.encode()).hexdigest()[:10]
    slug = _UNSAFE.sub("-", prefix).strip("-.")[:48] or "run"
    return f"{slug}-s{seed}-{digest}"
