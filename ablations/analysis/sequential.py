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
  noisy, not 44). Pooling needs the same seeds for every variant (equal lengths, in seed
  order) and spreads that agree (Bartlett's test, p >= `pooling.POOL_MIN_P`); otherwise each
  variant uses its own spread with n - 1 degrees of freedom.
- Futility is non-binding (it only ever withholds a claim, so it cannot add error): an open
  variant stops when its chance of any claim by the last look, predicted from its mean and
  spread so far, is below `FUTILITY`; it ends `inconclusive` with the seeds it would need.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict
from scipy import special

from ablations.analysis.design import LookBoundary, LookDesign, fixed_design
from ablations.analysis.pooling import critical_value, spreads
from ablations.analysis.sizing import seeds_for_power, seeds_to_decide
from ablations.analysis.spending import Spending
from ablations.analysis.verdicts import interval_verdict
from ablations.plan.sections import MetricSection, Verdict

__all__ = [
    "Judgement",
    "LookBoundary",
    "LookDesign",
    "Spending",
    "claim_chance",
    "fixed_design",
    "judge_look",
    "seeds_for_power",
]

FUTILITY = 0.1
"""An open variant stops when its predicted chance of any claim by the last look is below."""


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
            pooled=False,
            ci_low=None,
            ci_high=None,
            level=boundary.level,
            alpha_spent=boundary.alpha_spent,
            verdict=verdict,
            decided=decided,
            futile=False,
            seeds_needed=None,
            note=note,
        )


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
        return Judgement.without_interval(
            name,
            look,
            boundary,
            verdict="inconclusive",
            decided=final,
            note=f"{n} pair(s): no interval" + ("; ended at the last look" if final else ""),
            n_pairs=n,
            mean_diff=mean if n else None,
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
