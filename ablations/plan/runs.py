"""The runs a plan defines: its variants, their planned runs in registration order (ids, phases,
seeds), and the caps on how many."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ablations.errors import PlanError, Problem
from ablations.plan.section import ParamValue
from ablations.plan.variants import (
    CONTROL,
    Phase,
    PlannedRun,
    Variant,
    run_id,
    variant_name,
    variant_names,
)
from ablations.security.limits import MAX_RUNS_ENV, MAX_STEPS_ENV, process_limits

if TYPE_CHECKING:
    from ablations.plan.model import Plan


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
                    name=variant_name(overrides),
                    category=factor.category_of(level),
                    overrides=overrides,
                    params={**base, **overrides},
                )
            )
    for interaction in plan.interactions:
        overrides = dict(interaction.set)
        out.append(
            Variant.model_construct(
                name=variant_name(overrides),
                category=interaction.category,
                overrides=overrides,
                params={**base, **overrides},
            )
        )
    return out


def cost_warnings(plan: Plan, *, shown: int = 4) -> list[str]:
    """What the decision does with the costs the plan declares (`control.cost`, each level's
    `cost`), when that is not what declaring them suggests: some declared but not all (the
    non-inferiority rule then compares every candidate by measured step time, the declared
    costs set aside), or costs under a rule that compares none."""
    declared = [CONTROL] if plan.control.cost is not None else []
    missing = [] if declared else [CONTROL]
    for name, factor in plan.factors.items():
        for level in factor.levels:
            named = variant_name({name: level.value})
            (declared if level.cost is not None else missing).append(named)
    missing += [variant_name(dict(i.set)) for i in plan.interactions]  # no cost of their own
    if not declared:
        return []
    rule = plan.metric.decision_rule
    if rule != "non_inferiority":
        return [
            f"costs are declared ({', '.join(declared[:shown])}), but metric.decision_rule "
            f"{rule.replace('_', '-')} compares no costs: only non-inferiority names the "
            "cheapest variant not usefully worse"
        ]
    if not missing:
        return []
    more = f" and {len(missing) - shown} more" if len(missing) > shown else ""
    return [
        f"costs are declared for {len(declared)} of {len(declared) + len(missing)} variants "
        f"(the control counted), not for {', '.join(missing[:shown])}{more}: whenever one of "
        "those is among the variants not usefully worse, the decision compares them all by "
        "measured step time (the median over accepted main runs), not by the declared costs. "
        "Declare a cost for the control and every level, or none"
    ]


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
    """`PlanError` when the plan asks for more than this process allows
    (`ablations.security.limits`): more runs than the cap (the process's, or the plan's own
    `resources.max_runs` when lower), counted arithmetically before a single run is built (a few
    kilobytes of YAML can declare millions); or runs longer than the steps cap."""
    limits = process_limits()
    problems: list[Problem] = []
    if variant_count is None:
        variant_count = len(variant_names(plan.factors, plan.interactions))
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
