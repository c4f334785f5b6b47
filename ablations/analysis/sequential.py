"""Sequential decisions: paired seeds added look by look, error controlled over all of them.

Method, in one sentence: the family-wise alpha is spent over the looks by a spending
function (Haybittle-Peto-like by default: a small share at each interim look), each look's
share is split among the variants jointly from the correlation the shared control induces
(many-to-one, Dunnett; a variant decided by a claim frees its share), and at each look an
open variant's two-sided paired-t interval on its own spread at that share decides it when
`interval_verdict` makes a claim (repeated confidence intervals, Jennison & Turnbull 1999);
so every claim holds with family-wise error at most alpha across all variants and all looks.
Assumed: the runs' metric is seed-to-seed normal (paired), independent across seeds, each
configuration with a spread of its own.

Why this method (`bench/decision_sim.py` measures each choice; `pooling` and `spending` say
more):

- Each variant's own spread, never a pooled one: a noisy variant never borrows the quiet
  ones' smaller spread, and its t is exact whatever the others do.
- Many-to-one within a look: the variants' differences share the control's runs, so the
  chance that any of m crosses is below m times one's. The correlation is the smallest the
  data support (see `pooling.shared_correlation`), rounded down.
- Step-down: once a variant is decided by a claim, the error is split among the others
  (closed testing: until a false claim is made, every true null is still among them).
- Across looks the shares add up (a union bound): the joint-normal refinement over-spent
  with spreads estimated on a few seeds.
- Futility is non-binding (it only ever withholds a claim, so it cannot add error): from
  `LookDesign.futility_from`, an open variant stops when its chance of any claim by the last
  look, predicted from its mean and spread so far, is below `LookDesign.futility`; it ends
  `inconclusive` with the seeds it would need. Its threshold and first look were chosen by
  simulation: 10% and 20% from look 1 tie on power at twice the useful effect per seed
  spent, and 10% keeps 4 points more of that power. At a look with
  fewer than `FEW_SEEDS` seeds the threshold is halved (`FEW_SEEDS_FUTILITY`): a spread on
  2 degrees of freedom can make a variant 4x the useful effect from the margin look like
  one on it (about 1 in a million such variants was stopped at 3 seeds with 10%; 0 in 8
  million with 5%), and the seeds this costs are won back by `haybittle_peto` spending.

`judge_arrays` judges many campaigns at once (the simulation and sizing use it);
`judge_look` is the same code for one campaign, with notes in words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, model_serializer
from scipy import special

from ablations.analysis.design import RHO_STEP, LookBoundary, LookDesign, fixed_design
from ablations.analysis.pooling import own_spreads, shared_correlation
from ablations.analysis.sizing import seeds_to_decide
from ablations.analysis.spending import FEW_SEEDS
from ablations.analysis.verdicts import INTERVAL_VERDICTS, interval_verdicts
from ablations.plan.design import Spending
from ablations.plan.experiment import MetricSection
from ablations.plan.section import Verdict

FEW_SEEDS_FUTILITY = 0.5
"""The futility threshold is this share of `LookDesign.futility` at a look with fewer than
`spending.FEW_SEEDS` seeds."""

__all__ = [
    "Judgement",
    "LookArrays",
    "LookBoundary",
    "LookDesign",
    "Spending",
    "claim_chance",
    "fixed_design",
    "judge_arrays",
    "judge_look",
]


class Judgement(BaseModel):
    """One variant at one look: its adjusted interval, verdict, and whether it is decided."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    variant: str
    look: int
    """0-based index of the look."""
    n_pairs: int
    """Paired differences the interval rests on."""
    mean_diff: float | None
    """Mean of variant - control in metric units (None without pairs)."""
    sd: float | None
    """The variant's own spread of its differences (None below two pairs)."""
    df: float | None
    """Degrees of freedom of the t quantile (n_pairs - 1)."""
    pooled: bool = False
    """Looks recorded before each variant kept its own spread: whether theirs was pooled
    (kept so such a record reads back unchanged; never set now)."""
    ci_low: float | None
    ci_high: float | None
    """The adjusted interval of variant - control, at confidence `level`."""
    level: float
    """Confidence level of the two-sided interval (1 - this look's share of alpha)."""
    alpha_spent: float
    """Family-wise error spent up to this look."""
    comparisons: int | None = None
    """Variants this look's error was split among (None in looks recorded before it)."""
    rho: float | None = None
    """Correlation between the variants' statistics the split assumed."""
    verdict: Verdict
    """`interval_verdict` of the adjusted interval; `inconclusive` while open."""
    decided: bool
    """True: the variant gets no more seeds (a claim, futility, or the last look)."""
    futile: bool
    """Decided because a claim by the last look has become unlikely."""
    seeds_needed: int | None
    """For one that ends inconclusive (futile, or open at the last look): seeds at which its
    mean and spread so far would decide at this design's last level (None while it is open,
    for a claim, and when its mean sits on an edge of the band)."""
    note: str

    @model_serializer(mode="wrap")
    def _as_recorded(self, handler: Any) -> dict[str, Any]:
        """Fields added or retired since looks were first recorded are written only when
        set, so an older record is written back byte for byte."""
        data: dict[str, Any] = handler(self)
        for key in ("pooled", "comparisons", "rho"):
            if key not in self.model_fields_set:
                data.pop(key, None)
        return data

    @property
    def claimed(self) -> bool:
        """Decided by an interval's claim (better, not worse, worse, equivalent)."""
        return self.decided and self.verdict in INTERVAL_VERDICTS[1:]

    @classmethod
    def without_interval(
        cls,
        variant: str,
        look: int,
        boundary: LookBoundary,
        *,
        verdict: Verdict,
        decided: bool,
        note: str,
        n_pairs: int = 0,
        mean_diff: float | None = None,
    ) -> Judgement:
        """A judgement with no interval: fewer than two pairs, or a verdict from the runs."""
        return cls(
            variant=variant,
            look=look,
            n_pairs=n_pairs,
            mean_diff=mean_diff,
            sd=None,
            df=None,
            ci_low=None,
            ci_high=None,
            level=boundary.level,
            alpha_spent=boundary.alpha_spent,
            comparisons=boundary.comparisons,
            rho=boundary.rho,
            verdict=verdict,
            decided=decided,
            futile=False,
            seeds_needed=None,
            note=note,
        )


