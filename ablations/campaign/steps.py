"""The campaign's steps as plain functions over a loaded `Campaign` (the tasks wrap these).

Each step is restartable: it first looks for its own result in the folder (preflight.json,
records/<run_id>.json, gate.json) and only does the work when it is missing. The plan, the
registration and the planned runs come from the `Campaign`, loaded once per process. A failed
preflight, and the gate's `fix` that follows from it, are not kept as results: a rerun of the
folder repeats preflight (after the defect is fixed it passes, the pilot runs and the gate is
asked again).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import yaml

from ablations.budget import Projection, estimate_from_records, project
from ablations.budget.sizing import size_main
from ablations.campaign.campaign import Campaign
from ablations.campaign.executor import Executor
from ablations.campaign.gate import GateDecision, auto_decision
from ablations.campaign.specs import spec_for
from ablations.campaign.state import save_record
from ablations.errors import CampaignInterrupted, CampaignUndecided
from ablations.files.names import PLAN, REFRAME_DRAFT
from ablations.plan.io import parse_yaml
from ablations.plan.variants import CONTROL
from ablations.process.crash_points import AFTER_GATE, crash_point
from ablations.process.preemption import TERMINATE
from ablations.run.causes import infrastructure_phrase
from ablations.run.records import PreflightReport, RunError, RunRecord


def project_campaign(campaign: Campaign, slots: int) -> Projection:
    """The projection made at registration from the plan's estimates, kept as it was."""
    known = campaign.projection()
    if known is not None:
        return known
    plan = campaign.plan
    projection = project(plan, campaign.runs, plan.budget.estimate, slots)
    campaign.folder.write_projection(projection)
    return projection


def run_preflight(campaign: Campaign, executor: Executor) -> PreflightReport:
    """The data and restart checks on the control's run, until they pass once per campaign
    (a failed report is replaced by the next attempt's)."""
    known = campaign.preflight()
    if known is not None and known.passed:
        return known
    if TERMINATE.requested:  # a campaign asked to stop starts nothing new
        raise CampaignInterrupted(f"preflight not started: {TERMINATE.reason} received")
    plan = campaign.plan
    control = next(r for r in campaign.phase("pilot") if r.variant == CONTROL)
    # The restart check saves under a key of its own attempt: never the real run's, and never
    # another attempt's (two processes on one folder or one shared store cannot collide).
    attempt = uuid.uuid4().hex[:8]
    spec = spec_for(plan, campaign.registration, control).model_copy(
        update={
            "run_id": f"preflight-{control.run_id}-{attempt}",
            "out_dir": None,
            "until": None,
            "checkpoint_id": None,
        }
    )
    report = executor.preflight(spec, plan.workload.expected_inputs)
    if TERMINATE.requested and not report.passed:  # cut short: it found nothing to fix
        raise CampaignInterrupted(f"preflight stopped: {TERMINATE.reason} received")
    report = report.model_copy(update={"check_id": spec.run_id})
    campaign.folder.write_preflight(report)
    if report.error is not None and report.error.cause == "infrastructure":
        # not a defect of the workload: no gate decides on it (never a `fix`), a rerun checks again
        raise CampaignUndecided(_undecided_line(report.error, "in preflight:"))
    return report


def execute_run(campaign: Campaign, run_id: str, executor: Executor) -> RunRecord:
    """Run one registered run on the executor, or return its completion record if finished."""
    finished = campaign.finished(run_id)
    if finished is not None:
        return finished
    run = campaign.run(run_id)  # InputError when the plan defines no such run
    if TERMINATE.requested:  # a campaign asked to stop starts nothing new
        raise CampaignInterrupted(f"run {run_id} not started: {TERMINATE.reason} received")
    spec = spec_for(campaign.plan, campaign.registration, run)
    record = executor.run(spec)
    save_record(campaign.out_dir, record)
    if record.interrupted:  # recorded (a rerun resumes it); nothing of the campaign goes on
        raise CampaignInterrupted(f"run {run_id}: {record.error}")
    return record


def require_decidable(records: list[RunRecord], phase: str) -> None:
    """Raise `CampaignUndecided` when a run of the phase failed for the infrastructure's cause
    (its store, the disk, its worker): no gate or look may decide on it, and a rerun retrains
    it (`Campaign.finished` does not count it). One line names what failed and what to do."""
    lost = [r for r in records if r.lost]
    if lost:
        first = lost[0]
        assert first.error is not None  # a lost record is a failed one with its error
        runs = f"{len(lost)} {phase} run{'s' if len(lost) > 1 else ''}"
        where = f"under {runs}, first {first.variant} seed {first.seed}:"
        raise CampaignUndecided(_undecided_line(first.error, where))


UNDECIDED_ERROR_CHARS = 300
"""The most of the failing run's error the one line repeats: its head (what was done, where)
and its tail (what the OS or the server answered), the middle cut."""


