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

from ablations.errors import PlanError, Problem
from ablations.limits import MAX_RUNS_ENV, MAX_STEPS_ENV, process_limits
from ablations.plan.sections import Category, ParamValue, shown

if TYPE_CHECKING:
    from ablations.plan.model import Plan

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


def _name(overrides: dict[str, ParamValue]) -> str:
    return "+".join(f"{k}={shown(v)}" for k, v in overrides.items())


def variants(plan: Plan) -> list[Variant]:
    """The control first, then each factor's levels in plan order, then the interactions."""
    base = plan.control_params
    # model_construct: the plan validated every value already, and validating each variant's
    # full parameter dict again would cost variants x parameters (quadratic in the factors).
    out = [Variant.model_construct(name=CONTROL, category="essential", overrides={}, params=base)]
    for name, factor in plan.factors.items():
        for level in factor.levels:
            overrides = {name: level.value}
            out.append(
                Variant.model_construct(
                    name=_name(overrides),
                    category=factor.category_of(level),
                    overrides=overrides,
                    params={**base, **overrides},
                )
            )
    for interaction in plan.interactions:
        overrides = dict(interaction.set)
        out.append(
            Variant.model_construct(
                name=_name(overrides),
                category=interaction.category,
                overrides=overrides,
                params={**base, **overrides},
            )
        )
    return out


def variant_names(plan: Plan) -> list[str]:
    """Names of every variant of the plan (in `variants` order, without building them)."""
    names = [CONTROL]
    names += [_name({n: level.value}) for n, f in plan.factors.items() for level in f.levels]
    return names + [_name(dict(interaction.set)) for interaction in plan.interactions]


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


class _ParamsJson:
    """Renders variants' parameters as `json.dumps(sort_keys=True)` does, from the control's
    parameters rendered once: each variant only swaps in its overrides, so a plan of 10^4
    factors does not serialize 10^4 x 10^4 values one by one."""

    def __init__(self, base: dict[str, ParamValue]) -> None:
        self._keys = sorted(base)
        self._at = {key: i for i, key in enumerate(self._keys)}
        self._pieces = [self._piece(key, base[key]) for key in self._keys]

    @staticmethod
    def _piece(key: str, value: ParamValue) -> str:
        return f"{json.dumps(key)}:{json.dumps(value)}"

    def render(self, variant: Variant) -> str | None:
        """The variant's params as JSON, or None when an override is not a control key."""
        pieces = self._pieces.copy()
        for key, value in variant.overrides.items():
            if key not in self._at:
                return None
            pieces[self._at[key]] = self._piece(key, value)
        return "{" + ",".join(pieces) + "}"


def require_caps(plan: Plan, variant_count: int | None = None) -> None:
    """`PlanError` when the plan asks for more than this process allows (`ablations.limits`):
    more runs than the cap (the process's, or the plan's own `resources.max_runs` when
    lower), counted arithmetically before a single run is built (a few kilobytes of YAML can
    declare millions); or runs longer than the steps cap."""
    limits = process_limits()
    problems: list[Problem] = []
    if variant_count is None:
        variant_count = len(variant_names(plan))
    seeds = plan.look_sizes[-1]  # a sequential design registers every seed up to its max
    count = variant_count * seeds
    own = plan.resources.max_runs
    if own is not None and own < limits.max_runs and count > own:
        message = (
            f"the plan declares {count} runs ({variant_count} variants x {seeds} seeds), "
            f"above its own resources.max_runs ({own})"
        )
        problems.append(Problem("resources.max_runs", message, show_value=False))
    elif count > limits.max_runs:
        message = (
            f"the plan declares {count} runs ({variant_count} variants x {seeds} seeds), "
            f"above the {limits.max_runs} runs this process allows (its operator sets the cap "
            f"with --max-runs or {MAX_RUNS_ENV}; a plan's resources.max_runs may only lower it)"
        )
        problems.append(Problem("seeds", message, show_value=False))
    if plan.workload.steps > limits.max_steps:
        message = (
            f"{plan.workload.steps} steps per run, above the {limits.max_steps} this process "
            f"allows (--max-steps or {MAX_STEPS_ENV})"
        )
        problems.append(Problem("workload.steps", message, show_value=False))
    if problems:
        raise PlanError(problems)


def planned_runs(plan: Plan, plan_hash: str) -> list[PlannedRun]:
    """Every registered run: the pilot's first, then the main phase (every variant x seed).
    Built at each call: a campaign builds its runs once (`Campaign.load`) and passes them on."""
    all_variants = variants(plan)
    require_caps(plan, len(all_variants))
    pilot_names = set(
        plan.pilot.variants or [v.name for v in all_variants if v.category == "essential"]
    )
    pilot_names.add(CONTROL)  # the gate judges the pilot against the control: it always runs
    length, until = plan.workload.steps, plan.pilot_steps
    renderer = _ParamsJson(plan.control_params)
    pilot_seeds = set(plan.pilot_seeds)  # a subset of `seeds` (the plan validates it)
    sizes = plan.look_sizes
    look_at = [next(k for k, size in enumerate(sizes) if i < size) for i in range(sizes[-1])]

    def planned(
        variant: Variant,
        seed: int,
        phase: Phase,
        identity: str,
        steps: int,
        start_step: int = 0,
        pilot: str | None = None,
        continues: str | None = None,
        look: int = 0,
    ) -> PlannedRun:
        # model_construct: every value comes from the validated plan (see `variants`)
        return PlannedRun.model_construct(
            run_id=identity,
            steps=steps,
            start_step=start_step,
            pilot=pilot,
            continues=continues,
            variant=variant.name,
            factor=variant.factor,
            level=variant.level,
            seed=seed,
            category=variant.category,
            phase=phase,
            params=variant.params,
            length=length,
            look=look,
        )

    pilots: list[PlannedRun] = []
    mains: list[PlannedRun] = []
    for variant in all_variants:
        rendered = renderer.render(variant)  # one variant's at a time: they add up to GBs
        for index, seed in enumerate(plan.seed_list):
            identity = run_id(
                plan_hash, variant.params, seed, length, variant.name, params_json=rendered
            )
            pilot = None
            if variant.name in pilot_names and seed in pilot_seeds:
                pilot = run_id(
                    plan_hash,
                    variant.params,
                    seed,
                    length,
                    f"pilot-{variant.name}",
                    until,
                    params_json=rendered,
                )
                pilots.append(
                    planned(
                        variant,
                        seed,
                        "pilot",
                        pilot,
                        steps=until,
                        continues=identity,
                        look=look_at[index],
                    )
                )
            mains.append(
                planned(
                    variant,
                    seed,
                    "main",
                    identity,
                    steps=length,
                    start_step=until if pilot else 0,
                    pilot=pilot,
                    look=look_at[index],
                )
            )
    return pilots + mains
