"""`Section`, the base of every plan section, and the value types sections share."""

from __future__ import annotations

import math
import re
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

PositiveInt = Annotated[int, Field(gt=0)]

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""`{name}` in a command argument: replaced by the run's parameter `name`."""


class Section(BaseModel):
    """Base of every plan section: unknown keys are refused and values are frozen."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, validate_default=True
    )


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
