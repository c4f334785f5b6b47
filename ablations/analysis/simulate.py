"""Many simulated campaigns decided look by look through the campaign's own look rules.

`run_campaigns` takes the paired differences of many campaigns at once and applies
`judge_arrays` at every look to the variants still open, as a campaign does. The decision
simulation (`bench/decision_sim.py`) and sizing (`power_at`, `max_for_power`: what `ablate
plan`, `ablate budget` and the gate say about the power a plan buys) both run it, so what
they report is what the campaign's looks would do.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ablations.analysis.design import LookDesign
from ablations.analysis.sequential import judge_arrays
from ablations.analysis.sizing import fewest_seeds
from ablations.analysis.verdicts import INTERVAL_VERDICTS
from ablations.plan.experiment import MetricSection

SIZING_CAMPAIGNS = 2000
"""Simulated campaigns behind a sizing figure: its Monte-Carlo error is about 1 point."""
EFFECT_MULTIPLE = 2.0
"""Power is stated at twice the useful effect: a clear, useful difference."""
POWER = 0.8
"""The power a suggested `max` reaches."""
MOST_SEEDS = 400
"""`max_for_power` looks no further: beyond, the question needs another design."""
STEADY = 1.25
"""`max_for_power` confirms its answer where a look is added up to this many times it: the
default looks add one there at most once (`plan.design.LAST_GROWTH`)."""


@dataclass(frozen=True)
class Outcome:
    """How each variant of each campaign ended: arrays (campaigns, variants)."""

    verdict: np.ndarray
    """Indices into `INTERVAL_VERDICTS` (0: inconclusive)."""
    seeds: np.ndarray
    """Seeds the variant ran (the look that decided it)."""
    futile: np.ndarray
    """Stopped early by futility."""
    flagged: np.ndarray
    """Seen to diverge at any look it was judged at (`stability`)."""
    unstable: np.ndarray
    """Seen to diverge at the look that ended it without a claim: it ends `unstable`."""


def run_campaigns(design: LookDesign, metric: MetricSection, diffs: np.ndarray) -> Outcome:
    """Decide every variant of every campaign look by look. `diffs` (campaigns, variants,
    design.max_seeds): the paired differences each variant would get, in seed order."""
    campaigns, variants, _ = diffs.shape
    open_ = np.ones((campaigns, variants), dtype=bool)
    verdict = np.zeros((campaigns, variants), dtype=int)
    seeds = np.zeros((campaigns, variants), dtype=int)
    futile = np.zeros((campaigns, variants), dtype=bool)
    flagged = np.zeros((campaigns, variants), dtype=bool)
    unstable = np.zeros((campaigns, variants), dtype=bool)
    claimed = np.zeros(campaigns, dtype=int)
    bits = 1 << np.arange(variants)
    for look, n in enumerate(design.looks):
        claims = np.zeros(campaigns, dtype=int)
        patterns = (open_ * bits).sum(axis=1)
        for pattern in np.unique(patterns):
            if pattern == 0:
                continue
            rows = np.nonzero(patterns == pattern)[0]
            cols = np.nonzero(pattern & bits)[0]
            judged = judge_arrays(
                design, look, metric, diffs[np.ix_(rows, cols, np.arange(n))], claimed[rows]
            )
            for j, col in enumerate(cols):
                done = judged.decided[:, j]
                ended = rows[done]
                verdict[ended, col] = judged.verdict[done, j]
                futile[ended, col] = judged.futile[done, j]
                flagged[rows, col] |= judged.unstable[:, j]
                unstable[ended, col] = judged.unstable[done, j] & (judged.verdict[done, j] == 0)
                seeds[ended, col] = n
                open_[ended, col] = False
                claims[rows] += done & (judged.verdict[:, j] > 0)
        claimed += claims
        if not open_.any():
            break
    return Outcome(verdict=verdict, seeds=seeds, futile=futile, flagged=flagged, unstable=unstable)


def equal_noise_differences(
    rng: np.random.Generator, campaigns: int, variants: int, seeds: int, effect: float, sd: float
) -> np.ndarray:
    """Paired differences of campaigns whose control and variants are equally noisy (arm SD
    sd / sqrt(2), so each difference has SD `sd`) and every variant's true effect `effect`.
    Drawn seed by seed, so the same generator gives the same first seeds whatever `seeds`
    is: designs with different maxima are compared on common data."""
    arms = np.moveaxis(rng.standard_normal((seeds, campaigns, variants + 1)), 0, -1)
    arms = arms * (sd / np.sqrt(2.0))
    return effect + arms[:, 1:] - arms[:, :1]


def power_at(
    design: LookDesign,
    sd: float,
    useful_effect: float,
    *,
    effect_multiple: float = EFFECT_MULTIPLE,
    campaigns: int = SIZING_CAMPAIGNS,
    seed: int = 0,
) -> float:
    """Chance that a variant whose true effect is `effect_multiple` x the useful effect
    (worse by that much; better is the mirror image) is decided `worse` by the design's
    looks, every variant alike, the paired spread `sd` (equal noise in every arm)."""
    if sd <= 0.0:
        return 1.0
    metric = MetricSection(threshold=0.0, useful_effect=1.0)  # in units of the useful effect
    diffs = equal_noise_differences(
        np.random.default_rng(seed),
        campaigns,
        design.comparisons,
        design.max_seeds,
        -effect_multiple,
        sd / useful_effect,
    )
    outcome = run_campaigns(design, metric, diffs)
    return float(np.mean(outcome.verdict == INTERVAL_VERDICTS.index("worse")))


def max_for_power(
    design: LookDesign,
    sd: float,
    useful_effect: float,
    looks_for: Callable[[int], tuple[int, ...]],
    *,
    power: float = POWER,
    effect_multiple: float = EFFECT_MULTIPLE,
) -> int | None:
    """The smallest `max` (seeds per variant) whose design reaches `power` at
    `effect_multiple` x the useful effect, and so does every larger `max` up to
    `STEADY` x it (None: not within `MOST_SEEDS`). `looks_for(max)` gives the looks a design
    with that maximum would have. Power need not grow with `max` where a look is added (it
    splits the last look's alpha), so a `max` found by the search is confirmed at each such
    `max` above it: a miss there restarts the search past the miss."""

    def reaches(most: int) -> bool:
        trial = design.model_copy(update={"looks": looks_for(most)})
        return power_at(trial, sd, useful_effect, effect_multiple=effect_multiple) >= power

    low = 2
    start = max(design.max_seeds, 2)
    while True:
        found = fewest_seeds(reaches, low, max(start, low), MOST_SEEDS)
        if found is None:
            return None
        top = min(MOST_SEEDS, math.ceil(found * STEADY))
        # Between looks added, power grows with `max` (the same seeds, one more each): a
        # dip can come only where `looks_for` adds a look.
        added = [n for n in range(found + 1, top + 1) if len(looks_for(n)) > len(looks_for(n - 1))]
        miss = next((n for n in added if not reaches(n)), None)
        if miss is None:
            return found
        low = start = miss + 1
