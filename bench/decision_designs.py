"""The designs tried for issue 34, side by side: how each spread estimate and correction does
on the error guarantee (the worst false-claim rate over margin and unequal-noise cells) and on
power at twice the useful effect, at looks [3, 5, 8, 12], 4 variants, alpha 0.05.

The campaign's own design is `bench/decision_sim.py`'s (through the campaign's code). Here
each alternative is written out in a few lines of its own, on the same simulated data and
the same verdict rules, so that what was rejected, and why, can be measured again:

- spread: `own` (each variant's own paired SD, n - 1 df: the campaign's), `bartlett` (the
  spreads pooled when Bartlett's test finds them agreeing, Satterthwaite's df: before issue
  34), `two-way` (one arms x seeds spread for all: 4(n - 1) df, right only under equal
  noise), `per-arm` (each arm's variance by Grubbs' unbiased estimator, var(d_v) =
  var(control) + var(v) with Satterthwaite's df: the most any estimator can know here, 14.7
  df at 12 seeds against 11, by the Cramer-Rao bound);
- looks: `joint` (each variant's alpha / m spent with the looks' joint normal: before issue
  34) or `union` (the increments add up: the campaign's);
- variants: `bonferroni` (alpha / m), `many-to-one` (Dunnett at the smallest control share
  the data support, with step-down: the campaign's), or `oracle` (Dunnett at the true
  correlation 0.5 of equal noise, which no campaign knows);
- futility: the predicted chance of a claim below 10% from look 1, or none.

    nice .venv/bin/python bench/decision_designs.py [--campaigns 20000]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from scipy import optimize, special, stats

from ablations.analysis.design import LookDesign
from ablations.analysis.sequential import claim_chance
from ablations.analysis.spending import family_spent, many_to_one_error, spent_by_look
from ablations.analysis.verdicts import interval_verdicts
from ablations.plan.experiment import MetricSection
from ablations.plan.section import DecisionRule

sys.path.insert(0, str(Path(__file__).resolve().parent))  # decision_sim, beside this file
from decision_sim import NOISES, TRUE, VARIANTS, Noise, differences

LOOKS = (3, 5, 8, 12)
ALPHA = 0.05
CELLS = ("normal", "t3", "one 2x", "one 3x", "3 noisy + quiet", "noisy control", "quiet control")
"""The unequal-noise cells each design's guarantee is measured on (with the margins)."""
SHAPE = LookDesign(looks=LOOKS, comparisons=VARIANTS)
"""What the futility rule reads of the design: its looks."""


@dataclass(frozen=True)
class Design:
    name: str
    spread: str
    looks: str
    variants: str
    futility: bool


DESIGNS = (
    Design("before issue 34", "bartlett", "joint", "bonferroni", True),
    Design("own spread, as before", "own", "joint", "bonferroni", True),
    Design("own, union over looks", "own", "union", "bonferroni", True),
    Design("own, many-to-one, no futility", "own", "union", "many-to-one", False),
    Design("own, many-to-one (the campaign's)", "own", "union", "many-to-one", True),
    Design("own, oracle correlation", "own", "union", "oracle", True),
    Design("two-way spread", "two-way", "union", "many-to-one", True),
    Design("per-arm variances", "per-arm", "union", "many-to-one", True),
)


@cache
def joint_errors(share: float) -> tuple[float, ...]:
    """Before issue 34: each variant's nominal errors from the looks' joint normal."""
    cumulative = spent_by_look("obrien_fleming", share, LOOKS)
    seeds = np.asarray(LOOKS, dtype=float)
    corr = np.sqrt(np.minimum.outer(seeds, seeds) / np.maximum.outer(seeds, seeds))
    bounds: list[float] = []
    for k in range(len(LOOKS)):
        increment = cumulative[k] - (cumulative[k - 1] if k else 0.0)
        widest = float(special.ndtri(1.0 - increment / 2.0))
        if k == 0:
            bounds.append(widest)
            continue
        joint = stats.multivariate_normal(
            np.zeros(k + 1), corr[: k + 1, : k + 1], maxpts=20_000 * (k + 1), seed=0
        )
        target = 1.0 - cumulative[k]

        def excess(c: float, joint: object = joint, target: float = target) -> float:
            limits = np.asarray([*bounds, c])
            return float(joint.cdf(limits, lower_limit=-limits)) - target  # type: ignore[attr-defined]

        bounds.append(
            widest if excess(widest) <= 0 else optimize.brentq(excess, widest - 1, widest)
        )
    return tuple(float(2.0 * special.ndtr(-c)) for c in bounds)


