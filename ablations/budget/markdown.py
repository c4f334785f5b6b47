"""Markdown for REPORT.md: the budget section and planned vs realized (no headings; the
report adds them)."""

from __future__ import annotations

from collections.abc import Sequence

from ablations.budget.assess import BudgetAssessment
from ablations.budget.cost import CostSummary
from ablations.budget.realized import PlannedVsRealized
from ablations.text.units import hours, signed_hours, usd


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def cost_lines(cost: CostSummary) -> list[str]:
    """The price, the spend and the cost per accepted result (or why it is undefined)."""
    out = [f"- Package price: {usd(cost.package_usd)}"]
    out += [f"- {c.name}: {usd(c.usd)}" for c in cost.other_costs]
    if cost.other_costs:
        out.append(f"- Spend in all: {usd(cost.total_usd)}")
    if cost.cost_per_accepted_usd is not None:
        out.append(
            f"- Cost per accepted result: {usd(cost.cost_per_accepted_usd)} "
            f"({usd(cost.total_usd)} over {cost.accepted} accepted)"
        )
    else:
        out.append(f"- Cost per accepted result: undefined ({cost.undefined_reason})")
        if cost.accepted == 0:
            out.append(f"- Spent without an accepted result: {usd(cost.total_usd)}")
    if cost.rejections:
        out.append("- Not accepted:")
        out += [f"  - {line}" for line in cost.rejections]
    return out


def budget_markdown(assessment: BudgetAssessment) -> str:
    """The budget section: package, window fit, alternatives and cost."""
    a, fit = assessment, assessment.fit
    p = a.package
    verdict = (
        f"fits, {hours(fit.unused_hours)} unused"
        if fit.fits
        else f"does not fit: {hours(fit.overrun_hours)} over the window"
    )
    out = [
        f"- Package: {p.label()} ({p.cards} card(s), {a.slots} slot(s)); window "
        f"{hours(fit.window_hours)}",
        (
            f"- Busy: {hours(fit.wall_hours)} wall (given), plus {hours(fit.prep_hours)} "
            "preparation"
            if a.source == "given hours"
            else f"- Busy: {hours(a.busy_hours)} machine time, {hours(fit.wall_hours)} wall over "
            f"the slots ({a.source}), plus {hours(fit.prep_hours)} preparation"
        ),
        f"- Window: {verdict}",
    ]
    if a.margin is not None and a.fits_with_margin is not None:
        out.append(
            f"- With the gate's {a.margin:.0%} reserve: "
            + ("fits" if a.fits_with_margin else "does not fit")
        )
    out += [f"- Instead: {s.text}" for s in a.suggestions]
    out += [f"- Note: {n}" for n in a.notes]
    if a.sizing is not None:
        head, *variants, cases = a.sizing.lines()
        out.append(f"- Sizing: {head} " + "; ".join(v.strip() for v in variants))
        out.append(f"- Sizing: {cases}")
        if a.sizing.warning():
            out.append(f"- Warning: {a.sizing.warning()}")
    out += cost_lines(a.cost)
    return "\n".join(out)


def _wall(pvr: PlannedVsRealized) -> str:
    """The wall time, with the gate's wait (pilot's end to the decision) said apart."""
    wall, wait = pvr.realized_wall_hours, pvr.gate_wait_hours
    if wall is None:
        return "no wall time recorded."
    if wait is None:
        return f"wall {hours(wall)} (first start to last end; no gate wait in between)."
    return (
        f"wall {hours(wall)} from the first start to the last end, of which the gate's wait "
        f"(last pilot end to the decision) {hours(wait)}: {hours(max(0.0, wall - wait))} "
        "without it."
    )


def _unspent(pvr: PlannedVsRealized) -> str:
    """Planned hours of runs that never ran, by why: trimmed, unneeded, pending."""
    parts = [
        f"{hours(h)} {status} ({n} run{'s' if n != 1 else ''})"
        for status, (n, h) in sorted(pvr.unspent_by_status().items())
    ]
    return (", ".join(parts) + f"; {hours(pvr.unspent_planned_hours)} in all") if parts else "none"


def planned_vs_realized_markdown(pvr: PlannedVsRealized) -> str:
    """The registered projection beside the realized times, deviations and decisions."""
    planned = pvr.planned
    compared = pvr.compared_planned_hours
    out = [
        f"Registered projection: {hours(planned.busy_hours)} busy, {hours(planned.wall_hours)} "
        f"wall over {planned.slots} slot(s) in a {hours(planned.window_hours)} window "
        f"({'fits' if planned.fits else 'over by ' + hours(planned.overrun_hours)}).",
        "",
        f"Realized: {hours(pvr.realized_busy_hours)} busy over the recorded runs "
        f"(planned for them: {hours(compared)}, deviation "
        f"{signed_hours(pvr.realized_busy_hours - compared)}{'; ' + pvr.why if pvr.why else ''}); "
        f"{_wall(pvr)}",
        "",
        f"Planned but not run: {_unspent(pvr)}.",
        "",
        _table(
            ["Part", "Planned", "Realized", "Deviation"],
            [
                [
                    d.part,
                    hours(d.planned_hours),
                    hours(d.realized_hours),
                    signed_hours(d.deviation_hours),
                ]
                for d in pvr.parts
            ],
        ),
        "",
        _table(
            ["Run", "Variant", "Phase", "Status", "Planned", "Realized", "Deviation", "Why"],
            [
                [
                    f"`{r.run_id}`",
                    r.variant,
                    r.phase,
                    r.status,
                    hours(r.planned_hours),
                    hours(r.realized_hours),
                    signed_hours(r.deviation_hours),
                    r.why,
                ]
                for r in pvr.runs
            ],
        ),
    ]
    if pvr.unplanned:
        out += ["", "Recorded but not in the projection: " + ", ".join(pvr.unplanned)]
    out += ["", "Decisions taken:"]
    out += [f"- {d}" for d in pvr.decisions] or ["- none recorded"]
    return "\n".join(out)
