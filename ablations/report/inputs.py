"""What a report is made of: one small pydantic model the flow or `ablate report` fills."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ablations.analysis.flips import ErrorAnalysis, error_analysis, load_predictions
from ablations.analysis.looks import LookRecord, Looks
from ablations.analysis.paired import Effect, ExcludedRun, excluded_runs, paired_effects
from ablations.byo import verify_scope
from ablations.plan.design import spending_words
from ablations.plan.experiment import MetricSection
from ablations.plan.model import Plan
from ablations.plan.runs import variants
from ablations.plan.section import same_value, shown
from ablations.plan.variants import CONTROL, PlannedRun
from ablations.run.records import RunRecord


class FactorPlan(BaseModel):
    """What the plan says about one factor: its hypothesis, levels and next decisions."""

    model_config = ConfigDict(frozen=True)

    name: str
    hypothesis: str | None = None
    levels: dict[str, str] = {}
    """Variant name -> the level's value as written."""
    next_decisions: dict[str, str] = {}
    """Verdict -> next decision: the factor's own over the campaign's."""
    level_decisions: dict[str, dict[str, str]] = {}
    """Variant name -> verdict -> its level's next decision: the level's own over the
    factor's over the campaign's, `{value}` replaced by the level's value."""

    def next_decision(self, variant: str, verdict: str) -> str | None:
        """What the plan says to do when `variant` (a level of this factor) gets `verdict`."""
        mine = self.level_decisions.get(variant)
        if mine is not None:
            return mine.get(verdict)
        return self.next_decisions.get(verdict)


class ReportRun(BaseModel):
    """A registered run and, once it finished (or was trimmed), its record."""

    model_config = ConfigDict(frozen=True)

    planned: PlannedRun
    record: RunRecord | None = None
    """None: the run has not finished (pending), or no look needed it (`unneeded`)."""
    unneeded: bool = False
    """A main run no look needed: its variant was decided at an earlier look."""

    @property
    def status(self) -> str:
        """The record's status, or `unneeded` / `pending` for a run without one."""
        if self.record is not None:
            return self.record.status
        return "unneeded" if self.unneeded else "pending"


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
    gate_source: str | None = None
    """Who decided at the gate: auto, ui or timeout."""
    hypothesis: str | None = None
    """The campaign's hypothesis, as written in the plan."""
    factors: list[FactorPlan] = []
    declared_costs: dict[str, float] = {}
    """Variant (or `control`) -> the plan's `cost`, where given."""
    measured_costs: dict[str, float] = {}
    """Variant -> median training step seconds over its accepted main runs."""
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
    looks: list[LookRecord] = []
    """The main phase's looks as recorded (empty for a folder from before looks)."""
    spending: str | None = None
    """How alpha was spent over the looks, in words (`plan.design.spending_words`)."""
    code: str | None = None
    """The code the runs trained with: the user's, hashed, or ablate's package version."""
    verification: str | None = None
    """What `ablate verify` checks of these runs (a final model re-evaluated, or why not)."""

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
    gate_source: str | None = None,
    budget_markdown: str | None = None,
    planned_vs_realized_markdown: str | None = None,
    ledger_url: str | None = None,
    looks: Sequence[LookRecord] = (),
    code: str | None = None,
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
        gate_source=gate_source,
        hypothesis=plan.campaign.hypothesis,
        factors=factor_plans(plan),
        declared_costs=declared_costs(plan),
        measured_costs=measured_costs(records),
        runs=list(runs),
        effects=paired_effects(
            records,
            plan.metric,
            CONTROL,
            trimmed_source=gate_source,
            trimmed_reason=gate_reason,
            judgements=Looks(looks=list(looks)).final_judgements() if looks else None,
        ),
        looks=list(looks),
        spending=spending_words(plan.seeds),
        excluded=excluded_runs(records),
        errors=error_analysis(records, load_predictions(out_dir, records), CONTROL),
        code=code,
        verification=verify_scope(plan.workload),
        budget_markdown=budget_markdown,
        planned_vs_realized_markdown=planned_vs_realized_markdown,
        ledger_url=ledger_url,
    )


def factor_plans(plan: Plan) -> list[FactorPlan]:
    """Each factor's hypothesis, level variants and next decisions, per level: the level's
    own over the factor's over the campaign's."""
    by_factor: dict[str, dict[str, str]] = {}
    decisions: dict[str, dict[str, dict[str, str]]] = {}
    for variant in variants(plan):
        factor = plan.factors.get(variant.factor or "")
        if factor is None or variant.level is None:
            continue
        value = shown(variant.level)
        by_factor.setdefault(variant.factor or "", {})[variant.name] = str(variant.level)
        level = next((lv for lv in factor.levels if same_value(lv.value, variant.level)), None)
        merged = {
            **plan.campaign.next_decisions,
            **factor.next_decisions,
            **(level.next_decisions if level else {}),
        }
        decisions.setdefault(variant.factor or "", {})[variant.name] = {
            verdict: text.replace("{value}", value) for verdict, text in merged.items()
        }
    return [
        FactorPlan(
            name=name,
            hypothesis=factor.hypothesis,
            levels=by_factor.get(name, {}),
            next_decisions={**plan.campaign.next_decisions, **factor.next_decisions},
            level_decisions=decisions.get(name, {}),
        )
        for name, factor in plan.factors.items()
    ]


def declared_costs(plan: Plan) -> dict[str, float]:
    """Variant name -> the cost the plan declares for it (the control's included)."""
    costs = {CONTROL: plan.control.cost} if plan.control.cost is not None else {}
    for variant in variants(plan):
        factor = plan.factors.get(variant.factor or "")
        if factor is None or variant.level is None:
            continue  # the control and interactions: no level of their own
        for level in factor.levels:
            if level.cost is not None and same_value(level.value, variant.level):
                costs[variant.name] = level.cost
    return costs


def measured_costs(records: Sequence[RunRecord]) -> dict[str, float]:
    """Variant name -> median step seconds over its accepted main-phase runs."""
    seconds: dict[str, list[float]] = {}
    for r in records:
        if r.phase == "main" and r.status == "accepted" and r.step_seconds is not None:
            seconds.setdefault(r.variant, []).append(r.step_seconds)
    return {variant: statistics.median(values) for variant, values in seconds.items()}
