"""Alpha spending: how much of the family-wise error a sequential design may use by each look,
and how one look's share is split among the variants.

A spending function gives the cumulative error spent once a fraction `t` of the maximum
seeds has run (Lan & DeMets 1983); a look may use the increment since the previous look. The
four shapes:

- `obrien_fleming` (Lan-DeMets O'Brien-Fleming-like, two-sided: alpha/2 to each side):
  `4 - 4 Phi(z_{1-alpha/4} / sqrt(t))`.
  Almost nothing early, nearly all of alpha at the last look, so the last look is almost as
  strong as a fixed design (the default before `haybittle_peto`).
- `pocock` (Lan-DeMets Pocock-like): `alpha ln(1 + (e - 1) t)`. Spends evenly in information:
  clear effects stop earlier, at the price of a weaker last look.
- `equal`: the same share at every look, `alpha k / K`, whatever the seeds per look.
- `haybittle_peto` (Haybittle 1971, Peto et al. 1976; the default): the same small share of
  alpha (the plan's `seeds.interim_share`, 12% by default) at every interim look, nearly all of
  it kept for the last look, and next to nothing at a look with fewer than `FEW_SEEDS` seeds per
  variant. It depends on the looks' seeds, not on a fraction alone (`spent_by_look`). Why: each
  look's interval is a t on its own spread, and a t on 2 degrees of freedom (3 seeds) needs
  nearly all of alpha to decide anything, so alpha spent there is lost; at 5 seeds a few per
  cent of alpha decides effects 3x the useful effect from the margin, which O'Brien-Fleming's
  shape (0.4% of alpha by 5 of 12 seeds) leaves to the 8-seed look. Its last look keeps 76% of
  alpha (O'Brien-Fleming's 87%). At looks 3/5/8/12 it decides about as many variants at 2x the
  useful effect as O'Brien-Fleming's shape, with fewer seeds (`bench/decision_designs.py`).

Each reaches exactly `alpha` at the last look and never decreases.

Across the looks the increments add up (`boundaries: union`, the default): the chance that
any look crosses is at most the sum of each look's chance, and each look's paired t is exact
on its own, so a little of alpha goes unspent (3.76% of 5% for O'Brien-Fleming's 4 equal
looks with a known spread). `boundaries: exact` spends it in full: each variant's bounds
from the joint normal of its looks' cumulative statistics (`exact_errors`, the recursive
integration; Lan-DeMets' published values for `obrien_fleming`), and Sidak's share across
the variants (`sidak_share`: valid at any correlation through the control, where Dunnett's
is not for paths over several looks). With each look's spread estimated on 3 to 12 seeds
the exact bounds over-spend a little (the looks' t statistics are less correlated than the
normal's): at looks 3/5/8/12 and the futility that reaches 75% at twice the useful effect
(5%) they made 5.12% (SE 0.16%) family-wise false claims beside a variant twice as noisy,
against 4.55% for the union (`bench/decision_sim.py --boundaries exact`), so `union` stays
the default.

Within a look, `many_to_one_error` splits the look's family-wise increment among the
variants jointly: their statistics share the control's noise, so they are correlated, and
the chance that any of m crosses a common bound is below m times one's (Dunnett 1955;
multi-arm multi-stage designs, Magirr, Jaki & Whitehead 2012): the multivariate normal
with every pair at the correlation `rho` (`any_crossing`).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
from scipy import special

from ablations.plan.design import INTERIM_MOST, INTERIM_SHARE, Spending

FEW_SEEDS = 4
"""A look with fewer seeds per variant than this has a t on at most 2 degrees of freedom:
`haybittle_peto` spends next to nothing there, and futility trusts its spread less
(`sequential.FEW_SEEDS_FUTILITY`)."""
HP_FEW_SHARE = 1e-6
"""What `haybittle_peto` spends at a look with fewer than `FEW_SEEDS` seeds: next to nothing,
not nothing, so that look's intervals stay finite (as wide as so little error makes them)."""

TINY = 1e-9
"""A look's family error below this is split as Bonferroni would: that far in the tails the
variants' crossings are practically exclusive events, and the multivariate normal's
integration error would exceed the error itself."""


