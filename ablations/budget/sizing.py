"""What the main phase buys: its power, the `max` that reaches 80%, and what it costs.

From the pilot's paired spread (two or more pilot seeds of a variant and the control), or the
design's prior `expected_sd`, the power at twice the useful effect that the plan's `max`
gives is simulated through the campaign's own look rules (`analysis.simulate`: the same
intervals, corrections and futility), and the smallest `max` reaching 80% is suggested. With
no spread known, the largest paired spread at which `max` reaches 80% is stated instead:
the seeds cannot decide a useful effect when it is far below any spread seeds show (a warning).
The expected case runs each variant to the first look that holds the seeds it needs; the
worst case runs every variant to `max`. Both are projected onto the slots against what is
left of the window, so the gate (and `ablate plan` / `ablate budget` before anything runs)
can say whether the decision is affordable.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_serializer

from ablations.analysis.design import LookDesign
from ablations.analysis.looks import look_design
from ablations.analysis.simulate import POWER, max_for_power, power_at
from ablations.budget.projection import project
from ablations.plan.design import growing_looks
from ablations.plan.model import Plan
from ablations.plan.offers import RunEstimate
from ablations.plan.variants import CONTROL, PlannedRun
from ablations.run.records import RunRecord
from ablations.text.units import hours

DECIDES = 0.5
"""Below this power at twice the useful effect, the seeds cannot decide a useful effect: a
warning. (With no spread known: when `max` reaches 80% only at a paired spread below
`SMALL_SD` x the useful effect.)"""
SMALL_SD = 0.5
"""Seed-to-seed spreads of a paired difference are rarely below half a useful effect (the
demo's is about one): a design that needs less cannot decide anything in practice."""


class VariantSizing(BaseModel):
    """One variant's seeds: needed for the power above, and run in the expected case."""

    model_config = ConfigDict(frozen=True)

    variant: str
    sd: float | None
    """The paired spread used (None: unknown, the expected case assumes `max`)."""
    power: float | None = None
    """Chance of the right claim at twice the useful effect with the plan's `max`, simulated
    through the looks (None: no spread known)."""
    seeds_needed: int | None
    """The smallest `max` whose design reaches 80% power at twice the useful effect (None:
    no spread known, or more than 400 seeds)."""
    expected_seeds: int
    """The first look's seed count that holds `seeds_needed`, at most the design's `max`."""

    @model_serializer(mode="wrap")
    def _as_recorded(self, handler: Any) -> dict[str, Any]:
        """`power`, added later, is written only when set: older gate decisions read back
        byte for byte."""
        data: dict[str, Any] = handler(self)
        if "power" not in self.model_fields_set:
            data.pop("power", None)
        return data


class Sizing(BaseModel):
    """The main phase sized from the spread, projected in the expected and worst cases."""

    model_config = ConfigDict(frozen=True)

    sd_source: Literal["pilot", "expected_sd", "none"]
    max_seeds: int | None = None
    """The plan's `max` (seeds per variant at the last look)."""
    useful_effect: float | None = None
    """The plan's useful effect, in metric units."""
    sd: float | None = None
    """The typical paired spread (the pilot's RMS, or `expected_sd`; None: unknown)."""
    power: float | None = None
    """Power at twice the useful effect that `max` gives at `sd` (None: no spread known)."""
    suggested_max: int | None = None
    """The smallest `max` reaching 80% at `sd` (None: unknown, or beyond 400 seeds)."""
    decidable_sd: float | None = None
    """The largest paired spread at which `max` reaches 80% power at twice the useful
    effect: what the design can decide at all."""
    variants: list[VariantSizing]
    expected_hours: float
    """Wall hours on the slots when each variant runs its expected seeds."""
    worst_hours: float
    """Wall hours when every variant runs to `max` (no look decides anything early)."""
    available_hours: float
    """What is left of the window, less the reserve and preparation."""

    @model_serializer(mode="wrap")
    def _as_recorded(self, handler: Any) -> dict[str, Any]:
        """Fields added later are written only when set: older gate decisions read back
        byte for byte."""
        data: dict[str, Any] = handler(self)
        for key in ("max_seeds", "useful_effect", "sd", "power", "suggested_max", "decidable_sd"):
            if key not in self.model_fields_set:
                data.pop(key, None)
        return data

    @property
    def expected_fits(self) -> bool:
        return self.expected_hours <= self.available_hours

    @property
    def worst_fits(self) -> bool:
        return self.worst_hours <= self.available_hours

    def warning(self) -> str | None:
        """Why these seeds cannot decide a useful effect, when they cannot."""
        if self.max_seeds is None or self.useful_effect is None:
            return None
        u = self.useful_effect
        if self.power is not None and self.sd is not None:
            if self.power >= DECIDES:
                return None
            need = (
                f"80% needs max {self.suggested_max}"
                if self.suggested_max
                else "not even 400 seeds reach 80%"
            )
            return (
                f"{self.max_seeds} seeds per variant cannot decide a useful effect: at the "
                f"paired spread {self.sd:.3g} ({self.sd / u:.2g}x the useful effect {u:g}) a "
                f"variant 2x the useful effect away gets its claim {self.power:.0%} of the "
                f"time; {need}"
            )
        if self.decidable_sd is None or self.decidable_sd >= SMALL_SD * u:
            return None
        return (
            f"{self.max_seeds} seeds per variant can decide a useful effect only if the paired "
            f"spread is below {self.decidable_sd:.2g} ({self.decidable_sd / u:.2g}x the useful "
            f"effect {u:g}), far below what seeds usually show: add seeds (a sequential "
            "design with a larger max, sized by its expected_sd)"
        )

    def summary(self) -> dict[str, object]:
        """The `--json` object: hours to 0.01, each variant's seeds."""
        return {
            "sd_source": self.sd_source,
            "max_seeds": self.max_seeds,
            "power": None if self.power is None else round(self.power, 3),
            "suggested_max": self.suggested_max,
            "decidable_sd": self.decidable_sd,
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
            "none": "no known spread (pilot 2+ seeds or set seeds.expected_sd)",
        }[self.sd_source]
        out = [self._power_line(source)]
        for v in self.variants:
            if v.power is None:
                out.append(f"  {v.variant}: power unknown -> {v.expected_seeds} seeds expected")
                continue
            need = f"80% at max {v.seeds_needed}" if v.seeds_needed else "80% beyond 400"
            out.append(
                f"  {v.variant}: {v.power:.0%} (sd {v.sd:.3g}; {need}) -> "
                f"{v.expected_seeds} seeds expected"
            )
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

    def _power_line(self, source: str) -> str:
        """The headline: the power `max` buys, and the `max` that buys 80%."""
        head = f"power at 2x the useful effect with max {self.max_seeds}"
        if self.power is None or self.sd is None:
            bound = (
                ""
                if self.decidable_sd is None
                else f"; 80% only if the paired spread is below {self.decidable_sd:.3g}"
            )
            return f"{head}: unknown, {source}{bound}. Per variant:"
        need = (
            f"80% needs max {self.suggested_max}"
            if self.suggested_max
            else "80% needs more than 400 seeds"
        )
        return (
            f"{head} (simulated through the looks, paired spread {self.sd:.3g} from {source}): "
            f"{self.power:.0%}; {need}. Per variant:"
        )


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
    design = look_design(plan)
    power = _Power(plan, design)
    sized = []
    for name in names:
        sd = spreads.get(name, typical)
        needed = None if sd is None else power.needed(sd)
        look = next((n for n in design.looks if needed is not None and n >= needed), None)
        sized.append(
            VariantSizing(
                variant=name,
                sd=sd,
                power=None if sd is None else power.at(sd),
                seeds_needed=needed,
                expected_seeds=look or design.looks[-1],
            )
        )
    position = {seed: i for i, seed in enumerate(plan.seed_list)}
    expected_seeds = {v.variant: v.expected_seeds for v in sized}
    expected_seeds[CONTROL] = max(expected_seeds.values(), default=design.looks[-1])
    expected = [r for r in runs if position[r.seed] < expected_seeds.get(r.variant, 0)]
    return Sizing(
        sd_source=sd_source,
        max_seeds=design.max_seeds,
        useful_effect=plan.metric.useful_effect,
        sd=typical,
        power=None if typical is None else power.at(typical),
        suggested_max=None if typical is None else power.needed(typical),
        decidable_sd=power.decidable_sd() if typical is None else None,
        variants=sized,
        expected_hours=project(plan, expected, estimate, slots).wall_hours,
        worst_hours=project(plan, list(runs), estimate, slots).wall_hours,
        available_hours=available_hours,
    )


class _Power:
    """The plan's design's power at a paired spread, and the `max` reaching 80%: simulated
    once per design and spread in a process (the gate sizes the kept runs several times)."""

    def __init__(self, plan: Plan, design: LookDesign) -> None:
        self.design = design
        self.u = plan.metric.useful_effect
        self.fixed = plan.sequential is None

    def at(self, sd: float) -> float:
        return _power(self.design, sd, self.u)

    def needed(self, sd: float) -> int | None:
        return _needed(self.design, sd, self.u, self.fixed)

    def decidable_sd(self) -> float:
        """The largest paired spread at which the design reaches 80% power: a bisection on
        the spread (power falls as it grows), to 2% of the useful effect."""
        low, high = 0.0, 4.0 * self.u
        if self.at(high) >= POWER:
            return high
        while high - low > 0.02 * self.u:
            mid = (low + high) / 2
            low, high = (mid, high) if self.at(mid) >= POWER else (low, mid)
        return low


@lru_cache(maxsize=256)
def _power(design: LookDesign, sd: float, useful_effect: float) -> float:
    return power_at(design, sd, useful_effect)


@lru_cache(maxsize=256)
def _needed(design: LookDesign, sd: float, useful_effect: float, fixed: bool) -> int | None:
    start = design.looks[0]

    def looks_for(most: int) -> tuple[int, ...]:
        """A fixed list stays one look; a sequential design keeps its start and grows."""
        return (most,) if fixed else growing_looks(min(start, most), most)

    return max_for_power(design, sd, useful_effect, looks_for)
