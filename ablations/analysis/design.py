"""A sequential design: looks at growing seed counts, alpha/m spent over them per variant.

`ablations.analysis.sequential` documents the method; `spending` the spending functions and
the group-sequential boundaries.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import pairwise

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from ablations.analysis.spending import Spending, nominal_errors, spent_by_look


class LookBoundary(BaseModel):
    """What one look may spend, and the level each variant's interval uses there."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    look: int
    """0-based index of the look."""
    seeds: int
    """Cumulative seeds per variant at this look."""
    fraction: float
    """Share of the maximum seeds run by this look (the information fraction)."""
    alpha_spent: float
    """Family-wise error spent up to and including this look."""
    level: float
    """Confidence level of each variant's two-sided interval here: one minus the nominal
    error of the group-sequential boundary that spends alpha / m over the looks."""


class LookDesign(BaseModel):
    """Looks at growing seed counts, with the family-wise error spent over them."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    looks: tuple[int, ...]
    """Cumulative seeds per variant at each look, increasing; the last is the maximum."""
    alpha: float = 0.05
    """Family-wise error rate across all variants and all looks."""
    spending: Spending = "obrien_fleming"
    """How alpha is spent over the looks: `obrien_fleming` (little early, most at the last
    look), `pocock` (evenly in seeds) or `equal` (the same share at each look)."""
    comparisons: int
    """Number of variants compared with the control (m); alpha is divided among them."""

    @field_validator("looks")
    @classmethod
    def _increasing(cls, looks: tuple[int, ...]) -> tuple[int, ...]:
        if not looks or looks[0] < 1 or any(b <= a for a, b in pairwise(looks)):
            raise ValueError(f"looks must be positive seed counts, increasing; got {list(looks)}")
        return looks

    @model_validator(mode="after")
    def _ranges(self) -> LookDesign:
        problems = []
        if not 0.0 < self.alpha < 1.0:
            problems.append(f"alpha must be between 0 and 1, got {self.alpha}")
        if self.comparisons < 1:
            problems.append(f"comparisons must be at least 1, got {self.comparisons}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def max_seeds(self) -> int:
        """Seeds per variant at the last look."""
        return self.looks[-1]

    def boundary(self, look: int) -> LookBoundary:
        """The boundary of `look` (0-based)."""
        return _boundaries(self.looks, self.alpha, self.spending, self.comparisons)[look]


@lru_cache(maxsize=256)
def _boundaries(
    looks: tuple[int, ...], alpha: float, spending: Spending, comparisons: int
) -> tuple[LookBoundary, ...]:
    share = alpha / comparisons  # Bonferroni: each variant spends its share over the looks
    cumulative = spent_by_look(spending, share, looks)
    errors = nominal_errors(spending, share, looks)
    return tuple(
        LookBoundary(
            look=k,
            seeds=seeds,
            fraction=seeds / looks[-1],
            alpha_spent=comparisons * cumulative[k],
            level=1.0 - errors[k],
        )
        for k, seeds in enumerate(looks)
    )


def fixed_design(n_seeds: int, comparisons: int, alpha: float = 0.05) -> LookDesign:
    """A list of seeds: one look at its length, Bonferroni-corrected across the variants."""
    return LookDesign(looks=(n_seeds,), alpha=alpha, comparisons=comparisons)
