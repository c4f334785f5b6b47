"""The decision gate after the pilot: continue, trim, reframe or fix, by the registered policy.

The policy reads only the pilot's records, the preflight report and the measured durations:
- fix when preflight failed: the restart check or the data check found a defect of the
  workload or the data (named in the reason); nothing is drafted and a rerun repeats preflight;
- fix, too, when a pilot run reported no value of the plan's metric (a defect of the code or
  the plan, not of the question);
- reframe when a registered trigger fires (the control stopped, failed or is under the
  threshold), or when even the essential runs cannot fit the window;
- trim the main runs of variants the pilot already stopped, or rejected below the quality
  threshold (an essential variant only with `trim_essential`, every pilot seed stopped or
  rejected and at least two of them), then drop the lowest categories (the plan's
  `trim_order`) while the projected time does not fit the window;
- otherwise continue.
A pilot run whose last evaluation came before its last step (a program ignoring
`ABLATE_UNTIL`) is judged on that evaluation, and every decision's reason says so.
A person answering in the UI may only drop registered runs, never add new ones.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ablations.budget import estimate_from_records, project
from ablations.budget.sizing import Sizing, size_main
from ablations.plan.model import Plan
from ablations.plan.variants import CONTROL, PlannedRun
from ablations.run.records import PreflightReport, RunRecord
from ablations.text.units import hours as _duration  # hours for people: s, min or h by size

CONTROL_KEPT = "the control cannot be dropped: every verdict is measured against it"
"""Why an answer dropping the control (by name or run id) is refused, in one line."""
CONTINUE_DROPS_NOTHING = "continue drops nothing: choose trim to drop runs"
"""Why `continue` with a drop list is refused, in one line."""

Decision = Literal["continue", "trim", "reframe", "fix"]
"""continue and trim run the main phase; reframe ends the campaign because the question cannot
be answered as posed (a draft plan is written); fix ends it because preflight found a defect in
the workload or the data (named in the reason), and a rerun repeats the preflight."""


class GateDecision(BaseModel):
    """What the gate decided, why, and the numbers it used."""

    decision: Decision
    reason: str
    drop: list[str] = []
    """Main-phase run ids dropped (status `trimmed`)."""
    source: Literal["auto", "ui", "timeout"] = "auto"
    """Who decided: the policy, a person in the UI, or the policy after the UI timed out."""
    note: str = ""
    numbers: dict[str, float | str] = Field(default_factory=dict)
    """Projected hours, window, margin... as used for the decision."""
    decided_at: float | None = None
    """Epoch seconds when the decision was recorded (the end of the gate's wait)."""
    sizing: Sizing | None = None
    """Seeds each variant needs and the main phase's expected and worst-case time, from the
    pilot's spread (or the plan's expected_sd), as the policy used them."""


def preflight_defect(preflight: PreflightReport) -> str:
    """What preflight found wrong, naming the defect and what to fix."""
    defects = [
        f"data check: {problem}; fix the data or the workload's inputs"
        for problem in preflight.data_problems
    ]
    if preflight.restart is not None:
        # the check's message names the cause and the fix in the workload's own terms
        defects.append(
            f"restart check: the run does not resume exactly at step "
            f"{preflight.restart.step}: {preflight.restart.message}"
        )
    if preflight.error is not None:
        defects.append(
            f"preflight crashed: {preflight.error.type}: {preflight.error.message}; "
            "fix the workload"
        )
    return "; ".join(defects) or "preflight did not pass (no report recorded); rerun it"


def _failed_in_pilot(plan: Plan, pilot: list[RunRecord]) -> tuple[list[str], list[str]]:
    """(reasons with the variants to trim, why essential ones are kept) from the pilot's
    stopped runs (`trim_stopped`) and rejected ones (`trim_rejected`).

    An essential variant is never dropped on one seed alone: only with `trim_essential`,
    every pilot seed of it stopped or rejected, and at least two pilot seeds."""
    wanted = {"stopped"} if plan.gate.trim_stopped else set()
    if plan.gate.trim_rejected:
        wanted.add("rejected")
    trim: dict[str, str] = {}
    kept: list[str] = []
    for variant in sorted({r.variant for r in pilot if r.status in wanted} - {CONTROL}):
        runs = [r for r in pilot if r.variant == variant]
        bad = [r for r in runs if r.status in wanted]
        essential = runs[0].category == "essential"
        how = "stopped" if all(r.status == "stopped" for r in bad) else "rejected"
        if not essential or (plan.gate.trim_essential and len(bad) == len(runs) >= 2):
            trim[variant] = how
            continue
        why = (
            "gate.trim_essential is off"
            if not plan.gate.trim_essential
            else "trimming it needs every one of at least 2 pilot seeds stopped or rejected"
        )
        kept.append(
            f"kept essential {variant} ({how} on {len(bad)}/{len(runs)} pilot seeds; "
            f"{why}): drop it in the UI gate to trim it"
        )
    reasons = []
    stopped = [v for v, how in trim.items() if how == "stopped"]
    rejected = [v for v, how in trim.items() if how == "rejected"]
    if stopped:
        reasons.append(f"stopped in the pilot: {', '.join(stopped)}")
    if rejected:
        reasons.append(f"fails threshold in the pilot: {', '.join(_below(pilot, rejected))}")
    return [*stopped, *rejected], [*reasons, *kept]


def _below(pilot: list[RunRecord], variants: list[str]) -> list[str]:
    """`width=8 (accuracy 0.62 < threshold 0.85 at step 100)`: each rejected variant, why."""
    out = []
    for variant in variants:
        record = next(r for r in pilot if r.variant == variant and r.status == "rejected")
        out.append(f"{variant} ({record.rejection.message})" if record.rejection else variant)
    return out


def _missing_metric(pilot: list[RunRecord]) -> str | None:
    """A pilot run failed for reporting no value of the plan's metric (`MissingMetric`)."""
    for record in pilot:
        error = record.error
        if record.status == "failed" and error is not None and error.type == "MissingMetric":
            return (
                f"pilot run {record.run_id}: {error.message}; fix the training code's "
                "evaluation or the plan's metric, then run the corrected campaign in a new "
                "output folder"
            )
    return None


def _control_problem(plan: Plan, pilot: list[RunRecord]) -> str | None:
    triggers = set(plan.gate.reframe_on)
    for record in (r for r in pilot if r.variant == CONTROL):
        if record.status == "stopped" and "control_stopped" in triggers:
            stop = record.stop
            detail = f"{stop.rule} at step {stop.step}: {stop.message}" if stop else ""
            return f"the control was stopped in the pilot ({detail})"
        if record.status == "failed" and "control_failed" in triggers:
            error = record.error
            return (
                f"the control failed in the pilot ({error.type}: {error.message})"
                if error
                else ("the control failed in the pilot")
            )
        value = record.metrics.get(plan.metric.name)
        below = value is None or not plan.metric.meets_threshold(value)
        if (
            record.status in ("rejected", "accepted")
            and below
            and ("control_below_threshold" in triggers)
        ):
            return (
                f"the control's {plan.metric.name} in the pilot is {value} against the "
                f"threshold {plan.metric.threshold}"
            )
    return None


def judged_early(pilot: list[RunRecord]) -> list[str]:
    """`pilot of control seed 0 judged at step 40 of 60 (its last evaluation)`: each pilot
    run that trained past its last evaluation (its code evaluated only every `eval_every`
    steps, not at `ABLATE_UNTIL`), so the gate read an older value than the run's end. A
    stopped run is left out: its rule ended it where its message says."""
    early = []
    for record in pilot:
        if record.status == "stopped" or not record.evaluations:
            continue
        last = int(record.evaluations[-1]["step"])
        if last < record.steps_done:
            early.append(
                f"pilot of {record.variant} seed {record.seed} judged at step {last} of "
                f"{record.steps_done} (its last evaluation)"
            )
    if not early:
        return []
    return [
        f"{'; '.join(early)}: evaluate at the pilot's last step too (ABLATE_UNTIL, "
        "ablate.until()) to be judged on it"
    ]


def auto_decision(
    plan: Plan,
    pilot: list[RunRecord],
    preflight: PreflightReport,
    main_runs: list[PlannedRun],
    *,
    slots: int,
    elapsed_hours: float = 0.0,
) -> GateDecision:
    """The registered policy's decision from the pilot's records; its reason names each
    pilot run judged on an evaluation before its last step (`judged_early`)."""
    decision = _policy(plan, pilot, preflight, main_runs, slots, elapsed_hours)
    early = judged_early(pilot)
    if not early:
        return decision
    return decision.model_copy(update={"reason": "; ".join([decision.reason, *early])})


def _policy(
    plan: Plan,
    pilot: list[RunRecord],
    preflight: PreflightReport,
    main_runs: list[PlannedRun],
    slots: int,
    elapsed_hours: float,
) -> GateDecision:
    if not preflight.passed:  # a defect to fix, whatever the triggers: never a question
        return GateDecision(decision="fix", reason=preflight_defect(preflight))
    missing = _missing_metric(pilot)
    if missing:  # the code or the plan is wrong, not the question: never a reframe
        return GateDecision(decision="fix", reason=missing)
    problem = _control_problem(plan, pilot)
    if problem:
        return GateDecision(decision="reframe", reason=problem)

    reasons: list[str] = []
    drop: list[str] = []
    failed, notes = _failed_in_pilot(plan, pilot)
    drop += [r.run_id for r in main_runs if r.variant in failed]
    reasons += [n for n in notes if not n.startswith("kept ")]
    kept_notes = [n for n in notes if n.startswith("kept ")]

    estimate = estimate_from_records(pilot, plan)
    kept = [r for r in main_runs if r.run_id not in drop]
    window = project(plan, [], estimate, slots).window_hours
    available = max(
        0.0, window * (1 - plan.gate.budget_margin) - elapsed_hours - plan.budget.prep_hours
    )

    def sized(runs: list[PlannedRun]) -> Sizing:
        return size_main(plan, runs, estimate, slots, available_hours=available, pilot=pilot)

    # The fit is judged on the expected case: the looks stop seeds where the answer is clear.
    sizing = sized(kept)
    numbers: dict[str, float | str] = {
        "window_hours": round(window, 4),
        "available_hours": round(available, 4),
        "projected_hours": round(sizing.expected_hours, 4),
        "worst_case_hours": round(sizing.worst_hours, 4),
        "elapsed_hours": round(elapsed_hours, 4),
        "budget_margin": plan.gate.budget_margin,
        "slots": slots,
    }
    for category in plan.gate.trim_order:
        if sizing.expected_fits:
            break
        cut = [r.run_id for r in kept if r.category == category]
        if cut:
            drop += cut
            kept = [r for r in kept if r.run_id not in cut]
            reasons.append(f"dropped {category} runs to fit the window")
            sizing = sized(kept)
    numbers["projected_hours_after_trim"] = round(sizing.expected_hours, 4)
    numbers["worst_case_hours_after_trim"] = round(sizing.worst_hours, 4)
    if not sizing.expected_fits:
        return GateDecision(
            decision="reframe",
            reason=(
                f"even after trimming, the expected case needs "
                f"{_duration(sizing.expected_hours)} but {_duration(available)} remain in the "
                "window: the question must be narrowed"
            ),
            numbers=numbers,
            sizing=sizing,
        )
    if drop:
        reason = "; ".join(reasons + kept_notes)
        return GateDecision(
            decision="trim", reason=reason, drop=drop, numbers=numbers, sizing=sizing
        )
    worst = (
        ""
        if sizing.worst_hours <= sizing.expected_hours
        else (f" (worst case {_duration(sizing.worst_hours)})")
    )
    healthy = (
        f"the control is healthy and the main phase fits: {_duration(sizing.expected_hours)} "
        f"expected{worst} of {_duration(available)} available{_power(sizing)}"
    )
    return GateDecision(
        decision="continue",
        reason="; ".join([healthy, *kept_notes]),
        numbers=numbers,
        sizing=sizing,
    )


def _power(sizing: Sizing) -> str:
    """`; power at 2x the useful effect 64% with max 12 (80% needs max 17)`, when known."""
    if sizing.power is None or sizing.max_seeds is None:
        return ""
    need = ""
    if sizing.power < 0.8:
        need = (
            f" (80% needs max {sizing.suggested_max})"
            if sizing.suggested_max
            else " (80% needs more than 400 seeds)"
        )
    return f"; power at 2x the useful effect {sizing.power:.0%} with max {sizing.max_seeds}{need}"


def apply_answer(
    recommendation: GateDecision,
    decision: Decision,
    drop: list[str],
    note: str,
    main_runs: list[PlannedRun],
    source: Literal["ui", "timeout"] = "ui",
) -> GateDecision:
    """A person's answer: only registered main runs of variants (by id or variant name) can
    be dropped, never the control's (the UI's form refuses it before this is reached)."""
    by_variant: dict[str, list[str]] = {}
    for run in main_runs:
        if run.variant != CONTROL:  # every variant is compared with it: never droppable
            by_variant.setdefault(run.variant, []).append(run.run_id)
    ids = {run_id for runs in by_variant.values() for run_id in runs}
    controls = {r.run_id for r in main_runs if r.variant == CONTROL} | {CONTROL}
    chosen: list[str] = []
    ignored: list[str] = []
    refused: list[str] = []
    for item in drop:
        if item in ids:
            chosen.append(item)
        elif item in by_variant:
            chosen += by_variant[item]
        elif item in controls:
            refused.append(item)
        else:
            ignored.append(item)
    if decision == "trim" and not drop:
        chosen = list(recommendation.drop)
    if decision == "continue":
        chosen = []
    reason = f"answered in the UI: {decision}"
    if note:
        reason += f" ({note})"
    if ignored:
        reason += f"; ignored unknown runs {ignored} (only registered runs can be dropped)"
    if refused:
        reason += f"; kept the control {refused} ({CONTROL_KEPT})"
    return GateDecision(
        decision=decision,
        reason=reason,
        drop=sorted(set(chosen)),
        source=source,
        note=note,
        numbers={**recommendation.numbers, "recommended": recommendation.decision},
        sizing=recommendation.sizing,
    )
