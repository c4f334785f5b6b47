"""Planned vs realized: the registered projection, kept as it was, beside what happened.

The projection made at registration is stored unchanged; the realized side is read from the
runs' completion records (`timings`, `started_at`/`ended_at`). Deviations are realized minus
planned, per run and per part, over the runs that have a record; runs without one (trimmed
at the gate, or not reached) are listed with the planned hours they did not spend. The
decisions taken on the way (the gate's, a person's) are kept as given.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from ablations.budget.projection import PARTS, Projection
from ablations.records import RunRecord


class RunDeviation(BaseModel):
    """One registered run: planned and realized busy hours."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    variant: str
    phase: str
    category: str
    status: str
    """The record's status; `trimmed` or `pending` for a run that has none."""
    planned_hours: float
    realized_hours: float | None
    deviation_hours: float | None
    """realized - planned (positive: took longer than planned)."""


class PartDeviation(BaseModel):
    """One part (load, train, ...) summed over the runs that have a record."""

    model_config = ConfigDict(frozen=True)

    part: str
    planned_hours: float
    realized_hours: float
    deviation_hours: float


class PlannedVsRealized(BaseModel):
    """What `manifest.json` stores under planned vs realized, and REPORT.md renders."""

    planned: Projection
    """The projection registered before anything ran, unchanged."""
    realized_busy_hours: float
    """Machine-busy hours of every recorded run (sum of their timings)."""
    realized_wall_hours: float | None
    """First start to last end over the records that have both; None otherwise."""
    runs: list[RunDeviation]
    parts: list[PartDeviation]
    decisions: list[str] = []
    """Decisions taken, in order, as given (e.g. the gate's decision and reason)."""
    unplanned: list[str] = []
    """Run ids with a record but no place in the projection (kept visible, not dropped)."""

    @property
    def compared_planned_hours(self) -> float:
        """Planned busy hours of the runs that have a record (the like-for-like figure)."""
        return sum(r.planned_hours for r in self.runs if r.realized_hours is not None)

    @property
    def unspent_planned_hours(self) -> float:
        """Planned busy hours of runs that never ran (trimmed or pending)."""
        return sum(r.planned_hours for r in self.runs if r.realized_hours is None)


def planned_vs_realized(
    planned: Projection,
    records: Sequence[RunRecord],
    decisions: Sequence[str] = (),
    trimmed: Sequence[str] = (),
) -> PlannedVsRealized:
    """Build the comparison from the registered projection and the completion records.

    `trimmed` names run ids dropped at the gate, so they show as trimmed, not pending.
    """
    by_id = {r.run_id: r for r in records}
    dropped = set(trimmed)
    runs: list[RunDeviation] = []
    planned_parts = dict.fromkeys(PARTS, 0.0)
    realized_parts = dict.fromkeys(PARTS, 0.0)
    for run in planned.runs:
        record = by_id.get(run.run_id)
        realized = None if record is None else record.timings.total / 3600.0
        if record is not None:
            for part in PARTS:
                planned_parts[part] += run.parts[part] / 3600.0
                realized_parts[part] += getattr(record.timings, part) / 3600.0
        status = record.status if record else ("trimmed" if run.run_id in dropped else "pending")
        runs.append(
            RunDeviation(
                run_id=run.run_id,
                variant=run.variant,
                phase=run.phase,
                category=run.category,
                status=status,
                planned_hours=run.hours,
                realized_hours=realized,
                deviation_hours=None if realized is None else realized - run.hours,
            )
        )
    known = {r.run_id for r in planned.runs}
    spans = [
        (r.started_at, r.ended_at)
        for r in records
        if r.started_at is not None and r.ended_at is not None
    ]
    return PlannedVsRealized(
        planned=planned,
        realized_busy_hours=sum(r.timings.total for r in records) / 3600.0,
        realized_wall_hours=(
            (max(e for _, e in spans) - min(b for b, _ in spans)) / 3600.0 if spans else None
        ),
        runs=runs,
        parts=[
            PartDeviation(
                part=p,
                planned_hours=planned_parts[p],
                realized_hours=realized_parts[p],
                deviation_hours=realized_parts[p] - planned_parts[p],
            )
            for p in PARTS
        ],
        decisions=list(decisions),
        unplanned=[r.run_id for r in records if r.run_id not in known],
    )
