"""The order runs are submitted in: with a greedy slot lease, the order is the schedule."""

from __future__ import annotations

import statistics

from ablations.plan.variants import PlannedRun
from ablations.run.records import RunRecord


def longest_first(runs: list[PlannedRun], measured: list[RunRecord]) -> list[PlannedRun]:
    """Submission order for a phase: longest projected run first.

    Each task leases the next free slot, so submission order is the schedule; longest first
    makes that greedy lease pack like LPT (within 4/3 of optimal) instead of leaving one long
    run for the end. A run's projection is the steps it trains (a main run resumed from its
    pilot trains only the rest) times its variant's measured seconds per
    step (from the pilot's records; the median of those for variants the pilot did not run).
    Without measurements every run weighs those steps, and the sort, being stable, keeps the
    plan's order among equals."""
    per_step = {
        r.variant: r.timings.train / r.steps_trained for r in measured if r.steps_trained > 0
    }
    default = statistics.median(per_step.values()) if per_step else 1.0
    return sorted(runs, key=lambda r: -r.trained_steps * per_step.get(r.variant, default))