def spent(spending: Spending, alpha: float, fraction: float, look: int, looks: int) -> float:
    """Cumulative error spent by `look` (0-based, of `looks`) at `fraction` of the max seeds
    (the shapes that are functions of the fraction; `spent_by_look` takes every shape)."""
    if fraction >= 1.0 or look == looks - 1:
        return alpha  # the last look spends whatever is left, exactly
    if spending == "haybittle_peto":
        raise ValueError("haybittle_peto depends on each look's seeds: use spent_by_look")
    if spending == "obrien_fleming":
        # scipy.special's normal quantile and tail (what scipy.stats.norm calls), not a copy
        z = float(special.ndtri(1.0 - alpha / 4.0))
        return float(4.0 * special.ndtr(-z / math.sqrt(fraction)))
    if spending == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * fraction)
    return alpha * (look + 1) / looks


def spent_by_look(
    spending: Spending,
    alpha: float,
    looks: tuple[int, ...],
    interim_share: float = INTERIM_SHARE,
) -> tuple[float, ...]:
    """Cumulative error spent at each look of `looks` (cumulative seeds, the last is the max);
    `haybittle_peto` spends `interim_share` of `alpha` at each interim look of `FEW_SEEDS` or
    more."""
    last = looks[-1]
    if spending == "haybittle_peto":
        interim = [seeds >= FEW_SEEDS for seeds in looks[:-1]]
        share = min(interim_share, INTERIM_MOST / max(1, sum(interim)))
        steps = itertools.accumulate(share if spends else HP_FEW_SHARE for spends in interim)
        return (*(alpha * s for s in steps), alpha)
    return tuple(
        spent(spending, alpha, seeds / last, k, len(looks)) for k, seeds in enumerate(looks)
    )


def family_spent(
    spending: Spending,
    alpha: float,
    comparisons: int,
    looks: tuple[int, ...],
    interim_share: float = INTERIM_SHARE,
) -> tuple[float, ...]:
    """Family-wise error spent by each look: `alpha` times the fraction the spending function
    spends by then at one variant's share alpha / m (O'Brien-Fleming's shape depends on the
    level: taken at the level each comparison works at, as Bonferroni does)."""
    share = alpha / comparisons
    spent = spent_by_look(spending, share, looks, interim_share)
    return tuple(alpha * s / share for s in spent)


QUADRATURE_NODES = 256
"""Gauss-Legendre nodes over W in [-9, 9]: at correlations up to 0.9 the integrand turns
over a width of at least 0.3 in W, which 256 nodes resolve (checked against adaptive `quad`
over 2-8 comparisons, correlations 0.1-0.9 and bounds 1.5-6)."""


def any_crossing(comparisons: int, rho: float, bound: float) -> float:
    """Chance that any of `comparisons` standard normal statistics, every pair correlated
    `rho` in [0, 1), exceeds `bound` in absolute value: one minus the multivariate normal
    rectangle probability, by its one-factor form (each Z_v = sqrt(rho) W + sqrt(1 - rho)
    E_v, independent given W: Dunnett 1955), integrated over W by scipy's Gauss-Legendre
    `fixed_quad` (one vectorised call: the integrand is smooth, so 256 nodes agree with
    adaptive `quad` to 1e-13 where the chance is above 1e-4, at an eighth of its time). It
    equals `scipy.stats.multivariate_normal(...).cdf` within that one's own integration error
    (tests), at a thousandth of its time, which sizing needs: it judges thousands of simulated
    campaigns, and the bound search calls this some 1 300 times per design."""
    from scipy import integrate  # only when a look is judged

    a, b = math.sqrt(rho), math.sqrt(1.0 - rho)
    if a == 0.0:
        return 1.0 - (1.0 - 2.0 * float(special.ndtr(-bound))) ** comparisons

    def crossing(w: np.ndarray) -> np.ndarray:
        # Given W = w, one statistic lies outside with chance p (both tails summed, never as
        # 1 - inside: no cancellation at the millionth of alpha `haybittle_peto` spends), and
        # any of them with 1 - (1 - p)^m, formed through log1p/expm1 for the same reason.
        p = special.ndtr((a * w - bound) / b) + special.ndtr((-bound - a * w) / b)
        with np.errstate(divide="ignore"):  # p == 1 far out: log1p(-1) = -inf, expm1 -> -1
            anyone = -np.expm1(comparisons * np.log1p(-p))
        return np.exp(-0.5 * w * w) / math.sqrt(2.0 * math.pi) * anyone

    # The factor W beyond 9 SDs holds less than 1e-18 of the mass.
    chance, _ = integrate.fixed_quad(crossing, -9.0, 9.0, n=QUADRATURE_NODES)
    return float(chance)


