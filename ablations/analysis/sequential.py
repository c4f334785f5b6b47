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
- Step-down, within each look and across looks: at a look every open variant is judged at
  the bound for all variants not yet claimed; those that claim are decided, and the rest are
  judged again at the bound for that many fewer, until a step claims nothing; a later look
  starts from the claims made so far (Holm's step-down, the shortcut of closed testing over
  the joint normal: docs/seeds-and-looks.md has the argument).
- Across looks the shares add up (a union bound, `boundaries: union`): the exact group-
  sequential bounds (`boundaries: exact`) over-spend with spreads estimated on a few seeds
  (`spending` has the figures).
- Futility is non-binding (it only ever withholds a claim, so it cannot add error): from
  `LookDesign.futility_from`, an open variant stops when its chance of any claim by the last
  look, predicted from its mean and spread so far, is below `LookDesign.futility`; it ends
  `inconclusive` with the seeds it would need. Its threshold and first look were chosen by
  simulation with the step-down in place: 2% from look 1 gives the most power at twice the
  useful effect per seed spent among the thresholds that decide 75% of such variants
  (`plan.design.Futility`). At a look with
  fewer than `FEW_SEEDS` seeds the threshold is halved (`FEW_SEEDS_FUTILITY`): a spread on
  2 degrees of freedom can make a variant 4x the useful effect from the margin look like
  one on it (about 1 in a million such variants was stopped at 3 seeds with 10%; 0 in 8
  million with 5%), and the seeds this costs are won back by `haybittle_peto` spending.

A variant with a seed seen to diverge (`stability`) gets no `better`, `not worse` or
`equivalent` at that look and no futility stop; one still so at its last look is `unstable`.

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

from ablations.analysis import stability
from ablations.analysis.design import RHO_STEP, LookBoundary, LookDesign, fixed_design
from ablations.analysis.pooling import own_spreads, shared_correlation
from ablations.analysis.sizing import seeds_to_decide
from ablations.analysis.spending import FEW_SEEDS
from ablations.analysis.verdicts import INTERVAL_VERDICTS, interval_verdicts
from ablations.plan.design import Spending
from ablations.plan.experiment import MetricSection
from ablations.plan.section import Verdict

DIVERGED = "a seed diverged"
"""A note's words for the seeds `stability` saw diverge (`looks` names them from the runs)."""
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
    """Variants the error was split among at the step of this look's step-down that judged
    this variant (None in looks recorded before it)."""
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
    diverged: bool = False
    """A seed seen to diverge at this look (`stability`): no claim to adopt it on them."""

    @model_serializer(mode="wrap")
    def _as_recorded(self, handler: Any) -> dict[str, Any]:
        """Fields added or retired since looks were first recorded are written only when
        set, so an older record is written back byte for byte."""
        data: dict[str, Any] = handler(self)
        for key in ("pooled", "comparisons", "rho", "diverged"):
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
    """Each variant's interval level: the step of the look's step-down that judged it last
    (where it claimed, or the last step)."""
    comparisons: np.ndarray
    """The variants that step's error was split among."""
    last_level: np.ndarray
    """(campaigns,): the level its last look would use after this look's claims (for the
    seeds still needed and futility)."""
    boundaries: list[LookBoundary]
    """(campaigns,): the boundary of each campaign's last step at this look."""
    unstable: np.ndarray
    """A seed seen to diverge (`stability`): no claim but `worse`, no futility stop."""


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


