"""The campaign flow: register -> preflight -> pilot -> gate -> main -> results.

It only sequences and fans out; every step is a task over one `ablations` call, and every
step is recognized as done on restart from the output folder.
"""

# No `from __future__ import annotations` here: Prefect builds the deployment's parameter
# model from the flow's signature at run time, and string annotations break that.
from pathlib import Path
from typing import Literal, cast

from prefect import flow, pause_flow_run
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.exceptions import FlowPauseTimeout
from prefect.futures import as_completed
from prefect.input import RunInput
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import Field

from ablations.campaign_phases import gate_decided, phase_runs, slot_warmup
from ablations.campaign_state import registered_plan
from ablations.gate import GateDecision, apply_answer
from ablations.plan_io import read_plan_text
from ablations.probe import peak_for_slots
from ablations.progress import record_rows, say
from ablations.records import RunRecord
from ablations.remote_runs import PoolSettings, open_pool, pool_slots, require_shared_store
from ablations.scheduling import longest_first
from ablations.slot_runtime import open_slots
from ablations.slots import plan_slots
from ablations.variants import PlannedRun
from tasks.gate import recommend_gate, record_gate
from tasks.preflight import run_preflight
from tasks.register import project_campaign, register_campaign
from tasks.results import write_results
from tasks.runs import execute_run


class GateAnswer(RunInput):
    """Your decision after the pilot. The automatic recommendation is shown in the artifacts."""

    decision: Literal["continue", "trim", "reframe"]
    """continue: run every remaining registered run; trim: drop the runs below (or the
    recommended ones when empty); reframe: end the campaign and draft a revised plan."""
    drop: list[str] = Field(default_factory=list)
    """Registered main-phase run ids or variant names to drop (nothing can be added)."""
    note: str = ""
    """Why, for the record."""


def _run_phase(
    out_dir: str,
    runs: list[PlannedRun],
    progress_id: object,
    done: list[int],
    total: int,
    measured: list[RunRecord] | None = None,
) -> list[RunRecord]:
    ordered = longest_first(runs, measured or [])
    futures = [execute_run.submit(out_dir, r.run_id, r.variant, r.seed, r.phase) for r in ordered]
    records = []
    for future in as_completed(futures):
        record = cast(RunRecord, future.result())
        records.append(record)
        done[0] += 1
        detail = (
            record.stop.rule
            if record.stop
            else ", ".join(f"{k}={v:.4f}" for k, v in record.metrics.items())
        )
        say(
            f"  [{done[0]}/{total}] {record.phase} {record.variant} seed {record.seed}: "
            f"{record.status} ({detail})"
        )
        if progress_id is not None:
            update_progress_artifact(progress_id, 100 * done[0] / total)  # type: ignore[arg-type]
    return records


def _ask_in_ui(
    recommendation: GateDecision, main: list[PlannedRun], timeout_s: int
) -> GateDecision:
    create_markdown_artifact(
        key="gate-recommendation",
        markdown=(
            f"## Gate: the policy recommends **{recommendation.decision}**\n\n"
            f"{recommendation.reason}\n\nRuns it would drop: {recommendation.drop or 'none'}\n\n"
            f"Numbers: {recommendation.numbers}\n\nResume this flow run with your decision; "
            f"after {timeout_s} s the recommendation is applied."
        ),
    )
    say(
        f"gate: waiting up to {timeout_s} s for a decision in the Prefect UI "
        f"(recommended: {recommendation.decision})"
    )
    try:
        answer = pause_flow_run(
            wait_for_input=GateAnswer.with_initial_data(
                decision=recommendation.decision, drop=recommendation.drop
            ),
            timeout=timeout_s,
            poll_interval=2,
        )
    except FlowPauseTimeout:
        return recommendation.model_copy(
            update={
                "source": "timeout",
                "reason": f"no answer in {timeout_s} s; "
                f"applied the policy: {recommendation.reason}",
            }
        )
    return apply_answer(recommendation, answer.decision, answer.drop, answer.note, main)


