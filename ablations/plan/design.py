"""How many seeds each variant gets, and when it is judged: the plan's seed design.

`seeds` in a plan is either a list (a fixed design: one look, after every listed seed) or a
`SequentialSeeds` design: seeds `first, first+1, ...` in batches, every still-open variant
judged at each look, more seeds only where the answer is still open. Either way every claim
is corrected across the variants (and the looks): see `ablations.analysis.sequential`.
"""

from __future__ import annotations

import itertools
import math
from typing import Annotated, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from ablations.plan.section import PositiveFloat, PositiveInt, Section

Spending = Literal["haybittle_peto", "obrien_fleming", "pocock", "equal"]
"""How the family-wise alpha is spent over the looks (`ablations.analysis.spending`)."""

Correction = Literal["many_to_one", "bonferroni"]
"""How the family-wise error is shared among the variants compared with the control."""

Boundaries = Literal["union", "exact"]
"""How the looks' errors are combined (`ablations.analysis.spending`): `union` (each look's
share on its own, the shares added) or `exact` (group-sequential bounds from the looks' joint
normal, each variant alone, Sidak's share across the variants)."""

MAX_LOOKS = 20
"""More looks than this buy almost nothing and make every look's interval wider."""

INTERIM_SHARE = 0.12
"""The share of alpha `haybittle_peto` spends at each interim look of 4 seeds or more,
chosen by simulation at looks 3/5/8/12 (`bench/decision_designs.py --table 2`): every share
lies on one line of power against seeds; 9% kept a point more power at twice the useful
effect, but a non-inferiority campaign then spent 0.664x a fixed design's seeds, and 12% is
the smallest share that spends at most 0.65x under every decision rule."""
INTERIM_MOST = 0.3
"""`haybittle_peto` spends at most this share of alpha before the last look: with many looks
each interim look's share shrinks to fit."""


class Futility(Section):
    """When an open variant stops early as `inconclusive`: its chance of any claim by `max`,
    predicted from its mean and spread so far, has fallen below `threshold`. Non-binding: it
    only ever withholds a claim, so it adds no error. The defaults were chosen by simulation
    with the step-down within each look (`bench/decision_sim.py --futility-table`): 2% from
    look 1 is the threshold with the most power at twice the useful effect per seed spent
    (0.094) among those deciding 75% of such variants in every cell (3% decides 74.8% in
    one; 5%, the most per seed, 74.0%; 10%, the default before, 71%)."""

    threshold: float = Field(default=0.02, ge=0.0, lt=1.0, allow_inf_nan=False)
    """Predicted chance of a claim below which an open variant stops (0: never stops early);
    half of it at a look with fewer than 4 seeds, whose spread (2 degrees of freedom) can
    make a variant far from the margin look hopeless."""
    from_look: PositiveInt = 1
    """The first look (1-based) at which the rule may stop a variant. Later looks predict
    better (fewer variants truly 2x the useful effect stopped) but spend more seeds on the
    hopeless ones."""


