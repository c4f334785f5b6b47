"""What a report is made of: one small pydantic model the flow or `ablate report` fills."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ablations.analysis import (
    Effect,
    ErrorAnalysis,
    ExcludedRun,
    error_analysis,
    excluded_runs,
    load_predictions,
    paired_effects,
)
from ablations.plan import Plan
from ablations.plan_sections import MetricSection
from ablations.records import RunRecord
from ablations.variants import CONTROL, PlannedRun


class ReportRun(BaseModel):
    """A registered run and, once it finished (or was trimmed), its record."""

    model_config = ConfigDict(frozen=True)

    planned: PlannedRun
    record: RunRecord | None = None
    """None: the run has not finished (pending)."""


class ReportInputs(BaseModel):
    """Everything REPORT.md shows; numbers come precomputed so rendering is pure."""

    model_config = ConfigDict(frozen=True)

    campaign_id: str
    plan_hash: str | None = None
    question: str
    """The plan's question."""
    decision: str
    """The decision the answer feeds (the plan's `campaign.decision`)."""
    metric: MetricSection
    control: str = CONTROL
    gate_decision: str | None = None
    """continue, trim or reframe; None when no gate was reached."""
    gate_reason: str | None = None
    runs: list[ReportRun] = []
    effects: list[Effect] = []
    excluded: list[ExcludedRun] = []
    """Main-phase runs that enter no effect, with reasons."""
    errors: ErrorAnalysis | None = None
    """None for a workload without class predictions."""
    budget_markdown: str | None = None
    """The budget section, rendered by the budget module (shown as given)."""
    planned_vs_realized_markdown: str | None = None
    """Planned vs realized, rendered by the budget module; a run-count table otherwise."""
    ledger_url: str | None = None
    """The manifest's ledger URL (relative to the output folder)."""

    @property
    def records(self) -> list[RunRecord]:
        """The records of the runs that have one."""
        return [r.record for r in self.runs if r.record is not None]


def assemble_inputs(
    out_dir: Path,
    plan: Plan,
    runs: Sequence[ReportRun],
    *,
    campaign_id: str | None = None,
    plan_hash: str | None = None,
    gate_decision: str | None = None,
    gate_reason: str | None = None,
    budget_markdown: str | None = None,
    planned_vs_realized_markdown: str | None = None,
    ledger_url: str | None = None,
) -> ReportInputs:
    """Compute the effects and the error analysis (predictions read from `out_dir`)."""
    records = [r.record for r in runs if r.record is not None]
    return ReportInputs(
        campaign_id=campaign_id or plan.campaign.id,
        plan_hash=plan_hash,
        question=plan.campaign.question,
        decision=plan.campaign.decision,
        metric=plan.metric,
        gate_decision=gate_decision,
        gate_reason=gate_reason,
        runs=list(runs),
        effects=paired_effects(records, plan.metric, CONTROL),
        excluded=excluded_runs(records),
        errors=error_analysis(records, load_predictions(out_dir, records), CONTROL),
        budget_markdown=budget_markdown,
        planned_vs_realized_markdown=planned_vs_realized_markdown,
        ledger_url=ledger_url,
    )