def _levels(
    design: LookDesign, look: int, claimed: np.ndarray, rho: np.ndarray
) -> tuple[list[LookBoundary], list[LookBoundary]]:
    """Each campaign's boundary at `look` and at the last look, after `claimed` claims:
    campaigns share a few (claimed, rho) pairs, so one boundary is computed per pair."""
    steps = np.floor(np.clip(rho, 0.0, 0.9) / RHO_STEP + 1e-9)  # as `LookDesign.boundary`
    keys = np.stack([np.asarray(claimed, dtype=float), steps], axis=1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    here = [design.boundary(look, claimed=int(c), rho=s * RHO_STEP) for c, s in unique]
    last = [design.last_boundary(claimed=int(c), rho=s * RHO_STEP) for c, s in unique]
    inverse = inverse.reshape(-1)
    return [here[i] for i in inverse], [last[i] for i in inverse]


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
    control, metric units) on the same seeds; `claimed` (campaigns,): variants decided by a
    claim before (at earlier looks, or in another group of this look); `rho`: the
    correlation to assume (default: estimated from `diffs`, `pooling.shared_correlation`).

    Step-down within the look (`many_to_one`): every open variant is judged at the bound
    for all of them; the variants that claim there are decided, and the others are judged
    again at the bound for that many fewer, until a step claims nothing (Holm's shortcut
    of closed testing: a claim at a stricter bound is a claim at every looser one)."""
    if not 0 <= look < len(design.looks):
        raise ValueError(f"look {look} is outside the design's {len(design.looks)} looks")
    n = diffs.shape[-1]
    final = look == len(design.looks) - 1
    mean, variance = own_spreads(diffs)
    sd = np.sqrt(variance)
    if rho is None:
        rho = shared_correlation(diffs)
    unstable = stability.flagged(diffs, design.looks, metric)  # no claim to adopt on it
    before = np.asarray(claimed, dtype=int)
    here = np.zeros(before.shape, dtype=int)  # claims at this look's earlier steps
    low = np.full(mean.shape, np.nan)
    high = np.full(mean.shape, np.nan)
    verdict = np.zeros(mean.shape, dtype=int)
    level = np.zeros(mean.shape)
    comparisons = np.zeros(mean.shape, dtype=int)
    pending = np.ones(mean.shape, dtype=bool)  # not claimed at an earlier step
    while True:
        boundaries, last = _levels(design, look, before + here, rho)
        step_level = np.array([b.level for b in boundaries])[:, None]
        if n >= 2:
            half = special.stdtrit(n - 1, 0.5 + step_level / 2.0) * sd / math.sqrt(n)
            step_low, step_high = mean - half, mean + half
        else:
            step_low = step_high = np.full(mean.shape, np.nan)
        step_verdict = stability.withheld(interval_verdicts(step_low, step_high, metric), unstable)
        low = np.where(pending, step_low, low)
        high = np.where(pending, step_high, high)
        verdict = np.where(pending, step_verdict, verdict)
        level = np.where(pending, step_level, level)
        split = np.array([b.comparisons for b in boundaries])[:, None]
        comparisons = np.where(pending, split, comparisons)
        new = pending & (step_verdict > 0)
        pending &= ~new
        count = new.sum(axis=1)
        if design.correction == "bonferroni" or not count.any():
            break
        here = here + count
    last_level = np.array([b.level for b in last])
    claim = verdict > 0
    chance = np.ones(mean.shape)
    futile = np.zeros(mean.shape, dtype=bool)
    if not final and n >= 2 and design.futility > 0.0 and look + 1 >= design.futility_from:
        gain = mean if metric.direction == "maximize" else -mean
        chance = claim_chance(gain, sd, n, design, last_level[:, None], metric)
        threshold = design.futility * (FEW_SEEDS_FUTILITY if n < FEW_SEEDS else 1.0)
        suspect = stability.flagged(diffs, design.looks, metric, stability.SUSPECT)
        futile = ~claim & ~suspect & ~unstable & (chance < threshold)
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
        comparisons=comparisons,
        last_level=last_level,
        boundaries=boundaries,
        unstable=unstable,
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
    blocks = {
        n: np.array([[diffs[v] for v in names]], dtype=float).reshape(1, len(names), n)
        for n, names in groups.items()
    }
    # The step-down runs over the whole look: a group's claims loosen the others' bound,
    # so the groups are judged again until no group claims more.
    claims = dict.fromkeys(groups, 0)
    while True:
        judged = {
            n: judge_arrays(
                design,
                look,
                metric,
                block,
                np.array([claimed + sum(c for m, c in claims.items() if m != n)]),
                np.array([rho]),
            )
            for n, block in blocks.items()
        }
        again = {n: int((arrays.verdict > 0).sum()) for n, arrays in judged.items()}
        if again == claims:
            break
        claims = again
    out: dict[str, Judgement] = {}
    for n, names in groups.items():
        for j, name in enumerate(names):
            out[name] = _judgement(design, look, metric, name, n, judged[n], j)
    return {name: out[name] for name in diffs}


def _next(design: LookDesign, look: int) -> int:
    """Seeds at the look after `look`."""
    return design.looks[min(look + 1, len(design.looks) - 1)]


def stability_words(n: int, unstable: bool) -> str:
    """What a claim's `n` seeds say about a failure mode: none seen, and what that excludes
    (`stability.excluded_rate`), or that one was seen."""
    if unstable:
        return f"; {DIVERGED}"
    rate = stability.excluded_rate(n)
    return (
        f", none diverged: a failure mode in {rate:.0%} or more of runs is excluded "
        f"({stability.CONFIDENCE:.0%})"
    )


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
    verdict: Verdict = INTERVAL_VERDICTS[int(arrays.verdict[0, j])]
    futile = bool(arrays.futile[0, j])
    seeds_needed = None
    unstable = bool(arrays.unstable[0, j])
    if verdict != "inconclusive":
        note = f"{verdict} at look {look + 1} ({n} seeds)" + stability_words(n, unstable)
    elif unstable and final:
        verdict = "unstable"
        note = (
            f"unstable: {DIVERGED}; no claim at the last look ({n} seeds): {stability.WHAT_TO_DO}"
        )
    elif unstable:
        note = (
            f"open: {DIVERGED}; no claim at look {look + 1}, continues to "
            f"{_next(design, look)} seeds"
        )
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
            note = f"open: continues to {_next(design, look)} seeds"
    return Judgement(
        variant=name,
        look=look,
        n_pairs=n,
        mean_diff=mean,
        sd=sd,
        df=float(n - 1),
        ci_low=float(arrays.low[0, j]),
        ci_high=float(arrays.high[0, j]),
        level=float(arrays.level[0, j]),
        alpha_spent=boundary.alpha_spent,
        comparisons=int(arrays.comparisons[0, j]),
        rho=boundary.rho,
        verdict=verdict,
        decided=bool(arrays.decided[0, j]),
        futile=futile,
        seeds_needed=seeds_needed,
        note=note,
        **({"diverged": True} if unstable else {}),
    )