class SequentialSeeds(Section):
    """A sequential design: a first batch of seeds, a maximum, and looks in between.

    At each look every open variant is judged on its paired seeds so far: decided (better,
    not worse, worse, equivalent; or it can no longer be decided by `max`) or given the next
    batch. The control runs every seed any open variant needs, so pairs stay paired."""

    start: PositiveInt
    """Seeds per variant at the first look (the first batch)."""
    max: PositiveInt = Field(le=10_000)
    """Seeds per variant at most: an open variant at the last look ends `inconclusive`,
    naming the seeds it would need."""
    looks: list[PositiveInt] | None = Field(default=None, min_length=1)
    """Cumulative seeds per variant at each look, increasing, from `start` to `max` (e.g.
    [3, 5, 8, 12]). Default: `start`, then about 1.5x more each look, ending at `max` at
    least 1.25x the look before it."""
    first: int = Field(default=0, ge=0, lt=2**32)
    """The first seed; the design's seeds are first, first+1, ..., first+max-1."""
    alpha: float = Field(default=0.05, gt=0.0, le=0.2, allow_inf_nan=False)
    """Family-wise error rate of every claim (better, not worse, worse, equivalent) across all
    variants and all looks of the campaign."""
    spending: Spending = "haybittle_peto"
    """How alpha is spent over the looks: `haybittle_peto` (`interim_share` of alpha at each
    interim look of 4 seeds or more, next to nothing before, the rest at the last look: clear
    effects decided by the second look, nearly a fixed design's last look), `obrien_fleming`
    (almost nothing early, most at the last look), `pocock` (evenly on the critical value:
    earlier decisions, a wider last interval) or `equal` (equal alpha per look)."""
    interim_share: float = Field(
        default=INTERIM_SHARE, gt=0.0, le=INTERIM_MOST, allow_inf_nan=False
    )
    """With `spending: haybittle_peto`, the share of alpha each interim look of 4 seeds or
    more spends (at most 0.3 over all interim looks). More decides clear effects earlier and
    leaves a weaker last look: 0.09 gives about a point more power at twice the useful effect
    for 2% more seeds (`docs/performance.md`, table 2)."""
    correction: Correction = "many_to_one"
    """How alpha is shared among the variants: `many_to_one` (each look's intervals computed
    jointly from the correlation the shared control induces, Dunnett-like, and a variant
    decided by a claim frees its share for the others) or `bonferroni` (alpha / m each,
    whatever the correlation: more cautious)."""
    boundaries: Boundaries = "union"
    """How the looks' errors combine: `union` (each look spends its increment of alpha on its
    own and the increments add up: a little of alpha goes unspent, and the guarantee holds on
    each variant's t interval from 3 seeds on) or `exact` (the group-sequential bounds from
    the looks' joint normal, Lan-DeMets' published values for `obrien_fleming`, all of alpha
    spent with a known spread; on spreads estimated from few seeds they over-spend:
    docs/seeds-and-looks.md)."""
    futility: Futility = Futility()
    """When an open variant stops early because a claim by `max` has become unlikely."""
    expected_sd: PositiveFloat | None = None
    """A prior for the seed-to-seed standard deviation of a variant's paired difference from
    the control, in metric units: sizes the main phase before the pilot (`ablate plan`,
    `ablate budget`). The pilot's own spread replaces it when two or more pilot seeds ran."""

    @model_validator(mode="after")
    def _looks_fit(self) -> SequentialSeeds:
        if self.start > self.max:
            raise ValueError(f"start ({self.start}) is above max ({self.max})")
        if self.first + self.max > 2**32:
            raise ValueError("seeds must stay below 2**32: lower `first` or `max`")
        looks = self.looks
        if looks is None:
            return self
        if any(b <= a for a, b in itertools.pairwise(looks)):
            raise ValueError(f"looks must increase; got {looks}")
        if looks[0] != self.start or looks[-1] != self.max:
            raise ValueError(
                f"looks must run from start ({self.start}) to max ({self.max}); got {looks}"
            )
        if len(looks) > MAX_LOOKS:
            raise ValueError(f"at most {MAX_LOOKS} looks; got {len(looks)}")
        return self

    @model_validator(mode="after")
    def _share_with_its_spending(self) -> SequentialSeeds:
        if "interim_share" in self.model_fields_set and self.spending != "haybittle_peto":
            raise ValueError(
                f"interim_share applies to spending haybittle_peto only; spending is "
                f"{self.spending}"
            )
        return self

    @property
    def look_sizes(self) -> tuple[int, ...]:
        """Cumulative seeds per variant at each look."""
        if self.looks is not None:
            return tuple(self.looks)
        return growing_looks(self.start, self.max)

    @property
    def seeds(self) -> list[int]:
        """Every seed the design may run, in the order they are run."""
        return list(range(self.first, self.first + self.max))