@dataclass(frozen=True)
class LookArrays:
    """One look over many campaigns: arrays (campaigns, variants) unless said otherwise."""

    mean: np.ndarray
    sd: np.ndarray
    low: np.ndarray
    high: np.ndarray
    verdict: np.ndarray
    """Indices into `INTERVAL_VERDICTS` (0: no claim)."""
    decided: np.ndarray
    futile: np.ndarray
    chance: np.ndarray
    """Predicted chance of a claim by the last look (1 where not computed)."""
    level: np.ndarray
    """(campaigns,): each campaign's interval level at this look."""
    last_level: np.ndarray
    """(campaigns,): the level its last look would use (for the seeds still needed)."""
    boundaries: list[LookBoundary]
    """(campaigns,): the boundary each campaign's look used."""


def claim_chance(
    gain: np.ndarray,
    sd: np.ndarray,
    n: int,
    design: LookDesign,
    last_level: np.ndarray,
    metric: MetricSection,
) -> np.ndarray:
    """Predicted chance of a claim at the last look: its mean, given the mean so far, is
    normal with variance sd^2 (N - n) / (N n) (the rest of the seeds and the current
    uncertainty), and the interval's half-width stays at its expected value."""
    big_n = design.max_seeds
    quantile = special.stdtrit(big_n - 1, 0.5 + last_level / 2.0)
    half = quantile * sd / math.sqrt(big_n)
    spread = sd * math.sqrt((big_n - n) / (big_n * n))
    u = metric.useful_effect
    with np.errstate(divide="ignore", invalid="ignore"):

        def above(x: np.ndarray | float) -> np.ndarray:
            z = (gain - x) / spread
            # a zero spread: the mean is what it is (above x or not)
            return np.where(spread > 0, special.ndtr(z), (gain > x).astype(float))

        chance = above(u + half) + (1.0 - above(-u - half))  # better, worse
        if metric.decision_rule == "non_inferiority":
            chance = chance + above(-u + half) - above(u + half)  # not worse, short of better
        else:
            chance = chance + np.where(half < u, above(-u + half) - above(u - half), 0.0)
    return np.asarray(chance)


