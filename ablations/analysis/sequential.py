"""Sequential decisions: paired seeds added look by look, error controlled over all of them.

Method, in one sentence: each of the m variants compared with the control gets alpha/m
(Bonferroni), spent over the looks by a Lan-DeMets group-sequential boundary (O'Brien-Fleming-
like by default), and at each look an open variant's two-sided paired-t interval of
variant - control at that boundary's nominal level decides it when `interval_verdict` makes
a claim (repeated confidence intervals, Jennison & Turnbull 1999), with the variants' spreads
pooled when they agree; so every claim holds with family-wise error at most alpha across all
variants and all looks.

Why this method:

- Bonferroni across variants holds whatever the correlation through the shared control, and
  for a fixed design (one look) it is the plain Bonferroni-corrected paired t. Dunnett's
  correlation would gain about 2% in the critical value at 4 variants; Holm-style reallocation
  of freed alpha (Maurer & Bretz 2013) would change what an interval means (the graphical
  procedures' intervals are not simultaneous ones). Both left out.
- Across looks, the boundary is exact for the joint normal of the looks (`spending.py`), and
  the t at each look's degrees of freedom uses its nominal level. At looks 3/5/8/12 that lets
  the last look use 0.0120 per variant instead of the 0.0109 a union bound over looks would.
- Pooling buys degrees of freedom, which is where the power at 12 seeds is: 4 variants with
  11 each. The differences share the control's noise, so the pooled variance is worth fewer
  than their sum: Satterthwaite's `(n - 1) tr(S)^2 / |S|_F^2`, S the sample covariance of the
  variants' differences (about 23 at 12 seeds when control and variant runs are equally
  noisy, not 44). Pooling needs the same seeds for every variant (equal lengths, in seed order)
  and spreads that agree (Bartlett's test, p >= `POOL_MIN_P`); otherwise each variant uses its
  own spread with n - 1 degrees of freedom.
- Futility is non-binding (it only ever withholds a claim, so it cannot add error): an open
  variant stops when its chance of any claim by the last look, predicted from its mean and
  spread so far, is below `FUTILITY`; it ends `inconclusive` with the seeds it would need.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from itertools import pairwise

import numpy as np
from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from scipy import special

from ablations.analysis.spending import Spending, nominal_errors, spent_by_look
from ablations.analysis.verdicts import interval_verdict
from ablations.plan.sections import MetricSection, Verdict

POOL_MIN_P = 0.1
"""Bartlett's p-value at or above which the variants' spreads count as agreeing (pooled). A
generous bar: pooling a variant with 3x the spread of the others understates its noise."""
FUTILITY = 0.1
"""An open variant stops when its predicted chance of any claim by the last look is below."""
MAX_SEEDS = 10_000
"""Seed counts are not searched beyond this: `seeds_for_power` returns it as "beyond reach"."""


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
    """Spread the interval uses: the pooled one when `pooled` (None below two pairs)."""
    df: float | None
    """Degrees of freedom of the t quantile (Satterthwaite's when pooled)."""
    pooled: bool
    """The spread is pooled across the open variants (their spreads agree)."""
    ci_low: float | None
    ci_high: float | None
    """The adjusted interval of variant - control, at confidence `level`."""
    level: float
    """Confidence level of the two-sided interval (1 - this look's alpha / m)."""
    alpha_spent: float
    """Family-wise error spent up to this look."""
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


@lru_cache(maxsize=4096)
def critical_value(df: float, level: float) -> float:
    """Two-sided t quantile: half-width / standard error of a `level` interval at `df`."""
    return float(special.stdtrit(df, 0.5 + level / 2.0))


def bartlett_p(variances: Sequence[float], n: int) -> float:
    """Bartlett's test of equal variances for groups of `n` each (what scipy.stats.bartlett
    computes, from the variances): the p-value."""
    k = len(variances)
    pooled = sum(variances) / k
    if pooled == 0.0:
        return 1.0
    if min(variances) == 0.0:
        return 0.0
    stat = (n - 1) * (k * math.log(pooled) - sum(math.log(v) for v in variances))
    stat /= 1.0 + (k + 1) / (3.0 * k * (n - 1))
    return float(special.chdtrc(k - 1, stat))


def pooled_spread(cov: np.ndarray, n: int) -> tuple[float, float] | None:
    """(pooled variance, Satterthwaite df) from the sample covariance of variants' differences
    on the same `n` seeds, or None when their spreads disagree."""
    m = cov.shape[0]
    variances = [float(v) for v in np.diag(cov)]
    if m < 2 or n < 2 or bartlett_p(variances, n) < POOL_MIN_P:
        return None
    frobenius = float(np.sum(cov * cov))
    pooled = sum(variances) / m
    if frobenius == 0.0:
        return pooled, float(n - 1)
    return pooled, (n - 1) * (pooled * m) ** 2 / frobenius


def spreads(
    columns: Sequence[Sequence[float]],
) -> tuple[list[float], list[float], list[float], bool]:
    """(mean, variance, df) per variant, and whether the variances are pooled: variants with
    the same seeds (equal lengths, two or more) whose spreads agree share one variance."""
    means = [sum(c) / len(c) if c else math.nan for c in columns]
    sizes = {len(c) for c in columns}
    if len(columns) >= 2 and len(sizes) == 1 and min(sizes) >= 2:
        n = len(columns[0])
        centered = np.array(columns, dtype=float) - np.array(means)[:, None]
        pool = pooled_spread(centered @ centered.T / (n - 1), n)
        if pool is not None:
            return means, [pool[0]] * len(columns), [pool[1]] * len(columns), True
    variances = [
        sum((x - m) ** 2 for x in c) / (len(c) - 1) if len(c) >= 2 else math.nan
        for c, m in zip(columns, means, strict=True)
    ]
    return means, variances, [float(len(c) - 1) for c in columns], False


def _rooms(gain: float, metric: MetricSection) -> list[float]:
    """For each claim, how far the gain's interval may reach on its near side and still
    make it (a claim needs its half-width below the room)."""
    u = metric.useful_effect
    rooms = [gain - u, -u - gain]  # better, worse
    rooms.append(gain + u if metric.decision_rule == "non_inferiority" else u - abs(gain))
    return rooms


def seeds_to_decide(gain: float, sd: float, level: float, metric: MetricSection) -> int | None:
    """Seeds at which an interval at `level` around this mean and spread would decide (its
    own t, n - 1 degrees of freedom); None when its mean sits on an edge of the band or more
    than `MAX_SEEDS` would be needed."""
    room = max(_rooms(gain, metric))
    if room <= 0.0:
        return None
    if sd == 0.0:
        return 2

    def decides(n: int) -> bool:
        return critical_value(float(n - 1), level) * sd / math.sqrt(n) <= room

    # The half-width shrinks as n grows: from the normal's count (t >= z), double, then bisect.
    z = float(special.ndtri(0.5 + level / 2.0))
    low = max(2, math.ceil((z * sd / room) ** 2))
    if low > MAX_SEEDS:
        return None
    high = low
    while not decides(high):
        if high == MAX_SEEDS:
            return None
        low, high = high + 1, min(2 * high, MAX_SEEDS)
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if decides(mid) else (mid + 1, high)
    return low


def claim_chance(
    gain: float, sd: float, df: float, n: int, design: LookDesign, metric: MetricSection
) -> float:
    """Predicted chance of a claim at the last look: its mean, given the mean so far, is
    normal with variance sd^2 (N - n) / (N n) (the rest of the seeds and the current
    uncertainty), and the interval's half-width stays at its expected value."""
    big_n = design.max_seeds
    last = design.boundary(len(design.looks) - 1)
    df_last = df * (big_n - 1) / (n - 1)
    half = critical_value(df_last, last.level) * sd / math.sqrt(big_n)
    spread = sd * math.sqrt((big_n - n) / (big_n * n))
    if spread == 0.0:
        return 1.0
    u = metric.useful_effect

    def above(x: float) -> float:
        return float(special.ndtr((gain - x) / spread))

    chance = above(u + half) + (1.0 - above(-u - half))  # better, worse
    if metric.decision_rule == "non_inferiority":
        chance += above(-u + half) - above(u + half)  # not worse, short of better
    elif half < u:
        chance += above(-u + half) - above(u - half)  # equivalent
    return chance


def judge_look(
    design: LookDesign,
    look: int,
    metric: MetricSection,
    diffs: Mapping[str, Sequence[float]],
) -> dict[str, Judgement]:
    """Each open variant at `look`: its adjusted interval, verdict, and whether it is decided.

    `diffs`: for each variant still open, its paired differences (variant - control, metric
    units) on the accepted seed pairs so far, in seed order (variants with the same seeds
    must list them in the same order: their spreads may be pooled). At the last look every
    variant is decided."""
    if not 0 <= look < len(design.looks):
        raise ValueError(f"look {look} is outside the design's {len(design.looks)} looks")
    names = list(diffs)
    columns = [[float(x) for x in diffs[name]] for name in names]
    means, variances, dfs, pooled = spreads(columns)
    return {
        name: _judge(design, look, metric, name, len(column), mean, variance, df, pooled)
        for name, column, mean, variance, df in zip(
            names, columns, means, variances, dfs, strict=True
        )
    }


def _judge(
    design: LookDesign,
    look: int,
    metric: MetricSection,
    name: str,
    n: int,
    mean: float,
    variance: float,
    df: float,
    pooled: bool,
) -> Judgement:
    """One variant at one look, given the spread its interval uses."""
    boundary = design.boundary(look)
    final = look == len(design.looks) - 1
    if n < 2:
        return Judgement(
            variant=name,
            look=look,
            n_pairs=n,
            mean_diff=mean if n else None,
            sd=None,
            df=None,
            pooled=False,
            ci_low=None,
            ci_high=None,
            level=boundary.level,
            alpha_spent=boundary.alpha_spent,
            verdict="inconclusive",
            decided=final,
            futile=False,
            seeds_needed=None,
            note=f"{n} pair(s): no interval" + ("; ended at the last look" if final else ""),
        )
    sd = math.sqrt(variance)
    half = critical_value(df, boundary.level) * sd / math.sqrt(n)
    verdict = interval_verdict(mean - half, mean + half, metric)
    claim = verdict != "inconclusive"
    futile = False
    seeds_needed = None
    if claim:
        note = f"{verdict} at look {look + 1} ({n} seeds)"
    else:
        gain = mean if metric.direction == "maximize" else -mean
        chance = 1.0 if final else claim_chance(gain, sd, df, n, design, metric)
        futile = chance < FUTILITY
        if final or futile:  # it ends inconclusive: say what deciding it would take
            last_level = design.boundary(len(design.looks) - 1).level
            seeds_needed = seeds_to_decide(gain, sd, last_level, metric)
        need = f"about {seeds_needed}" if seeds_needed else "no count (mean on an edge)"
        if final:
            note = f"inconclusive at the last look ({n} seeds); would need {need} seeds"
        elif futile:
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
        df=df,
        pooled=pooled,
        ci_low=mean - half,
        ci_high=mean + half,
        level=boundary.level,
        alpha_spent=boundary.alpha_spent,
        verdict=verdict,
        decided=claim or futile or final,
        futile=futile,
        seeds_needed=seeds_needed,
        note=note,
    )


def seeds_for_power(
    sd: float,
    metric: MetricSection,
    design: LookDesign,
    power: float = 0.8,
    effect_multiple: float = 2.0,
) -> int:
    """Seeds per variant for `power` to claim `better` (or `worse`) when the true effect is
    `effect_multiple` x the useful effect, at the level of the design's last look (the early
    looks only add to it). A one-sided paired t from statsmodels at half the interval's error;
    `MAX_SEEDS` means beyond any reasonable count."""
    from statsmodels.stats.power import TTestPower  # a second to import: only when sizing

    if effect_multiple <= 1.0:
        raise ValueError(f"effect_multiple must exceed 1 (the margin), got {effect_multiple}")
    if sd <= 0.0:
        return 2
    error = 1.0 - design.boundary(len(design.looks) - 1).level
    effect = (effect_multiple - 1.0) * metric.useful_effect / sd
    counts = np.arange(2, MAX_SEEDS + 1)
    reached = TTestPower().power(effect, counts, error / 2.0, alternative="larger") >= power
    return int(counts[np.argmax(reached)]) if reached.any() else MAX_SEEDS