LOOK_GROWTH = 1.5
"""The default looks grow about this much each (3, 5, 8, 12)."""
LAST_GROWTH = 1.25
"""The last look holds at least this many times the seeds of the look before it: a look just
below `max` (14 before 15) would split the last look's alpha for almost no seeds, which made
the power fall as `max` grew (73% at max 14, 66% at 15, 77% at 16)."""


def growing_looks(start: int, most: int) -> tuple[int, ...]:
    """The default looks from `start` to `most`: about `LOOK_GROWTH` more seeds each look
    (halves rounded up), the last at least `LAST_GROWTH` times the one before it."""
    sizes = [min(start, most)]
    while len(sizes) < MAX_LOOKS - 1:
        grown = max(sizes[-1] + 1, math.floor(sizes[-1] * LOOK_GROWTH + 0.5))
        if grown * LAST_GROWTH > most:
            break
        sizes.append(grown)
    if sizes[-1] != most:
        sizes.append(most)
    return tuple(sizes)


def _seeds_kind(value: object) -> str:
    return "list[int]" if isinstance(value, list) else "design[SequentialSeeds]"


# A discriminated union: a mapping is validated as a design only, so a mistake in it is
# reported once, not also as "should be a valid list". The tags hold "[" so that error paths
# drop them (`ablations.plan.model.dotted`): `seeds.spending`, not `seeds.design.spending`.
SeedsField = Annotated[
    Annotated[list[int], Tag("list[int]")]
    | Annotated[SequentialSeeds, Tag("design[SequentialSeeds]")],
    Discriminator(_seeds_kind),
]
"""What `Plan.seeds` accepts: a list (fixed design) or a sequential design."""


def seed_list(seeds: SeedsField) -> list[int]:
    """Every seed a plan may run, in order."""
    return list(seeds) if isinstance(seeds, list) else seeds.seeds


def look_sizes(seeds: SeedsField) -> tuple[int, ...]:
    """Cumulative seeds per variant at each look: one look after every seed of a list."""
    return (len(seeds),) if isinstance(seeds, list) else seeds.look_sizes


def alpha_of(seeds: SeedsField) -> float:
    """The family-wise error rate of the plan's claims (0.05 for a list of seeds)."""
    return 0.05 if isinstance(seeds, list) else seeds.alpha


def spending_of(seeds: SeedsField) -> Spending:
    """How alpha is spent over the looks (irrelevant with one look)."""
    return "obrien_fleming" if isinstance(seeds, list) else seeds.spending


def interim_share_of(seeds: SeedsField) -> float:
    """The share of alpha `haybittle_peto` spends at each interim look (irrelevant with one
    look)."""
    return INTERIM_SHARE if isinstance(seeds, list) else seeds.interim_share


def spending_words(seeds: SeedsField) -> str:
    """How alpha is spent over the looks, as `validate` and the report say it."""
    spending = spending_of(seeds)
    words = spending.replace("_", "-")
    if spending == "haybittle_peto":
        words = f"{words} ({interim_share_of(seeds):.0%} per interim look)"
    if boundaries_of(seeds) == "exact":
        words = f"{words}, exact group-sequential bounds"
    return words


def correction_of(seeds: SeedsField) -> Correction:
    """How alpha is shared among the variants (`many_to_one` for a list of seeds)."""
    return "many_to_one" if isinstance(seeds, list) else seeds.correction


def boundaries_of(seeds: SeedsField) -> Boundaries:
    """How the looks' errors combine (irrelevant with one look)."""
    return "union" if isinstance(seeds, list) else seeds.boundaries


def futility_of(seeds: SeedsField) -> Futility:
    """The futility rule (irrelevant with one look)."""
    return Futility() if isinstance(seeds, list) else seeds.futility


def look_of_seed(seeds: SeedsField, index: int) -> int:
    """The look (0-based) whose batch holds the seed at position `index` of `seed_list`."""
    for look, size in enumerate(look_sizes(seeds)):
        if index < size:
            return look
    raise IndexError(f"seed position {index} is beyond the design's max")