def _undecided_line(error: RunError, where: str) -> str:
    detail = str(error)
    if len(detail) > UNDECIDED_ERROR_CHARS:
        half = UNDECIDED_ERROR_CHARS // 2
        detail = f"{detail[:half]}...{detail[-half:]}"
    phrase = infrastructure_phrase(error.type, error.message)
    return f"{phrase} {where} {detail}; no decision was taken: rerun the same command to continue"


def _recorded_gate(campaign: Campaign) -> GateDecision | None:
    """The recorded decision, unless it is `fix`: that one is asked again after preflight."""
    decision = campaign.gate()
    return None if decision is None or decision.decision == "fix" else decision


def recommend_gate(campaign: Campaign, slots: int) -> GateDecision:
    """The recorded decision if the gate was already passed, else the policy's."""
    known = _recorded_gate(campaign)
    if known is not None:
        return known
    records = campaign.records()
    pilot = [records[r.run_id] for r in campaign.phase("pilot") if r.run_id in records]
    preflight = campaign.preflight() or PreflightReport(passed=False)
    elapsed = (time.time() - campaign.registration.registered_at) / 3600
    return auto_decision(
        campaign.plan,
        pilot,
        preflight,
        campaign.phase("main"),
        slots=slots,
        elapsed_hours=elapsed,
    )


def gate_decided(campaign: Campaign) -> bool:
    """Whether the gate decision is already recorded (a restart never asks again; a `fix`
    is asked again once preflight passes)."""
    return _recorded_gate(campaign) is not None


def resize_after_answer(campaign: Campaign, decision: GateDecision, slots: int) -> GateDecision:
    """A person's answer with the main phase re-sized for the runs it keeps.

    The recommendation's numbers were projected for the policy's own drops; after a person
    dropped other runs (or none), the projection and sizing shown must be those of the runs
    that will run. The recommendation's figures stay as they were, its `recommended_` ones."""
    if decision.source != "ui" or decision.decision not in ("continue", "trim"):
        return decision
    plan = campaign.plan
    records = campaign.records()
    pilot = [records[r.run_id] for r in campaign.phase("pilot") if r.run_id in records]
    dropped = set(decision.drop)
    kept = [r for r in campaign.phase("main") if r.run_id not in dropped]
    available = decision.numbers.get("available_hours")
    if not isinstance(available, float | int):
        return decision
    estimate = estimate_from_records(pilot, plan)
    sizing = size_main(plan, kept, estimate, slots, available_hours=float(available), pilot=pilot)
    numbers = dict(decision.numbers)
    for key in ("projected_hours_after_trim", "worst_case_hours_after_trim"):
        if key in numbers:
            numbers[f"recommended_{key}"] = numbers.pop(key)
    numbers["projected_hours_after_trim"] = round(sizing.expected_hours, 4)
    numbers["worst_case_hours_after_trim"] = round(sizing.worst_hours, 4)
    return decision.model_copy(update={"numbers": numbers, "sizing": sizing})


def record_gate_decision(campaign: Campaign, decision: GateDecision) -> GateDecision:
    """Persist the decision once: trimmed runs get records; reframe gets a draft plan; fix
    nothing beside gate.json, which the next attempt replaces.

    gate.json is written first and everything else is derived from it, here and again on
    every restart: a campaign killed in between completes what the recorded decision says
    (never trimmed records without the decision that trimmed them)."""
    known = _recorded_gate(campaign)
    if known is None:
        decision = decision.model_copy(update={"decided_at": time.time()})  # the timeline's gate
        campaign.folder.write_gate(decision)
        crash_point(AFTER_GATE)
    else:
        decision = known
    _apply_gate(campaign, decision)
    return decision


def _apply_gate(campaign: Campaign, decision: GateDecision) -> None:
    """The files a recorded decision implies: a record per trimmed run, a reframe's draft."""
    main = {r.run_id: r for r in campaign.phase("main")}
    for run_id in decision.drop:
        run = main[run_id]
        if campaign.finished(run_id) is None:
            save_record(
                campaign.out_dir,
                RunRecord(
                    run_id=run.run_id,
                    variant=run.variant,
                    seed=run.seed,
                    category=run.category,
                    phase="main",
                    status="trimmed",
                ),
            )
    if decision.decision == "reframe" and not (campaign.out_dir / REFRAME_DRAFT).exists():
        write_reframe_draft(campaign, decision.reason)


def write_reframe_draft(campaign: Campaign, reason: str) -> Path:
    """A draft plan for the revised question, under a new campaign id: the question is kept
    as it was (the reason is a comment above it), so the draft is a valid plan to edit."""
    folder = campaign.folder
    data = parse_yaml(folder.plan_text(), PLAN)  # as the plan was read (libyaml's parser)
    section = data["campaign"]
    section["id"] = f"{section['id']}-reframed"[:64]
    reason_lines = "".join(f"#   {line}\n" for line in reason.splitlines() or [""])
    header = (
        "# Draft for a new campaign: the gate decided to reframe.\n"
        f"# Reason:\n{reason_lines}"
        "# Revise campaign.question and the plan, then validate and run it as a new campaign.\n"
    )
    return folder.write_reframe_draft(header + yaml.safe_dump(data, sort_keys=False))
