"""The spread a look's intervals use: each variant's own, or one pooled across variants.

Variants compared on the same seeds share the control's runs, so their differences are
correlated (0.5 when control and variant runs are equally noisy). Their pooled variance, the
mean of their variances, is then worth fewer degrees of freedom than the sum of theirs:
Satterthwaite's `(n - 1) tr(S)^2 / |S|_F^2`, S the sample covariance matrix of the
differences (about 23 at 12 seeds and 4 variants, not 44). The spreads are pooled only when
Bartlett's test finds them agreeing (p >= `POOL_MIN_P`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy import special

POOL_MIN_P = 0.1
"""Bartlett's p-value at or above which the variants' spreads count as agreeing (pooled). A
generous bar: pooling a variant with 3x the spread of the others understates its noise."""


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
