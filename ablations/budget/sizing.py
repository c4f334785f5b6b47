"""How many seeds the main phase should buy, and what the expected and worst cases cost.

From the pilot's paired spread (two or more pilot seeds of a variant and the control), or the
design's prior `expected_sd`, each variant gets the seeds it needs for 80% power to reach a
decided verdict when its true effect is twice the useful effect, at the design's error
control. The expected case runs each variant to the first look that holds those seeds; the
worst case runs every variant to `max`. Both are projected onto the slots against what is
left of the window, so the gate (and `ablate plan` / `ablate budget` before anything runs)
can say whether the decision is affordable.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ablations.analysis.looks import look_design
from ablations.analysis.sequential import seeds_for_power
from ablations.budget.projection import project
from ablations.plan.model import Plan
from ablations.plan.sections import RunEstimate
from ablations.plan.variants import CONTROL, PlannedRun
from ablations.records import RunRecord
from ablations.units import hours

POWER = 0.8
EFFECT_MULTIPLE = 2.0
"""Seeds are sized for 80% power at twice the useful effect (a clear, useful difference)."""


class VariantSizing(BaseModel):
    """One variant's seeds: needed for the power above, and run in the expected case."""

    model_config = ConfigDict(frozen=True)

    variant: str
    sd: float | None
    """The paired spread used (None: unknown, the expected case assumes `max`)."""
    seeds_needed: int | None
    """Seeds for 80% power at twice the useful effect (None: no spread known)."""
    expected_seeds: int
    """The first look's seed count that holds `seeds_needed`, at most the design's `max`."""


class Sizing(BaseModel):
    """The main phase sized from the spread, projected in the expected and worst cases."""

    model_config = ConfigDict(frozen=True)

    sd_source: Literal["pilot", "expected_sd", "none"]
    variants: list[VariantSizing]
    expected_hours: float
    """Wall hours on the slots when each variant runs its expected seeds."""
    worst_hours: float
    """Wall hours when every variant runs to `max` (no look decides anything early)."""
    available_hours: float
    """What is left of the window, less the reserve and preparation."""

    @property
    def expected_fits(self) -> bool:
        return self.expected_hours <= self.available_hours

    @property
    def worst_fits(self) -> bool:
        return self.worst_hours <= self.available_hours

    def summary(self) -> dict[str, object]:
        """The `--json` object: hours to 0.01, each variant's seeds."""
        return {
            "sd_source": self.sd_source,
            "expected_hours": round(self.expected_hours, 2),
            "worst_hours": round(self.worst_hours, 2),
            "available_hours": round(self.available_hours, 2),
            "expected_fits": self.expected_fits,
            "worst_fits": self.worst_fits,
            "variants": [v.model_dump() for v in self.variants],
        }

    def lines(self) -> list[str]:
        """The sizing in words: per variant, then the two cases against the window."""
        source = {
            "pilot": "the pilot's paired spread",
            "expected_sd": "the plan's expected_sd",
            "none": "no known spread (run a pilot with 2+ seeds or set seeds.expected_sd)",
        }[self.sd_source]
        out = [f"seeds for 80% power at 2x the useful effect, from {source}:"]
        for v in self.variants:
            need = "unknown" if v.seeds_needed is None else str(v.seeds_needed)
            sd = "" if v.sd is None else f" (sd {v.sd:.3g})"
            out.append(f"  {v.variant}: {need}{sd} -> {v.expected_seeds} seeds expected")
        fit = (
            "both fit"
            if self.worst_fits
            else "the expected case fits, the worst case does not"
            if self.expected_fits
            else "even the expected case does not fit"
        )
        out.append(
            f"main phase: expected {hours(self.expected_hours)}, worst case (every variant to "
            f"max) {hours(self.worst_hours)}, against {hours(self.available_hours)} available: "
            f"{fit}"
        )
        return out


def pilot_spreads(pilot: Sequence[RunRecord], metric: str) -> dict[str, float]:
    """Variant -> the SD of its paired pilot differences from the control (2+ seeds)."""
    values: dict[str, dict[int, float]] = {}
    for r in pilot:
        if r.status == "accepted" or (r.status == "rejected" and metric in r.metrics):
            value = r.metrics.get(metric)
            if value is not None and math.isfinite(value):
                values.setdefault(r.variant, {})[r.seed] = value
    control = values.get(CONTROL, {})
    spreads = {}
    for variant, mine in values.items():
        if variant == CONTROL:
            continue
        diffs = [mine[s] - control[s] for s in mine if s in control]
        if len(diffs) >= 2:
            spreads[variant] = statistics.stdev(diffs)
    return spreads


def size_main(
    plan: Plan,
    runs: Sequence[PlannedRun],
    estimate: RunEstimate,
    slots: int,
    *,
    available_hours: float,
    pilot: Sequence[RunRecord] = (),
) -> Sizing:
    """Size the main phase of `runs` (the registered main runs still to run)."""
    design = look_design(plan)
    spreads = pilot_spreads(pilot, plan.metric.name)
    sd_source: Literal["pilot", "expected_sd", "none"] = "none"
    prior = plan.sequential.expected_sd if plan.sequential else None
    # Variants the pilot did not measure take the pilot's typical spread (its RMS).
    typical = math.sqrt(statistics.fmean(s * s for s in spreads.values())) if spreads else None
    if spreads:
        sd_source = "pilot"
    elif prior is not None:
        sd_source, typical = "expected_sd", prior
    names = list(dict.fromkeys(r.variant for r in runs if r.variant != CONTROL))
    sized = []
    for name in names:
        sd = spreads.get(name, typical)
        needed = (
            None if sd is None else seeds_for_power(sd, plan.metric, design, POWER, EFFECT_MULTIPLE)
        )
        look = next((n for n in design.looks if needed is not None and n >= needed), None)
        sized.append(
            VariantSizing(
                variant=name, sd=sd, seeds_needed=needed, expected_seeds=look or design.looks[-1]
            )
        )
    position = {seed: i for i, seed in enumerate(plan.seed_list)}
    expected_seeds = {v.variant: v.expected_seeds for v in sized}
    expected_seeds[CONTROL] = max(expected_seeds.values(), default=design.looks[-1])
    expected = [r for r in runs if position[r.seed] < expected_seeds.get(r.variant, 0)]
    return Sizing(
        sd_source=sd_source,
        variants=sized,
        expected_hours=project(plan, expected, estimate, slots).wall_hours,
        worst_hours=project(plan, list(runs), estimate, slots).wall_hours,
        available_hours=available_hours,
    )
