"""A package judged against the work: window fit, cost, and what to do when it overruns.

Two entry points share one result:
- `assess_plan`: the plan's registered runs, projected from its estimate or the pilot's
  records, on the slots the package provides;
- `assess_hours`: figures given by hand (busy wall hours for a card and window).

When the work overruns the window, the suggestions are: the next longer package of the same
card that holds it, more lots of the same package (plans on `devices: auto` only, since more
cards only help when the runs can spread over them), and the categories that would have to
be cut instead, in the gate's `trim_order`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from ablations.budget.catalog import Catalog, Package
from ablations.budget.cost import CostSummary, accepted_results, cost_summary, rejection_reasons
from ablations.budget.estimate import estimate_from_records
from ablations.budget.projection import (
    Projection,
    WindowFit,
    fit_window,
    per_device,
    project,
    slot_count,
)
from ablations.budget.sizing import Sizing, size_main
from ablations.plan.model import Plan, plan_hash
from ablations.plan.offers import Cost
from ablations.run.records import RunRecord
from ablations.text.units import hours as show_hours
from ablations.text.units import usd

if TYPE_CHECKING:
    from ablations.probe.sweep import ProbeResult
from ablations.plan.runs import planned_runs
from ablations.plan.variants import PlannedRun


class Suggestion(BaseModel):
    """One way to make the work fit."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["package", "lots", "cut"]
    text: str
    fits: bool
    gpu: str | None = None
    days: int | None = None
    lots: int | None = None
    window_hours: float | None = None
    wall_hours: float | None = None
    unused_hours: float | None = None
    price_usd: float | None = None
    """Price of the alternative package (None when unknown, or for a cut)."""
    cut: list[str] = []
    """Categories dropped (for a cut)."""


class BudgetAssessment(BaseModel):
    """Everything `ablate budget` shows, as one model."""

    package: Package
    slots: int
    source: Literal["plan estimate", "probe", "pilot records", "given hours"]
    """Where the busy hours come from."""
    busy_hours: float
    """Machine-busy hours in all (summed over slots)."""
    fit: WindowFit
    margin: float | None = None
    """The gate's `budget_margin` (plans only)."""
    fits_with_margin: bool | None = None
    """Whether it still fits with the margin kept in reserve (plans only)."""
    cost: CostSummary
    suggestions: list[Suggestion] = []
    notes: list[str] = []
    sizing: Sizing | None = None
    """The main phase sized from the spread (plans only): seeds per variant, expected and
    worst-case time, as the gate will state them after the pilot."""
    projection: Projection | None = None

    def summary(self) -> dict[str, Any]:
        """The `--json` object: the contract fields first, money to cents, hours to 0.01."""
        cost = self.cost
        return {
            "window_hours": _h(self.fit.window_hours),
            "fits": self.fit.fits,
            "unused_hours": _h(self.fit.unused_hours),
            "overrun_hours": _h(self.fit.overrun_hours),
            "price_usd": _usd(cost.package_usd),
            "cost_per_accepted_usd": _usd(cost.cost_per_accepted_usd),
            "suggestions": [
                {
                    **s.model_dump(),
                    "window_hours": _h(s.window_hours),
                    "wall_hours": _h(s.wall_hours),
                    "unused_hours": _h(s.unused_hours),
                    "price_usd": _usd(s.price_usd),
                }
                for s in self.suggestions
            ],
            "gpu": self.package.gpu,
            "days": self.package.days,
            "lots": self.package.lots,
            "cards": self.package.cards,
            "slots": self.slots,
            "source": self.source,
            "busy_hours": _h(self.busy_hours),
            "wall_hours": _h(self.fit.wall_hours),
            "prep_hours": _h(self.fit.prep_hours),
            "margin": self.margin,
            "fits_with_margin": self.fits_with_margin,
            "sizing": None if self.sizing is None else self.sizing.summary(),
            "price_per_lot_usd": _usd(self.package.price_per_lot_usd),
            "other_costs_usd": _usd(cost.other_usd),
            "total_usd": _usd(cost.total_usd),
            "accepted": cost.accepted,
            "undefined_reason": cost.undefined_reason,
            "rejections": cost.rejections,
            "notes": self.notes,
        }