@lru_cache(maxsize=4096)
def many_to_one_error(comparisons: int, rho: float, family_error: float) -> float:
    """Two-sided error of each of `comparisons` normal statistics, every pair correlated
    `rho` >= 0, such that the chance that any of them crosses the common bound is
    `family_error` (Dunnett's many-to-one bound; Sidak's at rho 0, which holds at any
    correlation)."""
    from scipy import optimize  # only when a look is judged

    m = comparisons
    if m == 1:
        return family_error
    if family_error < TINY:
        return family_error / m
    if rho <= 0.0:
        return 1.0 - (1.0 - family_error) ** (1.0 / m)
    single = float(special.ndtri(1.0 - family_error / 2.0))  # one statistic alone
    bonferroni = float(special.ndtri(1.0 - family_error / (2.0 * m)))

    def excess(bound: float) -> float:
        return any_crossing(m, rho, bound) - family_error

    if excess(bonferroni) >= 0.0:  # numerically at the Bonferroni bound
        return family_error / m
    bound = optimize.brentq(excess, single, bonferroni, xtol=1e-7)
    return float(2.0 * special.ndtr(-bound))


GS_NODES = 256
"""Gauss-Legendre nodes over each look's continuation interval in the recursive integration
of `exact_errors`: the density there is smooth, and 256 nodes reproduce gsDesign's published
Lan-DeMets bounds to their 4 decimals (tests)."""


def sidak_share(comparisons: int, family_error: float) -> float:
    """Each of `comparisons` variants' total error such that the chance that any of them
    errs is at most `family_error`, whatever their positive correlation through the control:
    given the control's runs the variants are independent, and 1 - (1 - p)^m is concave in
    p, so averaging over the control only lowers it (Jensen; Sidak 1967)."""
    return -math.expm1(math.log1p(-family_error) / comparisons)


def _crossing(
    c: float, mass: np.ndarray, shift: np.ndarray, scale: float, less: float = 0.0
) -> float:
    """Chance that a path still open (its weights `mass` at Z_{k-1}, each giving Z_k mean
    `shift` and SD `scale`) crosses +-c at look k, less `less`: both tails summed, never
    1 - inside."""
    tails = special.ndtr((-c - shift) / scale) + special.ndtr((shift - c) / scale)
    return float(np.dot(mass, tails)) - less


@lru_cache(maxsize=1024)
def exact_errors(increments: tuple[float, ...], looks: tuple[int, ...]) -> tuple[float, ...]:
    """Each look's nominal two-sided error for one statistic observed at the cumulative seeds
    `looks`, such that its chance of crossing first at look k is `increments[k]`: the group-
    sequential bounds from the joint normal of the looks' cumulative statistics (corr
    sqrt(n_j / n_k)), by the recursive integration of Armitage, McPherson & Rowe (1969) over
    each look's continuation region. The sum of the increments is spent in full, where a
    union bound over the looks spends less. Lan-DeMets' O'Brien-Fleming-like spending at 4
    equal looks gives z bounds 4.333, 2.963, 2.359, 2.014 (gsDesign's sfLDOF)."""
    from scipy import optimize  # only when a design is built

    nodes, weights = np.polynomial.legendre.leggauss(GS_NODES)
    errors = []
    grid = mass = np.zeros(0)
    for k, (increment, seeds) in enumerate(zip(increments, looks, strict=True)):
        if k == 0:
            bound = float(-special.ndtri(increment / 2.0))
            density = np.exp(-0.5 * (nodes * bound) ** 2) / math.sqrt(2.0 * math.pi)
        else:
            ratio = looks[k - 1] / seeds
            shift, scale = grid * math.sqrt(ratio), math.sqrt(1.0 - ratio)
            if _crossing(0.0, mass, shift, scale) <= increment:
                bound = 0.0  # more error than the open paths can spend: every path crosses
            else:
                bound = optimize.brentq(
                    _crossing, 0.0, 40.0, args=(mass, shift, scale, increment), xtol=1e-10
                )
            # the density of Z_k on the paths that have not crossed by look k
            z = (nodes[:, None] * bound - shift[None, :]) / scale
            density = (np.exp(-0.5 * z * z) @ mass) / (scale * math.sqrt(2.0 * math.pi))
        errors.append(float(2.0 * special.ndtr(-bound)))
        grid, mass = nodes * bound, weights * bound * density
    return tuple(errors)
