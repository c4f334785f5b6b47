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
  the data support, with step-down: the campaign's), `per-pair` (each pair at the product of
  its two variants' estimated shares, lambda_v lambda_w, rounded down: the follow-up's
  candidate, not adopted: +1.2 points at 2u, but 4.91% (SE 0.07%) false claims without
  futility with one variant 3x as noisy, 100 000 campaigns), or `oracle` (Dunnett at the
  true correlation 0.5 of equal noise, which no campaign knows);
- futility: the predicted chance of a claim below 10% from look 1, or none.

A second table (the follow-up of issue 34: fewer seeds without stopping a variant 4x the
useful effect from the margin) keeps the campaign's spread and correction and varies what
decides when a variant stops: the spending shape (O'Brien-Fleming's, Haybittle-Peto's, the
power family alpha t^r) and the futility rule (its threshold per look; the spread its
prediction uses: the variant's own, pooled over the open variants, half of each, or a t
prediction on n - 1 df). Its columns: correct at 2u over the five cells of `decision_sim`'s
goal, variants at 4u not decided right (of 400 000), mean seeds per variant over the effects
0, +-u, +-2u, +-4u for each rule, and the worst false-claim rate of the first table's cells.

    nice .venv/bin/python bench/decision_designs.py [--campaigns 20000] [--table 1|2] [--only TEXT]
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
from ablations.plan.design import INTERIM_SHARE
from ablations.plan.experiment import MetricSection
from ablations.plan.section import DecisionRule

sys.path.insert(0, str(Path(__file__).resolve().parent))  # decision_sim, beside this file
from decision_sim import EFFECTS, HARD, NOISES, RULES, TRUE, VARIANTS, Noise, differences

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
    futility: bool | tuple[float, ...]
    """True: 10% at every look; a tuple: the threshold at each look before the last."""
    spending: str | float = "obrien_fleming"
    """A shape of `spending.Spending`, or the power family's exponent r (alpha t^r)."""
    futility_sd: str = "own"
    """The spread futility predicts with: own, pooled, mix (half of each variance), t."""
    interim_share: float = INTERIM_SHARE
    """The share of alpha `haybittle_peto` spends at each interim look of 4 seeds or more."""

    @property
    def thresholds(self) -> tuple[float, ...]:
        if self.futility is True:
            return (0.1,) * (len(LOOKS) - 1)
        return self.futility or (0.0,) * (len(LOOKS) - 1)


HP = ("own", "union", "many-to-one", (0.05, 0.1, 0.1), "haybittle_peto")
"""The campaign's design since the follow-up (Haybittle-Peto-like spending, 12% of alpha at
each interim look of 4 seeds or more, futility 5% at 3 seeds and 10% after)."""

DESIGNS = (
    Design("before issue 34", "bartlett", "joint", "bonferroni", True),
    Design("own spread, as before", "own", "joint", "bonferroni", True),
    Design("own, union over looks", "own", "union", "bonferroni", True),
    Design("own, many-to-one, no futility", "own", "union", "many-to-one", False),
    Design("own, many-to-one, OBF (the campaign's before)", "own", "union", "many-to-one", True),
    Design("own, oracle correlation", "own", "union", "oracle", True),
    Design("two-way spread", "two-way", "union", "many-to-one", True),
    Design("per-arm variances", "per-arm", "union", "many-to-one", True),
    Design("own, many-to-one, HP (the campaign's)", *HP),
    Design("own, many-to-one, HP, no futility", "own", "union", "many-to-one", False, HP[-1]),
    Design("own, per-pair correlation, HP", "own", "union", "per-pair", *HP[3:]),
    Design("own, per-pair correlation, HP, no futility", "own", "union", "per-pair", False, HP[-1]),
)