def judge_arrays(
    design: LookDesign,
    look: int,
    metric: MetricSection,
    diffs: np.ndarray,
    claimed: np.ndarray,
    rho: np.ndarray | None = None,
) -> LookArrays:
    """Judge every variant of many campaigns at `look`.

    `diffs` (campaigns, variants, seeds): each open variant's paired differences (variant -
    control, metric units) on the same seeds; `claimed` (campaigns,): variants an earlier
    look decided by a claim; `rho`: the correlation to assume (default: estimated from
    `diffs`, `pooling.shared_correlation`)."""
    if not 0 <= look < len(design.looks):
        raise ValueError(f"look {look} is outside the design's {len(design.looks)} looks")
    n = diffs.shape[-1]
    final = look == len(design.looks) - 1
    mean, variance = own_spreads(diffs)
    sd = np.sqrt(variance)
    if rho is None:
        rho = shared_correlation(diffs)
    # Campaigns share a few (claimed, rho) pairs: one boundary each.
    steps = np.floor(np.clip(rho, 0.0, 0.9) / RHO_STEP + 1e-9)  # as `LookDesign.boundary`
    keys = np.stack([np.asarray(claimed, dtype=float), steps], axis=1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    here = [design.boundary(look, claimed=int(c), rho=s * RHO_STEP) for c, s in unique]
    last = [design.last_boundary(claimed=int(c), rho=s * RHO_STEP) for c, s in unique]
    inverse = inverse.reshape(-1)
    boundaries = [here[i] for i in inverse]
    level = np.array([b.level for b in here])[inverse]
    last_level = np.array([b.level for b in last])[inverse]
    if n >= 2:
        quantile = special.stdtrit(n - 1, 0.5 + level / 2.0)[:, None]
        half = quantile * sd / math.sqrt(n)
        low, high = mean - half, mean + half
    else:
        low = high = np.full(mean.shape, np.nan)
    verdict = interval_verdicts(low, high, metric)
    claim = verdict > 0
    chance = np.ones(mean.shape)
    futile = np.zeros(mean.shape, dtype=bool)
    if not final and n >= 2 and design.futility > 0.0 and look + 1 >= design.futility_from:
        gain = mean if metric.direction == "maximize" else -mean
        chance = claim_chance(gain, sd, n, design, last_level[:, None], metric)
        threshold = design.futility * (FEW_SEEDS_FUTILITY if n < FEW_SEEDS else 1.0)
        futile = ~claim & (chance < threshold)
    decided = claim | futile | final
    return LookArrays(
        mean=mean,
        sd=sd,
        low=low,
        high=high,
        verdict=verdict,
        decided=decided,
        futile=futile,
        chance=chance,
        level=level,
        last_level=last_level,
        boundaries=boundaries,
    )


def judge_look(
    design: LookDesign,
    look: int,
    metric: MetricSection,
    diffs: Mapping[str, Sequence[float]],
    claimed: int = 0,
) -> dict[str, Judgement]:
    """Each open variant at `look`: its adjusted interval, verdict, and whether it is decided.

    `diffs`: for each variant still open, its paired differences (variant - control, metric
    units) on the accepted seed pairs so far, in seed order; variants with as many pairs are
    taken to be on the same seeds (their correlation through the control is estimated from
    them). `claimed`: variants an earlier look decided by a claim. At the last look every
    variant is decided."""
    if not 0 <= look < len(design.looks):
        raise ValueError(f"look {look} is outside the design's {len(design.looks)} looks")
    groups: dict[int, list[str]] = {}
    for name, values in diffs.items():
        groups.setdefault(len(values), []).append(name)
    # The correlation comes from the largest set of variants on the same seeds (the longest
    # among equals): variants with fewer pairs lost seeds to failed runs.
    common = max(groups, key=lambda n: (len(groups[n]), n), default=0)
    rho = 0.0
    if common and len(groups[common]) >= 2:
        block = np.array([[diffs[v] for v in groups[common]]], dtype=float)
        rho = float(shared_correlation(block)[0])
    out: dict[str, Judgement] = {}
    for n, names in groups.items():
        block = np.array([[diffs[v] for v in names]], dtype=float).reshape(1, len(names), n)
        arrays = judge_arrays(design, look, metric, block, np.array([claimed]), np.array([rho]))
        for j, name in enumerate(names):
            out[name] = _judgement(design, look, metric, name, n, arrays, j)
    return {name: out[name] for name in diffs}


def _judgement(
    design: LookDesign,
    look: int,
    metric: MetricSection,
    name: str,
    n: int,
    arrays: LookArrays,
    j: int,
) -> Judgement:
    """One variant's judgement from its campaign's arrays, with its note in words."""
    boundary = arrays.boundaries[0]
    final = look == len(design.looks) - 1
    mean = float(arrays.mean[0, j]) if n else None
    if n < 2:
        return Judgement.without_interval(
            name,
            look,
            boundary,
            verdict="inconclusive",
            decided=final,
            note=f"{n} pair(s): no interval" + ("; ended at the last look" if final else ""),
            n_pairs=n,
            mean_diff=mean,
        )
    assert mean is not None
    sd = float(arrays.sd[0, j])
    verdict = INTERVAL_VERDICTS[int(arrays.verdict[0, j])]
    futile = bool(arrays.futile[0, j])
    seeds_needed = None
    if verdict != "inconclusive":
        note = f"{verdict} at look {look + 1} ({n} seeds)"
    else:
        if final or futile:  # it ends inconclusive: say what deciding it would take
            gain = mean if metric.direction == "maximize" else -mean
            seeds_needed = seeds_to_decide(gain, sd, float(arrays.last_level[0]), metric)
        need = f"about {seeds_needed}" if seeds_needed else "no count (mean on an edge)"
        if final:
            note = f"inconclusive at the last look ({n} seeds); would need {need} seeds"
        elif futile:
            chance = float(arrays.chance[0, j])
            note = (
                f"stopped at look {look + 1}: {chance:.0%} chance of a claim by "
                f"{design.max_seeds} seeds; would need {need} seeds"
            )
        else:
            note = f"open: continues to {design.looks[look + 1]} seeds"
    return Judgement(
        variant=name,
        look=look,
        n_pairs=n,
        mean_diff=mean,
        sd=sd,
        df=float(n - 1),
        ci_low=float(arrays.low[0, j]),
        ci_high=float(arrays.high[0, j]),
        level=boundary.level,
        alpha_spent=boundary.alpha_spent,
        comparisons=boundary.comparisons,
        rho=boundary.rho,
        verdict=verdict,
        decided=bool(arrays.decided[0, j]),
        futile=futile,
        seeds_needed=seeds_needed,
        note=note,
    )
