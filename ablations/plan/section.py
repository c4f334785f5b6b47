"""`Section`, the base of every plan section, and the value types sections share."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

ParamValue = int | float | bool | str
"""A workload parameter: YAML scalars only, so a plan stays a plain, hashable document."""

Category = Literal["essential", "useful", "exploratory"]
"""How much a variant matters to the decision; trimming drops the lowest first."""

Verdict = Literal[
    "better",
    "not worse",
    "worse",
    "equivalent",
    "inconclusive",
    "unstable",
    "fails threshold",
    "diverges",
    "input truncated",
    "not run",
    "failed",
]
"""What a campaign concluded about one variant (see `ablations.analysis.verdicts`). Defined
here, beside the plan, because `next_decisions` keys are verdicts; analysis re-exports it."""

DecisionRule = Literal["superiority", "non_inferiority", "equivalence"]
"""The question the effects answer: usefully better, not usefully worse, or interchangeable."""

MAX_COUNT = 10**9
"""The largest count any field takes (steps, seeds, inputs, an interval): far above a
campaign's, and a bound the plan meets before anything is built from it. Fields that size
something in memory (slots, batch sizes, checkpoints kept) have tighter bounds of their own."""
MAX_AMOUNT = 1e12
"""The largest duration, price or rate a field takes: past it a number is a typo."""

PositiveInt = Annotated[int, Field(gt=0, le=MAX_COUNT)]

PositiveFloat = Annotated[float, Field(gt=0, le=MAX_AMOUNT, allow_inf_nan=False)]

Amount = Annotated[float, Field(ge=0, le=MAX_AMOUNT, allow_inf_nan=False)]
"""A price, cost or duration that may be zero."""

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""`{name}` in a command argument: replaced by the run's parameter `name`."""


class Section(BaseModel):
    """Base of every plan section: unknown keys are refused and values are frozen."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, validate_default=True
    )


ParamLimits = Mapping[str, tuple[float, float]]
"""A workload's bounds on its numeric params, `name -> (lowest, highest)`: the sizes that
build something in memory (a layer's width, a batch), so a plan asking for `width: 100000000`
is refused at `ablate validate` and by the workload itself before anything is allocated."""


def outside_limits(name: str, value: ParamValue, limits: ParamLimits) -> str | None:
    """Why `value` of param `name` is outside the workload's `limits`, or None."""
    if name not in limits or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    low, high = limits[name]
    if low <= value <= high:
        return None
    return f"{name} must be in {low:g}..{high:g} (got {value:g})"


def same_value(a: ParamValue, b: ParamValue) -> bool:
    """Equality that keeps `True` and `1` apart (YAML users mean different things by them)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def shown(value: ParamValue) -> str:
    """A parameter value as variant names write it (`true`, `0.3`): the variant's identity,
    so two levels shown alike are one level."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def finite_params(params: dict[str, ParamValue]) -> dict[str, ParamValue]:
    bad = [k for k, v in params.items() if isinstance(v, float) and not math.isfinite(v)]
    if bad:
        raise ValueError(f"{bad[0]}: must be a finite number (got {params[bad[0]]})")
    return params
