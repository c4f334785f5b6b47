"""Cost per accepted result: (package price x lots + other costs) / accepted runs.

With no accepted run the figure is undefined (None), never 0: the summary carries the spend
and the reasons the runs were not accepted instead. Accepted results are counted once per
registered main-phase run: the pilot measures, and re-running a run to time it again gives the
same run id, not another result. Costs the user did not give are not counted or shown.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from ablations.budget.catalog import Package
from ablations.plan.offers import Cost
from ablations.run.records import RunRecord


class CostSummary(BaseModel):
    """What the package and the other given costs add up to, and per accepted result."""

    model_config = ConfigDict(frozen=True)

    package_usd: float | None
    """Lot price x lots; None when the price is not known."""
    other_costs: list[Cost] = []
    other_usd: float = 0.0
    total_usd: float | None
    """The spend: package plus other costs; None while the package price is unknown."""
    accepted: int | None
    """Accepted results; None when not given."""
    cost_per_accepted_usd: float | None
    """total / accepted; None when undefined (see `undefined_reason`)."""
    undefined_reason: str | None = None
    rejections: list[str] = []
    """Why runs were not accepted (shown when none was)."""


def cost_summary(
    package: Package,
    other_costs: Sequence[Cost] = (),
    accepted: int | None = None,
    rejections: Sequence[str] = (),
) -> CostSummary:
    """The package's cost and, when `accepted` is given, the cost per accepted result."""
    if accepted is not None and accepted < 0:
        raise ValueError(f"accepted results cannot be negative, got {accepted}")
    other = sum(c.usd for c in other_costs)
    package_usd = package.price_usd
    total = None if package_usd is None else package_usd + other
    per: float | None = None
    reason: str | None = None
    if package_usd is None:
        reason = f"the price of {package.gpu} for {package.days} days is not known"
    elif accepted is None:
        reason = "the number of accepted results is not given"
    elif accepted == 0:
        reason = "no run was accepted"
    else:
        per = (package_usd + other) / accepted
    return CostSummary(
        package_usd=package_usd,
        other_costs=list(other_costs),
        other_usd=other,
        total_usd=total,
        accepted=accepted,
        cost_per_accepted_usd=per,
        undefined_reason=reason,
        rejections=list(rejections) if not accepted else [],
    )


def accepted_results(records: Sequence[RunRecord]) -> int:
    """Distinct accepted main-phase runs (a re-timed run keeps its id and counts once)."""
    return len({r.run_id for r in records if r.phase == "main" and r.status == "accepted"})


def rejection_reasons(records: Sequence[RunRecord]) -> list[str]:
    """One line per run that was not accepted: its id, status and the rule or error."""
    out: list[str] = []
    for r in records:
        if r.status == "accepted":
            continue
        if r.stop is not None:
            why = f"{r.stop.rule} at step {r.stop.step}: {r.stop.message}"
        elif r.rejection is not None:
            why = r.rejection.message
        elif r.error is not None:
            why = f"{r.error.type}: {r.error.message}"
        elif r.status == "trimmed":
            why = "trimmed at the gate"
        else:
            why = "rejected before reasons were recorded"
        out.append(f"{r.run_id} ({r.variant}, seed {r.seed}, {r.phase}): {r.status}, {why}")
    return out


def cost_from_records(
    package: Package, other_costs: Sequence[Cost], records: Sequence[RunRecord]
) -> CostSummary:
    """The cost summary of a campaign's records."""
    return cost_summary(package, other_costs, accepted_results(records), rejection_reasons(records))
