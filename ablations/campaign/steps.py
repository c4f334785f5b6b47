"""The campaign's steps as plain functions over the output folder (the tasks wrap these).

Each step is restartable: it first looks for its own result in the folder (preflight.json,
records/<run_id>.json, gate.json) and only does the work when it is missing. A failed
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
from ablations.campaign.executor import Executor
from ablations.campaign.folder import CampaignFolder
from ablations.campaign.gate import GateDecision, auto_decision
from ablations.campaign.specs import spec_for
from ablations.campaign.state import (
    load_record,
    load_records,
    phase_runs,
    registered_plan,
    registered_runs,
    registration_of,
    save_record,
)
from ablations.crash_points import AFTER_GATE, crash_point
from ablations.errors import CampaignInterrupted, InputError
from ablations.names import REFRAME_DRAFT
from ablations.plan.variants import CONTROL
from ablations.preemption import TERMINATE
from ablations.records import PreflightReport, RunRecord


def registered_projection(out_dir: Path, slots: int) -> Projection:
    """The projection made at registration from the plan's estimates, kept as it was."""
    folder = CampaignFolder(out_dir)
    known = folder.projection()
    if known is not None:
        return known
    plan = registered_plan(out_dir)
    projection = project(plan, registered_runs(out_dir), plan.budget.estimate, slots)
    folder.write_projection(projection)
    return projection


def preflight_once(out_dir: Path, executor: Executor) -> PreflightReport:
    """The data and restart checks on the control's run, until they pass once per campaign
    (a failed report is replaced by the next attempt's)."""
    known = CampaignFolder(out_dir).preflight()
    if known is not None and known.passed:
        return known
    plan = registered_plan(out_dir)
    registration = registration_of(out_dir)
    control = next(r for r in phase_runs(out_dir, "pilot") if r.variant == CONTROL)
    # The restart check saves under a key of its own attempt: never the real run's, and never
    # another attempt's (two processes on one folder or one shared store cannot collide).
    attempt = uuid.uuid4().hex[:8]
    spec = spec_for(plan, registration, control).model_copy(
        update={
            "run_id": f"preflight-{control.run_id}-{attempt}",
            "out_dir": None,
            "until": None,
            "checkpoint_id": None,
        }
    )
    report = executor.preflight(spec, plan.workload.expected_inputs)
    report = report.model_copy(update={"check_id": spec.run_id})
    CampaignFolder(out_dir).write_preflight(report)
    return report


def execute_registered_run(out_dir: Path, run_id: str, executor: Executor) -> RunRecord:
    """Run one registered run on the executor, or return its completion record if finished."""
    finished = load_record(out_dir, run_id)
    if finished is not None:
        return finished
    plan = registered_plan(out_dir)
    registration = registration_of(out_dir)
    run = next((r for r in registered_runs(out_dir) if r.run_id == run_id), None)
    if run is None:
        raise InputError(f"run {run_id!r} is not registered in {out_dir}")
    if TERMINATE.requested:  # a campaign asked to stop starts nothing new
        raise CampaignInterrupted(f"run {run_id} not started: {TERMINATE.reason} received")
    spec = spec_for(plan, registration, run)
    record = executor.run(spec)
    save_record(out_dir, record)
    if record.interrupted:  # recorded (a rerun resumes it); nothing of the campaign goes on
        raise CampaignInterrupted(f"run {run_id}: {record.error}")
    return record


def _recorded_gate(out_dir: Path) -> GateDecision | None:
    """The recorded decision, unless it is `fix`: that one is asked again after preflight."""
    decision = CampaignFolder(out_dir).gate()
    return None if decision is None or decision.decision == "fix" else decision


def gate_recommendation(out_dir: Path, slots: int) -> GateDecision:
    """The recorded decision if the gate was already passed, else the policy's."""
    known = _recorded_gate(out_dir)
    if known is not None:
        return known
    plan = registered_plan(out_dir)
    records = load_records(out_dir)
    pilot = [records[r.run_id] for r in phase_runs(out_dir, "pilot") if r.run_id in records]
    preflight = CampaignFolder(out_dir).preflight() or PreflightReport(passed=False)
    elapsed = (time.time() - registration_of(out_dir).registered_at) / 3600
    return auto_decision(
        plan, pilot, preflight, phase_runs(out_dir, "main"), slots=slots, elapsed_hours=elapsed
    )


def gate_decided(out_dir: Path) -> bool:
    """Whether the gate decision is already recorded (a restart never asks again; a `fix`
    is asked again once preflight passes)."""
    return _recorded_gate(out_dir) is not None


def sized_after_answer(out_dir: Path, decision: GateDecision, slots: int) -> GateDecision:
    """A person's answer with the main phase re-sized for the runs it keeps.

    The recommendation's numbers were projected for the policy's own drops; after a person
    dropped other runs (or none), the projection and sizing shown must be those of the runs
    that will run. The recommendation's figures stay as they were, its `recommended_` ones."""
    if decision.source != "ui" or decision.decision not in ("continue", "trim"):
        return decision
    plan = registered_plan(out_dir)
    records = load_records(out_dir)
    pilot = [records[r.run_id] for r in phase_runs(out_dir, "pilot") if r.run_id in records]
    dropped = set(decision.drop)
    kept = [r for r in phase_runs(out_dir, "main") if r.run_id not in dropped]
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


def record_gate_decision(out_dir: Path, decision: GateDecision) -> GateDecision:
    """Persist the decision once: trimmed runs get records; reframe gets a draft plan; fix
    nothing beside gate.json, which the next attempt replaces.

    gate.json is written first and everything else is derived from it, here and again on
    every restart: a campaign killed in between completes what the recorded decision says
    (never trimmed records without the decision that trimmed them)."""
    known = _recorded_gate(out_dir)
    if known is None:
        decision = decision.model_copy(update={"decided_at": time.time()})  # the timeline's gate
        CampaignFolder(out_dir).write_gate(decision)
        crash_point(AFTER_GATE)
    else:
        decision = known
    _apply_gate(out_dir, decision)
    return decision


def _apply_gate(out_dir: Path, decision: GateDecision) -> None:
    """The files a recorded decision implies: a record per trimmed run, a reframe's draft."""
    main = {r.run_id: r for r in phase_runs(out_dir, "main")}
    for run_id in decision.drop:
        run = main[run_id]
        if load_record(out_dir, run_id) is None:
            save_record(
                out_dir,
                RunRecord(
                    run_id=run.run_id,
                    variant=run.variant,
                    seed=run.seed,
                    category=run.category,
                    phase="main",
                    status="trimmed",
                ),
            )
    folder = CampaignFolder(out_dir)
    if decision.decision == "reframe" and not (folder.root / REFRAME_DRAFT).exists():
        write_reframe_draft(out_dir, decision.reason)


def write_reframe_draft(out_dir: Path, reason: str) -> Path:
    """A draft plan for the revised question, under a new campaign id: the question is kept
    as it was (the reason is a comment above it), so the draft is a valid plan to edit."""
    folder = CampaignFolder(out_dir)
    data = yaml.safe_load(folder.plan_text())
    campaign = data["campaign"]
    campaign["id"] = f"{campaign['id']}-reframed"[:64]
    reason_lines = "".join(f"#   {line}\n" for line in reason.splitlines() or [""])
    header = (
        "# Draft for a new campaign: the gate decided to reframe.\n"
        f"# Reason:\n{reason_lines}"
        "# Revise campaign.question and the plan, then validate and run it as a new campaign.\n"
    )
    return folder.write_reframe_draft(header + yaml.safe_dump(data, sort_keys=False))