@flow(
    name="ablation-campaign",
    task_runner=ThreadPoolTaskRunner(max_workers=16),  # type: ignore[arg-type]  # generic in stubs
    persist_result=False,
    log_prints=False,
)
def ablation_campaign(
    plan_path: str | None = None,
    plan_yaml: str | None = None,
    out_dir: str = "ablate-out",
    gate: Literal["auto", "ui"] | None = None,
    devices: str | None = None,
    pool: str | None = None,
    heartbeat_timeout_s: float = 120.0,
) -> str:
    """Run an ablation campaign from a plan file (or inline YAML) into an output folder.

    With `pool`, every run is a flow run of the `variant/<pool>` deployment on that work
    pool's workers, and `devices` counts the pool's devices (default: its online workers)."""
    if plan_yaml is None:
        if plan_path is None:
            raise ValueError("give plan_path or plan_yaml")
        plan_yaml = read_plan_text(Path(plan_path))
    registration = register_campaign(plan_yaml, out_dir, plan_path or "inline plan")
    folder = registration.out_dir
    plan = registered_plan(Path(folder))
    remote = None
    if pool is not None:
        require_shared_store(plan.checkpoint)
        remote = PoolSettings(pool, heartbeat_timeout_s=heartbeat_timeout_s)
    peak = peak_for_slots(plan, Path(plan_path) if plan_path is not None else None)
    slots = (
        plan_slots(plan.resources, devices, peak, plan.probe.margin)
        if remote is None
        else pool_slots(remote, plan.resources, devices)
    )
    project_campaign(folder, len(slots))
    pilot, main = phase_runs(Path(folder), "pilot"), phase_runs(Path(folder), "main")
    total = len(pilot) + len(main)
    say(
        f"campaign {registration.campaign_id} (plan {registration.plan_hash[:12]}): "
        f"{len(pilot)} pilot + {len(main)} main runs on {len(slots)} slot(s) "
        f"[{', '.join(s.name for s in slots)}]"
    )
    progress = create_progress_artifact(
        progress=0.0, key="campaign-progress", description="Runs finished"
    )
    done = [0]
    warmup = slot_warmup(plan, Path(folder))
    with open_slots(folder, [] if remote else slots, warmup), open_pool(folder, remote):
        say("preflight: data check and restart check")
        preflight = run_preflight(folder)
        say(f"preflight: {'passed' if preflight.passed else 'FAILED'}")
        pilot_records: list[RunRecord] = []
        if preflight.passed:
            say("pilot")
            pilot_records = _run_phase(folder, pilot, progress, done, total)
            create_table_artifact(
                key="pilot-runs",
                table=record_rows(pilot_records, plan.metric.name),
                description="Pilot runs",
            )
        asked_before = gate_decided(Path(folder))
        recommendation = recommend_gate(folder, len(slots))
        mode = gate or plan.gate.mode
        decision = recommendation
        if mode == "ui" and not asked_before:
            decision = _ask_in_ui(recommendation, main, int(plan.gate.timeout_minutes * 60))
        decision = record_gate(folder, decision)
        say(f"gate: {decision.decision} ({decision.source}): {decision.reason}")
        create_markdown_artifact(
            key="gate-decision",
            markdown=f"## Gate decision: **{decision.decision}** ({decision.source})\n\n"
            f"{decision.reason}\n\nDropped: {len(decision.drop)} runs\n\n"
            f"Numbers: {decision.numbers}",
        )
        if decision.decision in ("continue", "trim"):
            remaining = [r for r in main if r.run_id not in set(decision.drop)]
            say(f"main: {len(remaining)} runs ({len(decision.drop)} trimmed)")
            done[0] += len(decision.drop)
            main_records = _run_phase(folder, remaining, progress, done, total, pilot_records)
            create_table_artifact(
                key="final-runs",
                table=record_rows(main_records, plan.metric.name),
                description="Main-phase runs",
            )
        manifest = write_results(folder)  # in a slot's worker, while the slots are open
    update_progress_artifact(progress, 100.0)  # type: ignore[arg-type]
    say(f"results: {manifest}")
    return manifest