def errors(design: Design, remaining: int, rho: float) -> tuple[float, ...]:
    """Each look's per-comparison two-sided error."""
    if design.looks == "joint":
        return joint_errors(ALPHA / VARIANTS)
    cumulative = family_spent("obrien_fleming", ALPHA, VARIANTS, LOOKS)
    increments = np.diff((0.0, *cumulative))
    if design.variants == "bonferroni":
        return tuple(float(i) / VARIANTS for i in increments)
    return tuple(many_to_one_error(remaining, rho, float(i)) for i in increments)


def spread(design: Design, d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(variance of each difference, its df, the control share lambda^2) for (C, m, n)."""
    c, m, n = d.shape
    centered = d - d.mean(axis=-1, keepdims=True)
    cov = np.einsum("cvi,cwi->cvw", centered, centered) / (n - 1)
    own = np.diagonal(cov, axis1=1, axis2=2).copy()
    control = (cov.sum(axis=(1, 2)) - own.sum(axis=1)) / max(1, m * (m - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.clip(control, 0, None)[:, None] / own
    share = np.nan_to_num(share) if m > 1 else np.zeros((c, m))
    df = np.full((c, m), n - 1.0)
    if design.spread == "own" or m < 2:
        return own, df, share
    if design.spread == "bartlett":
        pooled = own.mean(axis=1)
        stat = (n - 1) * (m * np.log(pooled) - np.log(own).sum(axis=1))
        stat /= 1.0 + (m + 1) / (3.0 * m * (n - 1))
        agree = special.chdtrc(m - 1, stat) >= 0.1
        satterthwaite = (n - 1) * (pooled * m) ** 2 / (cov * cov).sum(axis=(1, 2))
        var = np.where(agree[:, None], pooled[:, None], own)
        return var, np.where(agree[:, None], satterthwaite[:, None], df), share
    total = (m + 1) * own.sum(axis=1) - cov.sum(axis=(1, 2))  # sum of the arms' pair variances
    if design.spread == "two-way":
        var = 2.0 * total / (m * (m + 1))
        return np.repeat(var[:, None], m, axis=1), np.full((c, m), (n - 1.0) * m), share
    # per-arm (Grubbs): var(d_v) = var(control) + var(v), each arm's variance unbiased;
    # Satterthwaite's df from the estimator's own variance, 2 tr(A S A S) / (n - 1)
    a = _per_arm_forms(m)
    var = np.einsum("vij,cij->cv", a, cov)
    arm = np.clip(var - control[:, None], 0, None)
    plug = np.clip(control, 0, None)[:, None, None] * np.ones((m, m)) + np.einsum(
        "cv,vw->cvw", arm, np.eye(m)
    )
    expected = np.einsum("vij,cij->cv", a, plug)
    a_s = np.einsum("vij,cjk->cvik", a, plug)
    spread_of = np.einsum("cvik,cvki->cv", a_s, a_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (n - 1) * expected**2 / spread_of
    bad = (var <= 0) | ~np.isfinite(df)
    return np.where(bad, own, var), np.where(bad, n - 1.0, np.maximum(df, 1.0)), share


@cache
def _per_arm_forms(m: int) -> np.ndarray:
    """A[v] with var(d_v) estimated as tr(A[v] S), S the differences' covariance: Grubbs'
    control share (mean covariance) plus the variant's own arm variance."""
    forms = np.zeros((m, m, m))
    for i in range(m):
        for j in range(m):
            s = np.zeros((m, m))
            s[i, j] = 1.0
            trace, total, rest = np.trace(s), s.sum(), s.sum(axis=1) - np.diag(s)
            control = (total - trace) / (m * (m - 1))
            pairs = (m + 1) * trace - total
            arm = ((m - 1) * np.diag(s) + trace - 2 * rest - pairs / m) / (m - 1)
            forms[:, i, j] = control + arm
    return (forms + forms.transpose(0, 2, 1)) / 2  # symmetric: tr(A S) is unchanged


def run(design: Design, rule: DecisionRule, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    metric = MetricSection(threshold=0.0, useful_effect=1.0, decision_rule=rule)
    c = d.shape[0]
    open_ = np.ones((c, VARIANTS), dtype=bool)
    verdict = np.zeros((c, VARIANTS), dtype=int)
    seeds = np.zeros((c, VARIANTS), dtype=int)
    claimed = np.zeros(c, dtype=int)
    bits = 1 << np.arange(VARIANTS)
    for k, n in enumerate(LOOKS):
        final = k == len(LOOKS) - 1
        patterns = (open_ * bits).sum(axis=1)
        claims = np.zeros(c, dtype=int)
        for pattern in np.unique(patterns):
            if pattern == 0:
                continue
            rows = np.nonzero(patterns == pattern)[0]
            cols = np.nonzero(pattern & bits)[0]
            block = d[np.ix_(rows, cols, np.arange(n))]
            var, df, share = spread(design, block)
            rho = np.floor(np.clip(share.min(axis=1), 0, 0.9) * 10 + 1e-9) / 10
            if design.variants == "oracle":
                rho = np.full(len(rows), 0.5)
            remaining = VARIANTS - claimed[rows]
            keys, inverse = np.unique(
                np.stack([remaining, rho], axis=1), axis=0, return_inverse=True
            )
            table = np.array([errors(design, int(r), float(p)) for r, p in keys])
            here, last = table[inverse.reshape(-1), k], table[inverse.reshape(-1), -1]
            mean, sd = block.mean(axis=-1), np.sqrt(var)
            half = special.stdtrit(df, 1 - here[:, None] / 2) * sd / math.sqrt(n)
            codes = interval_verdicts(mean - half, mean + half, metric)
            decided = (codes > 0) | final
            if design.futility and not final:  # the campaign's own rule, 10% from look 1
                chance = claim_chance(mean, sd, n, SHAPE, 1 - last[:, None], metric)
                decided |= (codes == 0) & (chance < 0.1)
            for j, col in enumerate(cols):
                done = rows[decided[:, j]]
                verdict[done, col] = codes[decided[:, j], j]
                seeds[done, col] = n
                open_[done, col] = False
                claims[rows] += decided[:, j] & (codes[:, j] > 0)
        claimed += claims
    return verdict, seeds


def false_rate(verdict: np.ndarray, effects: tuple[float, ...]) -> float:
    names = ("inconclusive", "better", "worse", "not worse", "equivalent")
    false = np.zeros(verdict.shape, dtype=bool)
    for code in range(1, 5):
        holds = np.array([TRUE[names[code]](e) for e in effects])
        false |= (verdict == code) & ~holds[None, :]
    return float(false.any(axis=1).mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=20_000)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    noises = {n.name: n for n in NOISES}
    print(f"{'design':<36}{'worst FWER':>11}  {'in cell':<34}{'2u correct':>10}{'seeds':>7}")
    for design in DESIGNS:
        worst, where = 0.0, ""
        for i, (rule, margin) in enumerate((("non_inferiority", -1.0), ("superiority", 1.0))):
            for j, name in enumerate(CELLS):
                noise: Noise = noises[name]
                effects = noise.effects(margin) if noise.effects else (margin,) * VARIANTS
                d = differences(np.random.default_rng([7, i, j]), args.campaigns, effects, noise)
                rate = false_rate(run(design, rule, d)[0], effects)  # type: ignore[arg-type]
                if rate > worst:
                    worst, where = rate, f"{rule} {margin:+.0f}u {name}"
        correct, seeds = [], []
        for i, (rule, effect) in enumerate(
            (("superiority", 2.0), ("superiority", -2.0), ("non_inferiority", -2.0))
        ):
            d = differences(np.random.default_rng([8, i]), args.campaigns, (effect,) * 4, NOISES[0])
            verdict, ran = run(design, rule, d)  # type: ignore[arg-type]
            correct.append(float(np.mean(verdict == (1 if effect > 0 else 2))))
            seeds.append(float(ran.mean()))
        print(
            f"{design.name:<36}{worst:>10.2%}  {where:<34}{np.mean(correct):>10.1%}"
            f"{np.mean(seeds):>7.2f}",
            flush=True,
        )
    print(f"\n{time.perf_counter() - start:.0f} s, {args.campaigns} campaigns per cell")
    return 0


if __name__ == "__main__":
    sys.exit(main())
