"""How many seeds a variant would need: to decide from its data so far, or for a given power.

Both use the level of the design's last look: the early looks only add to the chance.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ablations.analysis.design import LookDesign
from ablations.analysis.pooling import critical_value
from ablations.plan.sections import MetricSection

MAX_SEEDS = 10_000
"""Seed counts are not searched beyond this: `seeds_for_power` returns it as "beyond reach"."""


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