def _usd(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _h(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _longer_package(
    catalog: Catalog, package: Package, wall_hours: float, prep_hours: float
) -> Suggestion | None:
    """The shortest longer package of the same card (same lots) that holds the work."""
    for offer in catalog.offers_for(package.gpu):
        if offer.days <= package.days:
            continue
        fit = fit_window(wall_hours, prep_hours, offer.window_hours)
        if fit.fits:
            price = (
                None if offer.price_per_lot_usd is None else offer.price_per_lot_usd * package.lots
            )
            shown = "price unknown" if price is None else usd(price)
            return Suggestion(
                kind="package",
                text=(
                    f"{package.lots} x {offer.gpu} for {offer.days} days ({shown}): window "
                    f"{show_hours(offer.window_hours)}, {show_hours(fit.unused_hours)} unused"
                ),
                fits=True,
                gpu=offer.gpu,
                days=offer.days,
                lots=package.lots,
                window_hours=offer.window_hours,
                wall_hours=wall_hours,
                unused_hours=fit.unused_hours,
                price_usd=price,
            )
    return None


def assess_hours(
    package: Package,
    hours: float,
    *,
    prep_hours: float = 0.0,
    accepted: int | None = None,
    other_costs: Sequence[Cost] = (),
    catalog: Catalog | None = None,
) -> BudgetAssessment:
    """Given busy wall hours (already spread over the cards) against a package."""
    if not math.isfinite(hours) or hours < 0:
        raise ValueError(f"hours must be a finite number >= 0, got {hours}")
    catalog = catalog or Catalog()
    fit = fit_window(hours, prep_hours, package.window_hours)
    suggestions: list[Suggestion] = []
    notes: list[str] = []
    if not fit.fits:
        longer = _longer_package(catalog, package, hours, prep_hours)
        if longer:
            suggestions.append(longer)
        else:
            notes.append(f"no known {package.gpu} package holds {show_hours(hours + prep_hours)}")
    return BudgetAssessment(
        package=package,
        slots=package.cards,
        source="given hours",
        busy_hours=hours,
        fit=fit,
        cost=cost_summary(package, other_costs, accepted),
        suggestions=suggestions,
        notes=notes,
    )


def _more_lots(
    plan: Plan,
    catalog: Catalog,
    package: Package,
    runs: Sequence[PlannedRun],
    projection: Projection,
) -> Suggestion | None:
    if plan.resources.devices != "auto":
        return None  # the plan pins its devices: more cards would sit idle
    largest_phase = max(sum(r.phase == p for r in runs) for p in ("pilot", "main"))
    per_lot = package.cards_per_lot * per_device(plan)
    for lots in range(package.lots + 1, math.ceil(largest_phase / per_lot) + 1):
        bigger = project(
            plan, runs, projection.estimate, slot_count(plan, lots * package.cards_per_lot)
        )
        if bigger.fits:
            per = package.price_per_lot_usd
            price = None if per is None else per * lots
            shown = "price unknown" if price is None else usd(price)
            return Suggestion(
                kind="lots",
                text=(
                    f"{lots} x {package.gpu} for {package.days} days ({shown}): "
                    f"{show_hours(bigger.wall_hours)} busy over {bigger.slots} slots, "
                    f"{show_hours(bigger.unused_hours)} unused"
                ),
                fits=True,
                gpu=package.gpu,
                days=package.days,
                lots=lots,
                window_hours=package.window_hours,
                wall_hours=bigger.wall_hours,
                unused_hours=bigger.unused_hours,
                price_usd=price,
            )
    return None


def _cut(plan: Plan, runs: Sequence[PlannedRun], projection: Projection) -> Suggestion | None:
    """Drop main-phase categories in the gate's trim order until the rest fits."""
    kept = list(runs)
    cut: list[str] = []
    for category in plan.gate.trim_order:
        if not any(r.category == category and r.phase == "main" for r in kept):
            continue
        kept = [r for r in kept if not (r.category == category and r.phase == "main")]
        cut.append(category)
        trimmed = project(plan, kept, projection.estimate, projection.slots)
        if trimmed.fits or category == plan.gate.trim_order[-1]:
            verdict = (
                f"{show_hours(trimmed.unused_hours)} unused"
                if trimmed.fits
                else f"still {show_hours(trimmed.overrun_hours)} over"
            )
            return Suggestion(
                kind="cut",
                text=(
                    f"cut the {' and '.join(cut)} runs: {show_hours(trimmed.wall_hours)} busy, "
                    f"{verdict}"
                ),
                fits=trimmed.fits,
                window_hours=trimmed.window_hours,
                wall_hours=trimmed.wall_hours,
                unused_hours=trimmed.unused_hours if trimmed.fits else None,
                cut=cut,
            )
    return None


def assess_plan(
    plan: Plan,
    *,
    records: Sequence[RunRecord] = (),
    accepted: int | None = None,
    probe: ProbeResult | None = None,
    runs: Sequence[PlannedRun] | None = None,
    slots: int | None = None,
) -> BudgetAssessment:
    """The plan's registered runs against its package.

    Busy hours come from the pilot's records when there are any, else from `probe` (the
    step, evaluation and build times `ablate probe` measured), else from the plan's
    `budget.estimate`. `accepted` overrides the count taken from the records. `runs`: the
    plan's runs when the caller has them already (a loaded `Campaign`'s), else built here.
    `slots`: the slots the runs will have (`ablate plan`: those `ablate run` opens on this
    machine); default, the package's cards as the plan's `resources` use them.
    """
    catalog = Catalog(plan.budget.offers)
    package = catalog.resolve(plan.budget.package)
    if runs is None:
        runs = planned_runs(plan, plan_hash(plan))
    pilot = [r for r in records if r.phase == "pilot"]
    estimate = plan.budget.estimate if probe is None else probe.estimate(plan.budget.estimate)
    if pilot:
        estimate = estimate_from_records(pilot, plan)
    slots = slot_count(plan, package.cards) if slots is None else slots
    projection = project(plan, runs, estimate, slots)
    rejections: list[str] = []
    if records:
        rejections = rejection_reasons(records)
        if accepted is None:
            accepted = accepted_results(records)
    suggestions: list[Suggestion] = []
    notes: list[str] = []
    if not projection.fits:
        for found in (
            _longer_package(catalog, package, projection.wall_hours, projection.prep_hours),
            _more_lots(plan, catalog, package, runs, projection),
            _cut(plan, runs, projection),
        ):
            if found is not None:
                suggestions.append(found)
        if not any(s.kind == "package" for s in suggestions):
            notes.append(f"no longer known {package.gpu} package holds the runs")
    margin = plan.gate.budget_margin
    needed = projection.wall_hours + projection.prep_hours
    available = projection.window_hours * (1 - margin) - projection.prep_hours
    sizing = size_main(
        plan,
        [r for r in runs if r.phase == "main"],
        estimate,
        projection.slots,
        available_hours=max(0.0, available),
        pilot=pilot,
    )
    return BudgetAssessment(
        package=package,
        slots=projection.slots,
        source="pilot records" if pilot else "probe" if probe is not None else "plan estimate",
        busy_hours=projection.busy_hours,
        fit=WindowFit.model_validate(projection.model_dump(include=set(WindowFit.model_fields))),
        margin=margin,
        fits_with_margin=needed <= projection.window_hours * (1 - margin),
        cost=cost_summary(package, plan.budget.other_costs, accepted, rejections),
        suggestions=suggestions,
        notes=notes,
        projection=projection,
        sizing=sizing,
    )
