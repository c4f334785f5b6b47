"""The ablation plan: one frozen pydantic model, its cross-field checks and its hash.

A plan is validated completely at construction; every problem is gathered and raised once as a
`PlanError` naming the dotted field path and the bad value. `load_plan` (in `plan_io`) reads
the YAML file; this module never touches the disk.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections import Counter
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from ablations.errors import CrossFieldError, PlanError, Problem
from ablations.plan.design import SeedsField, SequentialSeeds, look_sizes, seed_list
from ablations.plan.experiment import (
    CampaignSection,
    ControlSection,
    Factor,
    Interaction,
    MetricSection,
)
from ablations.plan.infrastructure import CheckpointSection, ProbeSection, ResourcesSection
from ablations.plan.offers import BudgetSection
from ablations.plan.rules import GateSection, PilotSection, StopRules
from ablations.plan.section import PLACEHOLDER, DecisionRule, ParamValue, Section, same_value
from ablations.plan.workload import WorkloadSection
from ablations.security.credentials import credential_problems

_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


DECISION_WORDS: tuple[tuple[DecisionRule, tuple[str, ...]], ...] = (
    (
        "non_inferiority",
        ("not usefully worse", "not worse", "no worse", "non-inferior", "noninferior"),
    ),
    ("equivalence", ("interchangeable", "equivalent", "equivalence")),
    ("superiority", ("usefully better", "better than", "improves", "outperform", "superior")),
)
"""Phrases of `campaign.decision` that name a decision rule, first match wins (so "not
worse" is read before "better")."""


class Plan(Section):
    """An ablation campaign plan, registered (frozen and hashed) before anything runs."""

    version: Literal[1] = 1
    """Plan format version."""
    campaign: CampaignSection
    """Campaign id, the question it answers and the decision that answer feeds."""
    workload: WorkloadSection = WorkloadSection()
    """The training code and shared parameters."""
    control: ControlSection = ControlSection()
    """The reference configuration."""
    factors: dict[str, Factor] = Field(min_length=1)
    """Parameter name -> the levels tried instead of the control's value, one at a time."""
    interactions: list[Interaction] = []
    """Declared combinations of factor levels, each run as one extra variant."""
    seeds: SeedsField
    """Paired seeds: every variant runs every seed it needs, so effects are paired
    differences. A list (e.g. [0, 1, 2]) is a fixed design judged once, after every seed; a
    sequential design (e.g. {start: 3, max: 12, looks: [3, 5, 8, 12]}) judges each variant at
    each look and gives more seeds only where the answer is still open. Either way, every
    claim holds at family-wise error `alpha` (0.05 for a list) across all variants and looks:
    repeated confidence intervals, alpha spent over the looks, corrected across variants."""
    metric: MetricSection
    """The metric, its quality threshold and the useful effect size."""
    stop_rules: StopRules = StopRules()
    """Stop rules, registered before anything runs."""
    pilot: PilotSection = PilotSection()
    """The pilot phase."""
    gate: GateSection = GateSection()
    """The decision gate after the pilot."""
    checkpoint: CheckpointSection = CheckpointSection()
    """The checkpoint store and interval policy."""
    resources: ResourcesSection = ResourcesSection()
    """Devices and slots."""
    budget: BudgetSection = BudgetSection()
    """The rented package and other costs."""
    probe: ProbeSection = ProbeSection()
    """`ablate probe`: batch sizes, steps per point and the memory margin."""

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: SeedsField) -> SeedsField:
        if not isinstance(seeds, list):
            return seeds
        if not seeds:
            raise ValueError("give at least 1 seed")
        duplicates = sorted(s for s, n in Counter(seeds).items() if n > 1)  # linear: 10^5 seeds
        if duplicates:
            raise ValueError(f"seeds must be distinct; repeated: {duplicates}")
        out_of_range = [s for s in seeds if not 0 <= s < 2**32]
        if out_of_range:
            raise ValueError(f"seeds must be in [0, 2**32); got {out_of_range}")
        return seeds

    @model_validator(mode="after")
    def _cross_field(self) -> Plan:
        problems = _cross_field_problems(self)
        if problems:
            raise CrossFieldError(problems)
        return self

    def control_value(self, name: str) -> ParamValue | None:
        """The control's value of a parameter: `control.params`, else `workload.params`."""
        if name in self.control.params:
            return self.control.params[name]
        return self.workload.params.get(name)

    @property
    def control_params(self) -> dict[str, ParamValue]:
        """Every parameter of the control run."""
        return {**self.workload.params, **self.control.params}

    @property
    def pilot_steps(self) -> int:
        """Pilot steps: the plan's, else a quarter of the main steps (one evaluation at least)."""
        if self.pilot.steps is not None:
            return self.pilot.steps
        quarter = self.workload.steps // 4
        return max(quarter, min(self.workload.eval_every, self.workload.steps))

    def pilot_warnings(self) -> list[str]:
        """Why the pilot may not be representative (valid, but worth a second look)."""
        steps, warnings = self.pilot_steps, []
        quality = self.stop_rules.quality
        if quality.enabled and steps < quality.warmup_steps:
            warnings.append(
                f"pilot.steps ({steps}) is below stop_rules.quality.warmup_steps "
                f"({quality.warmup_steps}): the pilot never meets the quality rule the main "
                "runs meet"
            )
        return warnings

    def pilot_problems(self) -> list[Problem]:
        """A pilot that ends before the first evaluation (`ablate validate`, `plan` and `run`
        refuse it; a registered plan still reads): its runs would be judged on an evaluation
        the main runs never make, and a program evaluating every `eval_every` steps reports
        none at all in it."""
        first = min(self.workload.eval_every, self.workload.steps)
        if self.pilot_steps >= first:
            return []
        message = (
            f"ends before the first evaluation (workload.eval_every {self.workload.eval_every}): "
            f"make it at least {first}"
        )
        return [Problem("pilot.steps", message, self.pilot_steps)]

    def decision_warnings(self) -> list[str]:
        """When `campaign.decision` reads as another rule than `metric.decision_rule` judges
        by (e.g. "cheapest ... not usefully worse" judged by superiority)."""
        text = " ".join(self.campaign.decision.lower().split())
        read = next((rule for rule, words in DECISION_WORDS if any(w in text for w in words)), None)
        rule = self.metric.decision_rule
        if read is None or read == rule:
            return []
        words = next(w for r, ws in DECISION_WORDS if r == read for w in ws if w in text)
        default = "" if "decision_rule" in self.metric.model_fields_set else " (the default)"
        return [
            f'campaign.decision reads as {read.replace("_", "-")} ("{words}") but '
            f"metric.decision_rule is {rule.replace('_', '-')}{default}: the variants are "
            f"judged by {rule.replace('_', '-')}. Set metric.decision_rule: {read}, or reword "
            "campaign.decision"
        ]

    @property
    def pilot_seeds(self) -> list[int]:
        """Seeds of the pilot: the plan's, else the first registered seed."""
        return list(self.pilot.seeds) if self.pilot.seeds else [self.seed_list[0]]

    @property
    def seed_list(self) -> list[int]:
        """Every seed the plan may run, in order (a sequential design's up to its `max`)."""
        return seed_list(self.seeds)

    @property
    def look_sizes(self) -> tuple[int, ...]:
        """Cumulative seeds per variant at each look (one look for a list of seeds)."""
        return look_sizes(self.seeds)

    @property
    def sequential(self) -> SequentialSeeds | None:
        """The sequential design, or None for a fixed list of seeds."""
        return self.seeds if isinstance(self.seeds, SequentialSeeds) else None


