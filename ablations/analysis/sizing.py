"""How many seeds a variant would need to decide, from its data so far.

It uses the level of the design's last look: the early looks only add to the chance. (The
power a design buys, and the `max` that buys 80%, are simulated through the looks
themselves: `ablations.analysis.simulate`.)
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy import special

from ablations.analysis.pooling import critical_value
from ablations.plan.experiment import MetricSection

MAX_SEEDS = 10_000
"""Seed counts are not searched beyond this."""


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
    return fewest_seeds(decides, low, low, MAX_SEEDS)


def fewest_seeds(holds: Callable[[int], bool], low: int, start: int, most: int) -> int | None:
    """The smallest n in [low, most] for which `holds(n)`, a test that once true stays true as
    n grows (None: not even at `most`). From `start` the count doubles until the test holds,
    then bisects: each test may be a simulation, so few of them."""
    high = start
    while not holds(high):
        if high >= most:
            return None
        low, high = high + 1, min(2 * high, most)
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if holds(mid) else (mid + 1, high)
    return low
