"""Seeds seen to diverge: a calibrated outlier test on each variant's paired differences.

The looks assume a variant's paired differences are normal across seeds. A configuration
that sometimes collapses (a run that ends far below its seed's others, yet above the quality
threshold, so no stop rule fired) breaks that assumption, and no test on n seeds can promise
error control against it: a failure mode in fewer than about 3/n of runs is seldom drawn at
all (docs/seeds-and-looks.md). What a look can do is notice a collapse that *is* drawn, and
then make no claim to adopt the variant on that evidence.

The rule, at each look from `MIN_SEEDS` seeds on: a seed has *diverged* when Rosner's
generalized extreme studentized deviate test (Grubbs' test repeated on what is left, up to
`most_outliers(n)` seeds, so a second collapse does not hide the first) declares it a low
outlier of the variant's gain over the control, and the variant's run is also usefully worse
than the control's on that seed (a gain below minus the useful effect: a seed still about as
good as its control has not collapsed, however far it lies from its others). The test's
one-sided level is `LEVEL` per variant over the whole campaign, split evenly (Bonferroni)
over the design's looks of `MIN_SEEDS` seeds or more and the steps at each, so a healthy
variant (normal differences, any spread) is flagged at some look with chance at most about
`LEVEL` (Rosner's values are approximate; measured at most 0.60% in `bench/decision_sim.py
--diverging`'s cells).

A flagged variant (`withheld`) gets no `better`, `not worse` or `equivalent` at that look
(`worse` stands) and is not stopped for futility: it continues while the looks allow, and one
still flagged at its last look ends `unstable`. A seed *suspected* at the laxer `SUSPECT`
level also keeps futility from stopping the variant, so that a collapse seen on too few seeds
to flag is tested again with more.

Every claim also says what its seeds rule out (`excluded_rate`): had a failure mode struck
p or more of runs, n seeds would all have escaped it with chance at most (1 - p)^n, which is
5% at p = 1 - 0.05^(1/n); so with none of n seeds diverged, such a failure mode is excluded
at 95% (22% or more of runs at 12 seeds).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from functools import lru_cache

import numpy as np
from scipy import special

from ablations.analysis.verdicts import INTERVAL_VERDICTS
from ablations.plan.experiment import MetricSection

MIN_SEEDS = 5
"""Fewest seeds a variant is tested at: below, one seed cannot stand out from the others at
1% (Grubbs' statistic cannot exceed (n - 1) / sqrt(n): 1.5 at 4 seeds)."""
LEVEL = 0.01
"""Chance that a healthy variant (normal differences) is flagged at any look of a campaign."""
SUSPECT = 0.05
"""One-sided level, per look, at which a seed is suspected of diverging: no futility stop on
that evidence (the next look, with more seeds, can tell). Without it, a seed 10 useful effects
down among the first 5 was seldom flagged: futility stopped its variant first. It costs
0.04-0.07 seeds per variant (`bench/decision_sim.py`)."""
CONFIDENCE = 0.95
"""Confidence of the failure rate a claim's seeds rule out."""
WHAT_TO_DO = (
    "read the diverged run's curves and log; rerun its seed to see whether the collapse "
    "repeats (a bug to fix, or a configuration that fails on some seeds); adopt nothing on "
    "these seeds"
)
"""What a researcher does with an `unstable` variant (the look's note and the report's
next decision, where the plan names none)."""


def most_outliers(n: int) -> int:
    """How many diverged seeds the test looks for among `n`: two (a second collapse would
    otherwise hide the first: two of 12 seeds 10 useful effects down are flagged in 98% of
    campaigns this way, 0.01% with Grubbs' test alone)."""
    return 2


def look_level(looks: tuple[int, ...], n: int) -> float:
    """The one-sided level of each step of the test at a look of `n` seeds: `LEVEL` split
    evenly over the design's looks of `MIN_SEEDS` seeds or more and the steps at each."""
    tested = max(1, sum(seeds >= MIN_SEEDS for seeds in looks))
    return LEVEL / tested / most_outliers(n)


@lru_cache(maxsize=256)
def critical_values(n: int, level: float) -> tuple[float, ...]:
    """Rosner's (1983) critical values lambda_1..lambda_r of the generalized ESD test for
    low outliers among `n` values at one-sided `level` per step (r = `most_outliers(n)`)."""
    out = []
    for i in range(1, most_outliers(n) + 1):
        rest = n - i + 1  # values left before the i-th removal
        t = float(special.stdtrit(rest - 2, 1.0 - level / rest))
        out.append((rest - 1) * t / math.sqrt((rest - 2 + t * t) * rest))
    return tuple(out)


def low_outliers(values: np.ndarray, level: float) -> np.ndarray:
    """The generalized ESD test for low outliers at one-sided `level` per step on the last
    axis of `values`: True at each value it declares (none below `MIN_SEEDS` values)."""
    n = values.shape[-1]
    if n < MIN_SEEDS:
        return np.zeros(values.shape, dtype=bool)
    left = np.array(values, dtype=float)
    order = np.zeros(values.shape, dtype=int)  # the step at which each value was removed
    count = np.zeros(values.shape[:-1], dtype=int)  # the largest i with R_i > lambda_i
    for i, critical in enumerate(critical_values(n, level), start=1):
        below = np.nanmean(left, axis=-1, keepdims=True) - left
        worst = np.nanargmax(below, axis=-1)[..., None]
        sd = np.nanstd(left, axis=-1, ddof=1)
        r = np.take_along_axis(below, worst, axis=-1)[..., 0]
        count = np.where((sd > 0) & (r > critical * sd), i, count)
        np.put_along_axis(order, worst, i, axis=-1)
        np.put_along_axis(left, worst, np.nan, axis=-1)
    return (order > 0) & (order <= count[..., None])


def diverged(
    diffs: np.ndarray, looks: tuple[int, ...], metric: MetricSection, level: float | None = None
) -> np.ndarray:
    """The seeds seen to diverge in paired differences `diffs` (..., seeds; variant -
    control, metric units) at a look of a design with `looks`: low outliers of the gain
    (`low_outliers` at `look_level`, or at `level` when given) on which the variant's run is
    also usefully worse than the control's."""
    gain = np.asarray(diffs, dtype=float) * (1.0 if metric.direction == "maximize" else -1.0)
    if level is None:
        level = look_level(looks, gain.shape[-1])
    return np.asarray(low_outliers(gain, level) & (gain < -metric.useful_effect))


def flagged(
    diffs: np.ndarray, looks: tuple[int, ...], metric: MetricSection, level: float | None = None
) -> np.ndarray:
    """(campaigns, variants): a seed of the variant seen to diverge (`diverged`)."""
    return np.asarray(diverged(diffs, looks, metric, level).any(axis=-1))


def withheld(verdict: np.ndarray, unstable: np.ndarray) -> np.ndarray:
    """`verdict` (indices into `INTERVAL_VERDICTS`) with `better`, `not worse` and
    `equivalent` withheld (0) where `unstable`: a variant seen to diverge is not one to adopt
    on that evidence. `worse` stands: a collapse only adds to it."""
    worse = INTERVAL_VERDICTS.index("worse")
    return np.where(unstable & (verdict != worse), 0, verdict)


def excluded_rate(n: int, confidence: float = CONFIDENCE) -> float:
    """The smallest failure rate that n seeds, none diverged, exclude at `confidence`."""
    return 1.0 - (1.0 - confidence) ** (1.0 / n) if n > 0 else 1.0


def named(
    variant: Mapping[int, float],
    control: Mapping[int, float],
    looks: tuple[int, ...],
    metric: MetricSection,
) -> str | None:
    """The seeds of one variant seen to diverge at a look, in words ("seed 7 diverged
    (accuracy 0.41 against a median of 0.97)"), from its and the control's values by seed
    (the seeds both have are paired); None when none diverged."""
    seeds = sorted(s for s in variant if s in control)
    diffs = np.array([variant[s] - control[s] for s in seeds])
    marks = diverged(diffs, looks, metric)
    out = []
    for seed in (s for s, mark in zip(seeds, marks, strict=True) if mark):
        others = statistics.median(variant[s] for s in seeds if s != seed)
        out.append(
            f"seed {seed} diverged ({metric.name} {variant[seed]:.3g} against a median of "
            f"{others:.3g})"
        )
    return "; ".join(out) or None