def _cross_field_problems(plan: Plan) -> list[Problem]:
    problems: list[Problem] = []
    for name, factor in plan.factors.items():
        path = f"factors.{name}"
        if not _PARAM_NAME.fullmatch(name):
            problems.append(Problem(path, "factor names are parameter names (identifiers)", name))
            continue
        control = plan.control_value(name)
        if control is None:
            problems.append(
                Problem(path, f"no control value: set control.params.{name}", None, False)
            )
            continue
        for i, level in enumerate(factor.levels):
            if same_value(level.value, control):
                problems.append(
                    Problem(
                        f"{path}.levels[{i}].value",
                        "equals the control's value, so it would change nothing",
                        level.value,
                    )
                )
    for i, interaction in enumerate(plan.interactions):
        for name, value in interaction.set.items():
            path = f"interactions[{i}].set.{name}"
            target = plan.factors.get(name)
            if target is None:
                problems.append(Problem(path, f"unknown factor; factors are {list(plan.factors)}"))
            elif not any(same_value(level.value, value) for level in target.levels):
                levels = [level.value for level in target.levels]
                problems.append(Problem(path, f"not a level of this factor {levels}", value))
    parameters = {*plan.workload.params, *plan.control.params, *plan.factors}
    placed: list[tuple[str, ParamValue]] = [
        (f"workload.command[{i}]", a) for i, a in enumerate(plan.workload.command or [])
    ]
    if plan.workload.lightning is not None:
        trainer = plan.workload.lightning.trainer
        placed += [(f"workload.lightning.trainer.{k}", v) for k, v in trainer.items()]
    for path, argument in placed:
        for name in PLACEHOLDER.findall(argument) if isinstance(argument, str) else []:
            if name not in parameters:
                problems.append(
                    Problem(
                        path,
                        f"{{{name}}} is no parameter; parameters are {sorted(parameters)}",
                        argument,
                    )
                )
    pilot_steps = plan.pilot.steps
    if pilot_steps is not None and pilot_steps > plan.workload.steps:
        problems.append(
            Problem(
                "pilot.steps", f"longer than workload.steps ({plan.workload.steps})", pilot_steps
            )
        )
    if plan.pilot.variants is not None:
        from ablations.plan.variants import variant_names

        known = variant_names(plan.factors, plan.interactions)
        names = set(known)
        for i, name in enumerate(plan.pilot.variants):
            if name not in names:
                hint = _closest(name, known)
                problems.append(Problem(f"pilot.variants[{i}]", f"unknown variant{hint}", name))
    if plan.pilot.seeds is not None and len(set(plan.pilot.seeds)) != len(plan.pilot.seeds):
        problems.append(Problem("pilot.seeds", "seeds must be distinct", plan.pilot.seeds))
    if plan.pilot.seeds is not None:
        first_batch = set(plan.seed_list[: plan.look_sizes[0]])
        outside = [s for s in plan.pilot.seeds if s not in first_batch]
        if outside:
            where = "registered `seeds`" if plan.sequential is None else "the first look's seeds"
            problems.append(Problem("pilot.seeds", f"pilot seeds must be {where}", outside))
    return problems


