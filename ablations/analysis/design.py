"""A sequential design: looks at growing seed counts, alpha spent over them and shared among
the variants.

`ablations.analysis.sequential` documents the method; `spending` the spending functions and
the many-to-one split of one look's error.
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import pairwise

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from ablations.analysis.spending import (
    exact_errors,
    family_spent,
    many_to_one_error,
    sidak_share,
    spent_by_look,
)
from ablations.plan.design import INTERIM_SHARE, Boundaries, Correction, Spending

RHO_STEP = 0.1
"""The correlation a boundary assumes is rounded down to a multiple of this: rounding down
only widens the intervals (a lower correlation needs a higher bound), and a few values cover
every look, so each boundary is computed once per process."""


def rho_steps(rho: float) -> int:
    """`rho` rounded down to a multiple of `RHO_STEP` (at most 0.9), in steps."""
    return math.floor(max(0.0, min(rho, 0.9)) / RHO_STEP + 1e-9)


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
    """Confidence level of each variant's two-sided interval here: one minus this look's
    share of the family-wise error, split among `comparisons` variants."""
    comparisons: int
    """Variants the look's error is split among: every registered one, less those an
    earlier look decided by a claim (many-to-one's step-down)."""
    rho: float
    """Correlation between the variants' statistics the split assumed (0: none assumed)."""


class LookDesign(BaseModel):
    """Looks at growing seed counts, with the family-wise error spent over them."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    looks: tuple[int, ...]
    """Cumulative seeds per variant at each look, increasing; the last is the maximum."""
    alpha: float = 0.05
    """Family-wise error rate across all variants and all looks."""
    spending: Spending = "haybittle_peto"
    """How alpha is spent over the looks: `haybittle_peto` (a small share at each interim look
    of 4 seeds or more, the rest at the last), `obrien_fleming` (little early, most at the
    last look), `pocock` (evenly in seeds) or `equal` (the same share at each look)."""
    interim_share: float = INTERIM_SHARE
    """The share of alpha `haybittle_peto` spends at each interim look of 4 seeds or more."""
    comparisons: int
    """Number of variants compared with the control (m); alpha is shared among them."""
    correction: Correction = "many_to_one"
    """`many_to_one`: each look's error split jointly (Dunnett) at the correlation the shared
    control induces, with step-down; `bonferroni`: alpha / m per variant."""
    boundaries: Boundaries = "union"
    """How the looks' errors combine: `union` (each look's share on its own, many-to-one at
    the correlation within it) or `exact` (group-sequential bounds over the looks for each
    variant alone, Sidak's share across the variants)."""
    futility: float = 0.02
    """An open variant stops when its predicted chance of any claim by the last look is
    below this (0: never); at a look with fewer than `FEW_SEEDS` seeds, below
    `FEW_SEEDS_FUTILITY` times this (`sequential`)."""
    futility_from: int = 1
    """The first look (1-based) at which futility may stop a variant."""

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
        if not 0.0 <= self.futility < 1.0:
            problems.append(f"futility must be in [0, 1), got {self.futility}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def max_seeds(self) -> int:
        """Seeds per variant at the last look."""
        return self.looks[-1]

    def remaining(self, claimed: int) -> int:
        """Variants the error is split among after `claimed` were decided by a claim."""
        if self.correction == "bonferroni":
            return self.comparisons
        return max(1, self.comparisons - claimed)

    def boundary(self, look: int, *, claimed: int = 0, rho: float = 0.0) -> LookBoundary:
        """The boundary of `look` (0-based) after `claimed` variants were decided by a claim
        at earlier looks, for statistics correlated `rho` (rounded down to `RHO_STEP`)."""
        if self.correction == "bonferroni":
            rho = 0.0
        return _boundaries(
            self.looks,
            self.alpha,
            self.spending,
            self.interim_share,
            self.comparisons,
            self.remaining(claimed),
            self.correction,
            self.boundaries,
            rho_steps(rho),
        )[look]

    def last_boundary(self, *, claimed: int = 0, rho: float = 0.0) -> LookBoundary:
        """The boundary of the last look (what sizing and the seeds a variant needs use)."""
        return self.boundary(len(self.looks) - 1, claimed=claimed, rho=rho)


@lru_cache(maxsize=1024)
def _boundaries(
    looks: tuple[int, ...],
    alpha: float,
    spending: Spending,
    interim_share: float,
    comparisons: int,
    remaining: int,
    correction: Correction,
    boundaries: Boundaries,
    rho_steps: int,
) -> tuple[LookBoundary, ...]:
    rho = rho_steps * RHO_STEP
    cumulative = family_spent(spending, alpha, comparisons, looks, interim_share)
    if boundaries == "exact" and len(looks) > 1:
        # Exact over the looks, each variant alone; Sidak's share across the variants.
        rho = 0.0
        share = alpha / comparisons if correction == "bonferroni" else sidak_share(remaining, alpha)
        own = spent_by_look(spending, share, looks, interim_share)
        errors = exact_errors(tuple(b - a for a, b in pairwise((0.0, *own))), looks)
    else:
        increments = [b - a for a, b in pairwise((0.0, *cumulative))]
        if correction == "bonferroni":
            errors = tuple(i / comparisons for i in increments)
        else:
            errors = tuple(many_to_one_error(remaining, rho, i) for i in increments)
    out = []
    for k, seeds in enumerate(looks):
        error = errors[k]
        out.append(
            LookBoundary(
                look=k,
                seeds=seeds,
                fraction=seeds / looks[-1],
                alpha_spent=cumulative[k],
                level=1.0 - error,
                comparisons=remaining,
                rho=rho,
            )
        )
    return tuple(out)


def fixed_design(
    n_seeds: int, comparisons: int, alpha: float = 0.05, correction: Correction = "many_to_one"
) -> LookDesign:
    """A list of seeds: one look at its length, corrected across the variants."""
    return LookDesign(looks=(n_seeds,), alpha=alpha, comparisons=comparisons, correction=correction)
