"""What a campaign compares, on what, judged how: the campaign, control, factors and their levels,
interactions and the metric."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ablations.plan.section import (
    Amount,
    Category,
    DecisionRule,
    ParamValue,
    PositiveFloat,
    Section,
    Verdict,
    finite_params,
    same_value,
    shown,
)

_CAMPAIGN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class CampaignSection(Section):
    """What the campaign is for."""

    id: str
    """Campaign id: letters, digits, `.`, `_`, `-` (max 64). Used in folder and store paths."""
    question: str = Field(min_length=1)
    """The question the campaign answers, in one sentence."""
    decision: str = Field(min_length=1)
    """The decision the answer feeds (what you will do differently depending on the result)."""
    hypothesis: str | None = None
    """What you expect the campaign to show, written before it runs (kept in the report)."""
    next_decisions: dict[Verdict, str] = {}
    """Verdict -> what you will do when a variant gets it (e.g. `worse: keep the control`);
    the default for every factor, which may override entries with its own `next_decisions`."""

    @field_validator("id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        if not _CAMPAIGN_ID.fullmatch(value) or ".." in value:
            raise ValueError(
                "must be 1-64 characters of letters, digits, '.', '_' or '-', starting with a "
                "letter or digit and without '..', so it cannot escape the output folder"
            )
        return value


class ControlSection(Section):
    """The reference configuration every variant is compared against."""

    params: dict[str, ParamValue] = {}
    """Parameters of the control, on top of `workload.params`. Each factor's control value
    is taken from here (or from `workload.params`)."""
    cost: Amount | None = None
    """The control's cost in the unit the levels' `cost` uses (see `Level.cost`)."""

    _finite = field_validator("params")(finite_params)


class Level(Section):
    """One level of a factor."""

    value: ParamValue
    """The parameter value this level sets."""
    category: Category | None = None
    """Category of this level's variant; defaults to the factor's category."""
    cost: Amount | None = None
    """What this level's variant costs, in any unit shared by the plan (parameters, USD per
    run, seconds per step). Used by the non-inferiority rule to name the cheapest variant
    not usefully worse; when a candidate or the control lacks one, the median measured
    step time of the accepted main runs is used for all instead."""
    next_decisions: dict[Verdict, str] = {}
    """Verdict -> what you will do when this level gets it (e.g. `not worse: use width 16`);
    overrides the same verdict in the factor's and the campaign's `next_decisions`."""

    @field_validator("value")
    @classmethod
    def _finite_value(cls, value: ParamValue) -> ParamValue:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class Factor(Section):
    """One thing changed at a time: a parameter and the levels it takes instead of the control's."""

    levels: list[Level] = Field(min_length=1)
    """Levels to try; a bare scalar is shorthand for `{value: scalar}`."""
    category: Category | None = None
    """Category of every level that does not set its own."""
    hypothesis: str | None = None
    """What you expect changing this parameter to do, written before the campaign runs."""
    next_decisions: dict[Verdict, str] = {}
    """Verdict -> what you will do when a level of this factor gets it (e.g. `worse: keep
    width 64`), for each level the verdict is about: `{value}` stands for that level's value
    (`not worse: use width {value}`). Overrides the same verdict in
    `campaign.next_decisions`; a level's own `next_decisions` override it."""

    @field_validator("levels", mode="before")
    @classmethod
    def _scalar_levels(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [item if isinstance(item, dict) else {"value": item} for item in value]
        return value

    @model_validator(mode="after")
    def _levels_are_distinct_and_categorized(self) -> Factor:
        first: dict[str, int] = {}  # by shown value: the variant name is the identity
        for i, level in enumerate(self.levels):
            other = self.levels[first.setdefault(shown(level.value), i)].value
            if first[shown(level.value)] != i:
                same = "duplicate level" if same_value(other, level.value) else "levels"
                raise ValueError(
                    f"{same} {other!r} and {level.value!r} name the same variant "
                    f"(={shown(level.value)}); keep one"
                )
            if level.category is None and self.category is None:
                raise ValueError(
                    f"level {level.value!r} has no category: set the factor's `category` "
                    "or the level's own (essential, useful or exploratory)"
                )
        return self

    def category_of(self, level: Level) -> Category:
        """The level's category, falling back to the factor's."""
        category = level.category or self.category
        assert category is not None  # guaranteed by validation
        return category


class Interaction(Section):
    """A declared combination of factor levels, run as one extra variant."""

    set: dict[str, ParamValue] = Field(min_length=2)
    """Factor name -> one of its levels, for two or more factors."""
    category: Category = "exploratory"
    """Category of the interaction variant."""

    _finite = field_validator("set")(finite_params)


class MetricSection(Section):
    """The quality metric the decision is made on."""

    name: str = "accuracy"
    """Name of the metric the workload's `evaluate` returns."""
    direction: Literal["maximize", "minimize"] = "maximize"
    """Whether larger or smaller values are better."""
    threshold: float = Field(allow_inf_nan=False)
    """Quality threshold: a run below it (after the warm-up) is stopped or rejected."""
    useful_effect: PositiveFloat
    """Smallest paired difference from the control worth acting on, in metric units."""
    decision_rule: DecisionRule = "superiority"
    """The question the paired 95% intervals answer, against the band [-useful_effect,
    +useful_effect]: `superiority` (is a variant usefully better? adopt the best one),
    `non_inferiority` (is it not usefully worse? adopt the cheapest such one, see
    `Level.cost`) or `equivalence` (is it interchangeable with the control, inside the band?)."""

    def meets_threshold(self, value: float) -> bool:
        """Whether a metric value reaches the quality threshold."""
        return meets_threshold(value, self.direction, self.threshold)


def meets_threshold(
    value: float, direction: Literal["maximize", "minimize"], threshold: float
) -> bool:
    """`MetricSection.meets_threshold` for a run spec: a non-finite value never meets it."""
    if not math.isfinite(value):
        return False
    return value >= threshold if direction == "maximize" else value <= threshold