OUTSIDE_THE_HASH: dict[str, Any] = {"workload": {"report_timeout_seconds"}}
"""Plan fields that limit how the work runs, not what it is: changed, the folder takes the
plan as the same campaign (a hung preflight's limit raised, then the same command rerun)."""


def plan_hash(plan: Plan) -> str:
    """sha256 of the plan's canonical JSON: independent of key order, comments and YAML style,
    and of the fields `OUTSIDE_THE_HASH`."""
    data = plan.model_dump(mode="json", exclude=OUTSIDE_THE_HASH)
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


PLAN_KEYS = ("campaign", "factors", "seeds", "metric")
"""The keys every plan has: a mapping with none of them is some other file, not a plan."""


def parse_plan(data: Any, source: str | None = None, *, size: int | None = None) -> Plan:
    """Validate plain data (from YAML or JSON) into a `Plan`, raising one `PlanError`.

    Data that is not a plan at all (text, a list, a mapping with none of a plan's keys: a
    private note given by mistake) is said to be so, with its size (`size` bytes, when the
    caller read it), and none of its content is quoted: the error line may reach a terminal,
    a flow run's state message and a notification."""
    if data is None:
        raise PlanError([Problem("", "the plan is empty", show_value=False)], source)
    if not isinstance(data, dict):
        what = _kind_of(data) + ("" if size is None else f", {size} bytes")
        message = f"not a YAML mapping ({what}): not a plan"
        raise PlanError([Problem("", message, show_value=False)], source)
    if not any(key in data for key in PLAN_KEYS):
        message = (
            f"a YAML mapping{'' if size is None else f' of {size} bytes'} with none of a "
            f"plan's keys ({', '.join(PLAN_KEYS)}): not a plan"
        )
        raise PlanError([Problem("", message, show_value=False)], source)
    leaked = credential_problems(data)  # alone: a type error beside them would quote a value
    if leaked:
        raise PlanError(leaked, source)
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise PlanError(problems_from(exc), source) from exc


def _kind_of(data: object) -> str:
    """What top-level YAML data is, in words (never its content)."""
    if isinstance(data, str):
        return "text"
    if isinstance(data, list):
        return f"a list of {len(data)} items"
    return f"a {type(data).__name__} value"


def problems_from(exc: ValidationError) -> list[Problem]:
    """Turn pydantic's errors into problems with dotted paths and 'did you mean' hints."""
    problems: list[Problem] = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        original = (error.get("ctx") or {}).get("error")
        if isinstance(original, CrossFieldError):
            problems.extend(original.problems)
            continue
        path = dotted(loc)
        if error["type"] == "extra_forbidden":
            known = _fields_at(loc[:-1]) or []
            hint = _closest(str(loc[-1]), known)
            problems.append(Problem(path, f"unknown key{hint}", show_value=False))
            continue
        message = error["msg"].removeprefix("Value error, ")
        problems.append(Problem(path, message, error.get("input"), error["type"] != "missing"))
    return problems


def dotted(loc: tuple[Any, ...]) -> str:
    """('factors', 'width', 'levels', 0) -> 'factors.width.levels[0]'."""
    out = ""
    for part in loc:
        if isinstance(part, str) and "[" in part and not part.startswith("["):
            continue  # a union member's label (`list[int]`, `function-after[...]`), no field
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _closest(name: str, known: list[str]) -> str:
    match = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if match:
        return f"; did you mean {match[0]!r}?"
    return f"; expected one of {known}" if known else ""


def _as_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, getattr(__import__("types"), "UnionType", Union)):
        for arg in get_args(annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                return arg
    return None


def _fields_at(loc: tuple[Any, ...]) -> list[str] | None:
    """Field names of the model found at `loc` inside a Plan, for suggestions."""
    current: Any = Plan
    for part in loc:
        model = _as_model(current)
        if model is not None:
            field = model.model_fields.get(str(part))
            if field is None:
                return None
            current = field.annotation
        elif get_origin(current) in (list, dict):
            current = get_args(current)[-1]
        else:
            return None
    model = _as_model(current)
    return list(model.model_fields) if model else None
