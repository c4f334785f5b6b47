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
from ablations.run.records import RunRecord
from ablations.text.units import duration, significant

EXPLAINED_ABOVE = 0.20
"""A realized time off the plan by more than this fraction gets a one-phrase explanation."""


def explain(planned: dict[str, float], realized: dict[str, float]) -> str:
    """Why realized time is off the plan by more than 20%, from the measured parts: the part
    that moved most, e.g. `load 3.0x the estimate`; empty when within 20%."""
    total_planned, total_realized = sum(planned.values()), sum(realized.values())
    if total_planned <= 0:
        return "no estimate to compare with" if total_realized > 0 else ""
    if abs(total_realized / total_planned - 1) <= EXPLAINED_ABOVE:
        return ""
    part = max(planned, key=lambda p: abs(realized.get(p, 0.0) - planned[p]))
    before, after = planned[part], realized.get(part, 0.0)
    if before <= 0:
        return f"{part} {duration(after * 3600)} not in the estimate"
    ratio = after / before
    if ratio < 0.1:  # "0.00046x" reads badly: say both times instead
        return f"{part} {duration(after * 3600)} against {duration(before * 3600)} estimated"
    return f"{part} {significant(ratio, 2)}x the estimate"


class RunDeviation(BaseModel):
    """One registered run: planned and realized busy hours."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    variant: str
    phase: str
    category: str
    status: str
    """The record's status; `trimmed`, `unneeded` or `pending` for a run that has none."""
    planned_hours: float
    realized_hours: float | None
    deviation_hours: float | None
    """realized - planned (positive: took longer than planned)."""
    why: str = ""
    """The deviation explained in one phrase when it exceeds 20% (see `explain`)."""


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
    gate_wait_hours: float | None = None
    """Of the wall time, the gate's wait: the last pilot run's end to the gate's decision
    (a person answering in the UI, or the policy); None when there was no gate in between."""
    runs: list[RunDeviation]
    parts: list[PartDeviation]
    decisions: list[str] = []
    """Decisions taken, in order, as given (e.g. the gate's decision and reason)."""
    unplanned: list[str] = []
    """Run ids with a record but no place in the projection (kept visible, not dropped)."""

    @property
    def why(self) -> str:
        """The busy-time deviation over the recorded runs, explained (empty within 20%)."""
        return explain(
            {p.part: p.planned_hours for p in self.parts},
            {p.part: p.realized_hours for p in self.parts},
        )

    @property
    def compared_planned_hours(self) -> float:
        """Planned busy hours of the runs that have a record (the like-for-like figure)."""
        return sum(r.planned_hours for r in self.runs if r.realized_hours is not None)

    @property
    def unspent_planned_hours(self) -> float:
        """Planned busy hours of runs that never ran (trimmed, unneeded or pending)."""
        return sum(r.planned_hours for r in self.runs if r.realized_hours is None)

    def unspent_by_status(self) -> dict[str, tuple[int, float]]:
        """Status (trimmed, unneeded, pending) -> (runs, planned hours) of runs never run."""
        out: dict[str, tuple[int, float]] = {}
        for r in self.runs:
            if r.realized_hours is None:
                n, h = out.get(r.status, (0, 0.0))
                out[r.status] = (n + 1, h + r.planned_hours)
        return out


def planned_vs_realized(
    planned: Projection,
    records: Sequence[RunRecord],
    decisions: Sequence[str] = (),
    trimmed: Sequence[str] = (),
    unneeded: Sequence[str] = (),
    gate_decided_at: float | None = None,
) -> PlannedVsRealized:
    """Build the comparison from the registered projection and the completion records.

    `trimmed` names run ids dropped at the gate, so they show as trimmed, not pending;
    `unneeded` the main runs no look needed (their variant was decided earlier);
    `gate_decided_at` (gate.json's `decided_at`) separates the gate's wait from busy time.
    """
    # A trimmed run's record says so and holds no time: it was planned, never run.
    by_id = {r.run_id: r for r in records if r.status != "trimmed"}
    dropped = {*trimmed, *(r.run_id for r in records if r.status == "trimmed")}
    spared = set(unneeded)
    runs: list[RunDeviation] = []
    planned_parts = dict.fromkeys(PARTS, 0.0)
    realized_parts = dict.fromkeys(PARTS, 0.0)
    for run in planned.runs:
        record = by_id.get(run.run_id)
        realized = None if record is None else record.timings.total / 3600.0
        why = ""
        if record is not None:
            why = explain(
                {p: run.parts[p] / 3600.0 for p in PARTS},
                {p: getattr(record.timings, p) / 3600.0 for p in PARTS},
            )
            for part in PARTS:
                planned_parts[part] += run.parts[part] / 3600.0
                realized_parts[part] += getattr(record.timings, part) / 3600.0
        status = (
            record.status
            if record
            else "trimmed"
            if run.run_id in dropped
            else "unneeded"
            if run.run_id in spared
            else "pending"
        )
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
                why=why,
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
        gate_wait_hours=gate_wait_hours(records, gate_decided_at),
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
        unplanned=[r.run_id for r in records if r.run_id not in known and r.status != "trimmed"],
    )


def gate_wait_hours(records: Sequence[RunRecord], decided_at: float | None) -> float | None:
    """Hours from the last pilot run's end to the gate's decision; None without both."""
    pilot_ends = [r.ended_at for r in records if r.phase == "pilot" and r.ended_at is not None]
    if decided_at is None or not pilot_ends:
        return None
    return max(0.0, decided_at - max(pilot_ends)) / 3600.0