OWN = ("own", "union", "many-to-one")
FOLLOW_UP = (
    Design("OBF, futility 10% (before the follow-up)", *OWN, True),
    Design("OBF, no futility", *OWN, False),
    Design("OBF, 5% at look 1, then 10%", *OWN, (0.05, 0.1, 0.1)),
    Design("OBF, 2% at look 1, then 10%", *OWN, (0.02, 0.1, 0.1)),
    Design("OBF, 5% at look 1, then 12%", *OWN, (0.05, 0.12, 0.12)),
    Design("OBF, futility 15%", *OWN, (0.15,) * 3),
    Design("OBF, futility 20%", *OWN, (0.2,) * 3),
    Design("OBF, futility 30%", *OWN, (0.3,) * 3),
    Design("OBF, futility on a t prediction", *OWN, True, futility_sd="t"),
    Design("OBF, futility on the pooled spread", *OWN, True, futility_sd="pooled"),
    Design("OBF, futility on own+pooled / 2", *OWN, True, futility_sd="mix"),
    Design("power t^3, futility 10%", *OWN, True, spending=3.0),
    Design("power t^4, 5% at look 1, then 10%", *OWN, (0.05, 0.1, 0.1), spending=4.0),
    Design("power t^5, futility 10%", *OWN, True, spending=5.0),
    Design("Pocock, futility 10%", *OWN, True, spending="pocock"),
    Design("HP 9%, futility 10% (not halved)", *OWN, True, "haybittle_peto", interim_share=0.09),
    Design(
        "HP 9%, 5% at 3 seeds (before)",
        *OWN,
        (0.05, 0.1, 0.1),
        "haybittle_peto",
        interim_share=0.09,
    ),
    Design("HP 9%, no futility", *OWN, False, "haybittle_peto", interim_share=0.09),
    Design("HP 11%, 5% at 3 seeds", *OWN, (0.05, 0.1, 0.1), "haybittle_peto", interim_share=0.11),
    Design("HP 12%, 5% at 3 seeds (the campaign's)", *OWN, (0.05, 0.1, 0.1), "haybittle_peto"),
    Design("HP 13%, 5% at 3 seeds", *OWN, (0.05, 0.1, 0.1), "haybittle_peto", interim_share=0.13),
    Design("HP 12%, no futility", *OWN, False, "haybittle_peto"),
)
"""What was tried in the follow-up (OBF: O'Brien-Fleming-like; HP: Haybittle-Peto-like)."""


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
    if isinstance(design.spending, float):
        cumulative = tuple(ALPHA * (n / LOOKS[-1]) ** design.spending for n in LOOKS)
    else:
        cumulative = family_spent(
            design.spending,  # type: ignore[arg-type]
            ALPHA,
            VARIANTS,
            LOOKS,
            design.interim_share,
        )
    increments = np.diff((0.0, *cumulative))
    if design.variants == "bonferroni":
        return tuple(float(i) / VARIANTS for i in increments)
    return tuple(many_to_one_error(remaining, rho, float(i)) for i in increments)


@cache
def pair_errors(design: Design, steps: tuple[int, ...]) -> tuple[float, ...]:
    """Each look's per-comparison error when the variants' statistics correlate
    lambda_v lambda_w (one factor: the control), lambda_v^2 = steps[v] / 10 (-1: a variant
    decided by a claim, left out): the many-to-one bound per pair instead of at the smallest
    share."""
    from scipy import integrate

    shares = [x / 10 for x in steps if x >= 0]
    a = np.sqrt(shares)
    b = np.sqrt(1.0 - np.asarray(shares))
    m = len(shares)
    out = []
    for increment in np.diff((0.0, *family_spent(design.spending, ALPHA, VARIANTS, LOOKS))):  # type: ignore[arg-type]
        if m == 1 or increment < 1e-9:
            out.append(float(increment) / m)
            continue

        def inside(w: float, bound: float) -> float:
            one = special.ndtr((bound - a * w) / b) - special.ndtr((-bound - a * w) / b)
            return float(math.exp(-0.5 * w * w) / math.sqrt(2 * math.pi) * np.prod(one))

        def excess(bound: float, increment: float = float(increment)) -> float:
            covered = integrate.quad(inside, -9, 9, args=(bound,), epsabs=1e-13, epsrel=1e-11)
            return 1.0 - covered[0] - increment

        low = float(special.ndtri(1 - increment / 2))
        high = float(special.ndtri(1 - increment / (2 * m)))
        bound = high if excess(high) >= 0 else optimize.brentq(excess, low, high, xtol=1e-7)
        out.append(float(2 * special.ndtr(-bound)))
    return tuple(out)


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
            if design.variants == "per-pair":  # each variant's share, rounded down; the
                # variants stopped by futility (not in the block) at the smallest of them
                steps = np.floor(np.clip(share, 0, 0.9) * 10 + 1e-9).astype(int)
                missing = np.maximum(remaining - len(cols), 0)
                fill = np.repeat(steps.min(axis=1)[:, None], VARIANTS, axis=1)
                rank = np.arange(VARIANTS)[None, :]
                full = np.where(rank < missing[:, None], fill, 99)
                full = np.sort(np.concatenate([steps, full], axis=1), axis=1)[:, :VARIANTS]
                full = np.where(rank < remaining[:, None], full, -1)  # -1: claimed, left out
                keys, inverse = np.unique(full, axis=0, return_inverse=True)
                table = np.array([pair_errors(design, tuple(int(x) for x in key)) for key in keys])
            else:
                keys, inverse = np.unique(
                    np.stack([remaining, rho], axis=1), axis=0, return_inverse=True
                )
                table = np.array([errors(design, int(r), float(p)) for r, p in keys])
            here, last = table[inverse.reshape(-1), k], table[inverse.reshape(-1), -1]
            mean, sd = block.mean(axis=-1), np.sqrt(var)
            half = special.stdtrit(df, 1 - here[:, None] / 2) * sd / math.sqrt(n)
            codes = interval_verdicts(mean - half, mean + half, metric)
            decided = (codes > 0) | final
            if design.futility and not final:  # the campaign's rule, at this look's threshold
                chance = futility_chance(design, mean, sd, n, 1 - last[:, None], metric)
                decided |= (codes == 0) & (chance < design.thresholds[k])
            for j, col in enumerate(cols):
                done = rows[decided[:, j]]
                verdict[done, col] = codes[decided[:, j], j]
                seeds[done, col] = n
                open_[done, col] = False
                claims[rows] += decided[:, j] & (codes[:, j] > 0)
        claimed += claims
    return verdict, seeds


