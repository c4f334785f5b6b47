"""Alpha spending: how much of the family-wise error a sequential design may use by each look.

A spending function gives the cumulative error spent once a fraction `t` of the maximum
seeds has run (Lan & DeMets 1983); a look may use the increment since the previous look. The
three shapes:

- `obrien_fleming` (Lan-DeMets O'Brien-Fleming-like, two-sided: alpha/2 to each side):
  `4 - 4 Phi(z_{1-alpha/4} / sqrt(t))`.
  Almost nothing early, nearly all of alpha at the last look, so the last look is almost as
  strong as a fixed design: the default, because the power at `max` is what most variants
  need.
- `pocock` (Lan-DeMets Pocock-like): `alpha ln(1 + (e - 1) t)`. Spends evenly in information:
  clear effects stop earlier, at the price of a weaker last look.
- `equal`: the same share at every look, `alpha k / K`, whatever the seeds per look.

Each reaches exactly `alpha` at `t = 1` and never decreases.

`nominal_errors` turns a spending into the two-sided error each look's test may use: the
group-sequential boundary `c_k` with P(|Z_j| < c_j for j < k, |Z_k| >= c_k) = the look's
increment, Z the standardized mean at each look (jointly normal, corr(Z_j, Z_k) =
sqrt(n_j / n_k)), from scipy's multivariate normal. That is above the increment itself (a
path that crossed early would often cross later too): 0.0120 instead of 0.0109 at the last of
looks 3/5/8/12 spending 0.0125 O'Brien-Fleming-like, worth about 4 points of power at 2u in
`bench/decision_sim.py`.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Literal

import numpy as np
from scipy import special

Spending = Literal["obrien_fleming", "pocock", "equal"]
"""How the family-wise error is spent over the looks."""


def spent(spending: Spending, alpha: float, fraction: float, look: int, looks: int) -> float:
    """Cumulative error spent by `look` (0-based, of `looks`) at `fraction` of the max seeds."""
    if fraction >= 1.0 or look == looks - 1:
        return alpha  # the last look spends whatever is left, exactly
    if spending == "obrien_fleming":
        # scipy.special's normal quantile and tail (what scipy.stats.norm calls), not a copy
        z = float(special.ndtri(1.0 - alpha / 4.0))
        return float(4.0 * special.ndtr(-z / math.sqrt(fraction)))
    if spending == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * fraction)
    return alpha * (look + 1) / looks


def spent_by_look(spending: Spending, alpha: float, looks: tuple[int, ...]) -> tuple[float, ...]:
    """Cumulative error spent at each look of `looks` (cumulative seeds, the last is the max)."""
    last = looks[-1]
    return tuple(
        spent(spending, alpha, seeds / last, k, len(looks)) for k, seeds in enumerate(looks)
    )


def nominal_errors(spending: Spending, alpha: float, looks: tuple[int, ...]) -> tuple[float, ...]:
    """Two-sided nominal error of each look's test so that the looks together spend `alpha`
    as `spending` says (exact for a normal statistic; the t at each look uses it as is)."""
    from scipy import optimize, stats  # a second to import: only when a design is judged

    cumulative = spent_by_look(spending, alpha, looks)
    seeds = np.asarray(looks, dtype=float)
    corr = np.sqrt(np.minimum.outer(seeds, seeds) / np.maximum.outer(seeds, seeds))
    bounds: list[float] = []
    for k in range(len(looks)):
        increment = cumulative[k] - (cumulative[k - 1] if k else 0.0)
        # The union bound's c (crossing at this look alone) is the largest c can be.
        widest = float(special.ndtri(1.0 - increment / 2.0))
        if k == 0:
            bounds.append(widest)
            continue
        joint = stats.multivariate_normal(
            np.zeros(k + 1),
            corr[: k + 1, : k + 1],
            maxpts=20_000 * (k + 1),  # about a second per design; 3 significant digits
            abseps=1e-9,
            releps=1e-6,
            seed=0,
        )
        stayed = 1.0 - cumulative[k - 1]  # no earlier look crossed

        earlier = tuple(bounds)
        excess = partial(_excess, joint=joint, earlier=earlier, target=stayed - increment)
        if excess(widest) <= 0.0:  # numerically at the union bound: keep it
            bounds.append(widest)
        else:
            bounds.append(optimize.brentq(excess, widest - 1.0, widest, xtol=1e-5))
    return tuple(float(2.0 * special.ndtr(-c)) for c in bounds)


def _excess(c: float, joint: Any, earlier: tuple[float, ...], target: float) -> float:
    """P(no look up to this one crossed, with bound c here) - the target: zero at the bound."""
    limits = np.asarray([*earlier, c])
    return float(joint.cdf(limits, lower_limit=-limits)) - target
