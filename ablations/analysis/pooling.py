"""The spread and the correlation a look's intervals use.

Spread: each variant's own. The variance of a paired difference is var(control) +
var(variant) - 2 cov, and a variant that destabilises training is noisier than the others:
an interval that borrowed the quieter variants' spread would be too narrow for it (a pooled,
Bartlett-gated spread did exactly that: 5.6-5.8% false claims where 5% was promised). So each
variant's interval uses the sample SD of its own differences with n - 1 degrees of freedom,
which is exact for it whatever the others do.

What is shared is the control: the variants' differences all contain the control's noise,
so their statistics are correlated, corr(v, w) = var(control) / sqrt(var(d_v) var(d_w)),
which the many-to-one boundary uses (`spending.many_to_one_error`). The control's share
var(control) is estimated once from all pairs of variants (the mean covariance of their
differences), each variant's lambda_v^2 = var(control) / var(d_v) from it, and the boundary
assumes every pair at the smallest lambda^2: with correlations lambda_v lambda_w, a lower
correlation only makes the bound higher (Sidak 1968), so the noisiest variant sets it.

Estimators that shared the variants' own spreads too were measured and dropped
(`bench/decision_sim.py` reports them): the two-way arms x seeds spread (13.8% false claims
when the control is the noisier arm), and the unbiased per-arm estimator of each arm's
variance (Grubbs 1948; 10.6% with one variant 3x as noisy). The latter is also the best any
estimator can do here: at 12 seeds and 4 variants its information about var(d_v) is that of
14.7 degrees of freedom (the Cramer-Rao bound), against 11 for the variant's own.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import special

MIN_SEEDS_FOR_CORRELATION = 3
"""Below this many common seeds the control's share is not estimated (no correlation is
assumed: the bound is Sidak's, valid at any correlation)."""


@lru_cache(maxsize=4096)
def critical_value(df: float, level: float) -> float:
    """Two-sided t quantile: half-width / standard error of a `level` interval at `df`."""
    return float(special.stdtrit(df, 0.5 + level / 2.0))


def own_spreads(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, sample variance) of each variant's differences: `diffs` is (campaigns,
    variants, seeds); the variance is NaN below two seeds."""
    n = diffs.shape[-1]
    mean = diffs.mean(axis=-1) if n else np.full(diffs.shape[:-1], np.nan)
    if n < 2:
        return mean, np.full(diffs.shape[:-1], np.nan)
    return mean, diffs.var(axis=-1, ddof=1)


def shared_correlation(diffs: np.ndarray) -> np.ndarray:
    """The correlation the many-to-one boundary may assume between the variants'
    statistics, per campaign: the smallest var(control) / var(d_v) over the variants, the
    control's share estimated once from every pair (0 with one variant or below
    `MIN_SEEDS_FOR_CORRELATION` seeds). `diffs`: (campaigns, variants, seeds), the variants
    on the same seeds."""
    campaigns, variants, n = diffs.shape
    if variants < 2 or n < MIN_SEEDS_FOR_CORRELATION:
        return np.zeros(campaigns)
    centered = diffs - diffs.mean(axis=-1, keepdims=True)
    cov = np.einsum("cvi,cwi->cvw", centered, centered) / (n - 1)
    own = np.diagonal(cov, axis1=1, axis2=2)
    control = (cov.sum(axis=(1, 2)) - own.sum(axis=1)) / (variants * (variants - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.clip(control, 0.0, None)[:, None] / own
    share = np.where(np.isfinite(share), share, 0.0)  # a zero spread: assume nothing
    return np.clip(share.min(axis=1), 0.0, 1.0)