def futility_chance(
    design: Design,
    mean: np.ndarray,
    sd: np.ndarray,
    n: int,
    last_level: np.ndarray,
    metric: MetricSection,
) -> np.ndarray:
    """The campaign's predicted chance of a claim (`claim_chance`), on the spread
    `design.futility_sd` names; `t`: the same prediction with Student's t on n - 1 df."""
    var = sd**2
    pooled = np.nanmean(var, axis=1, keepdims=True) * np.ones_like(var)
    if design.futility_sd == "pooled":
        sd = np.sqrt(pooled)
    elif design.futility_sd == "mix":
        sd = np.sqrt((var + pooled) / 2.0)
    if design.futility_sd != "t":
        return claim_chance(mean, sd, n, SHAPE, last_level, metric)
    big_n, u = LOOKS[-1], metric.useful_effect
    half = special.stdtrit(big_n - 1, 0.5 + last_level / 2.0) * sd / math.sqrt(big_n)
    spread = sd * math.sqrt((big_n - n) / (big_n * n))

    def above(x: np.ndarray | float) -> np.ndarray:
        return np.asarray(special.stdtr(n - 1, (mean - x) / spread))

    chance = above(u + half) + 1.0 - above(-u - half)
    if metric.decision_rule == "non_inferiority":
        return chance + above(-u + half) - above(u + half)
    return chance + np.where(half < u, above(-u + half) - above(u - half), 0.0)


def false_rate(verdict: np.ndarray, effects: tuple[float, ...]) -> float:
    names = ("inconclusive", "better", "worse", "not worse", "equivalent")
    false = np.zeros(verdict.shape, dtype=bool)
    for code in range(1, 5):
        holds = np.array([TRUE[names[code]](e) for e in effects])
        false |= (verdict == code) & ~holds[None, :]
    return float(false.any(axis=1).mean())


def worst_false_rate(design: Design, campaigns: int) -> tuple[float, str]:
    """The highest false-claim rate over the margin x noise cells, and its cell."""
    noises = {n.name: n for n in NOISES}
    worst, where = 0.0, ""
    for i, (rule, margin) in enumerate((("non_inferiority", -1.0), ("superiority", 1.0))):
        for j, name in enumerate(CELLS):
            noise: Noise = noises[name]
            effects = noise.effects(margin) if noise.effects else (margin,) * VARIANTS
            d = differences(np.random.default_rng([7, i, j]), campaigns, effects, noise)
            rate = false_rate(run(design, rule, d)[0], effects)  # type: ignore[arg-type]
            if rate > worst:
                worst, where = rate, f"{rule} {margin:+.0f}u {name}"
    return worst, where


def follow_up(campaigns: int, only: str = "") -> None:
    """The second table: every rule at every effect of `decision_sim.EFFECTS`, equal noise."""
    names = ("inconclusive", "better", "worse", "not worse", "equivalent")
    print(
        f"{'design':<42}{'2u correct':>10}{'4u missed':>10}{'seeds sup / NI / eq':>22}"
        f"{'x max':>7}{'worst FWER':>11}"
    )
    for design in (d for d in FOLLOW_UP if only in d.name):
        hard_right = hard_total = missed = 0
        seeds: dict[str, float] = {}
        for i, rule in enumerate(RULES):
            ran_total = 0
            for j, effect in enumerate(EFFECTS):
                d = differences(
                    np.random.default_rng([9, i, j]), campaigns, (effect,) * VARIANTS, NOISES[0]
                )
                verdict, ran = run(design, rule, d)
                ran_total += int(ran.sum())
                right = np.zeros(verdict.shape, dtype=bool)
                for code in range(1, 5):
                    right |= (verdict == code) & TRUE[names[code]](effect)
                if effect in HARD[rule]:
                    hard_right += int(right.sum())
                    hard_total += right.size
                if abs(effect) == 4.0:
                    missed += int((~right).sum())
            seeds[rule] = ran_total / (campaigns * VARIANTS * len(EFFECTS))
        worst, _ = worst_false_rate(design, campaigns)
        ratio = max(seeds.values()) / LOOKS[-1]
        print(
            f"{design.name:<42}{hard_right / hard_total:>10.1%}{missed:>10}"
            f"{' / '.join(f'{seeds[r]:.2f}' for r in RULES):>22}{ratio:>7.3f}{worst:>10.2%}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=20_000)
    parser.add_argument("--table", choices=["1", "2", "both"], default="both")
    parser.add_argument("--only", default="", help="only the designs whose name has this text")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.table in ("2", "both"):
        follow_up(args.campaigns, args.only)
        print()
    if args.table == "2":
        print(f"\n{time.perf_counter() - start:.0f} s, {args.campaigns} campaigns per cell")
        return 0
    print(f"{'design':<36}{'worst FWER':>11}  {'in cell':<34}{'2u correct':>10}{'seeds':>7}")
    for design in (d for d in DESIGNS if args.only in d.name):
        worst, where = worst_false_rate(design, args.campaigns)
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
