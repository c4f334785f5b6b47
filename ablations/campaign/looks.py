"""The main phase, look by look: which runs a look starts, and the look's decisions.

Look k starts the seeds of its batch (`PlannedRun.look == k`) for every variant still open
and for the control, so every difference stays paired. When they have finished, `decide_look`
judges each open variant on its paired seeds of looks 0..k (never a later seed) and records
the look in `looks.json` before anything else starts: a rerun finds it and goes on from the
next look with the same decisions. A variant whose runs were stopped, rejected or failed is
decided by its runs (its verdict says how); a variant the window can no longer pay for is
ended by the budget, and says so.
"""

from __future__ import annotations

import time

from ablations.analysis.looks import (
    LookRecord,
    Looks,
    judge_recorded_look,
    look_candidates,
    look_design,
)
from ablations.budget import estimate_from_records, project
from ablations.campaign.campaign import Campaign
from ablations.plan.variants import CONTROL, PlannedRun
from ablations.process.crash_points import crash_point
from ablations.run.records import RunRecord


def recorded_looks(campaign: Campaign) -> Looks:
    """The looks recorded so far (none before the main phase)."""
    return campaign.looks()


def _candidates(campaign: Campaign, main: list[PlannedRun]) -> list[str]:
    """Variants the looks judge: every one compared with the control, unless the gate
    trimmed all its main runs."""
    gate = campaign.gate()
    return look_candidates(campaign.plan, set(gate.drop) if gate else set(), main)


def look_runs(campaign: Campaign, look: int) -> list[PlannedRun]:
    """The main runs look `look` starts: its batch for each open variant and the control (the
    first batch of the control always runs: the baseline is a result of its own, even when
    the gate trimmed every variant)."""
    main = campaign.phase("main")
    gate = campaign.gate()
    dropped = set(gate.drop) if gate else set()
    open_now = set(recorded_looks(campaign).open_at(look, _candidates(campaign, main)))
    if not open_now and look > 0:
        return []  # every variant decided: the control needs no more seeds either
    wanted = open_now | {CONTROL}
    return [r for r in main if r.look == look and r.variant in wanted and r.run_id not in dropped]


def decide_look(campaign: Campaign, look: int, slots: int) -> LookRecord:
    """Judge every open variant at `look` and record it; a recorded look is returned as is.
    The judging is `judge_at`'s (what `rejudged_looks` repeats for `ablate verify`), on the
    open variants and claims of the looks recorded before it."""
    looks = recorded_looks(campaign)
    if look < len(looks.looks):
        return looks.looks[look]
    main = campaign.phase("main")
    records = campaign.records()
    open_now = looks.open_at(look, _candidates(campaign, main))
    record = judge_at(campaign, look, open_now, records, looks.claimed_before(look))
    record = record.model_copy(
        update={
            "decided_at": time.time(),
            "budget_ended": _beyond_budget(campaign, record, records, main, slots),
        }
    )
    campaign.folder.write_looks(looks.with_look(record))
    crash_point(f"after-look-{look + 1}")
    return record


def rejudged_looks(campaign: Campaign) -> list[LookRecord]:
    """Every recorded look judged again from the run records by `judge_at`, the code that
    decided it (`ablate verify` compares them with looks.json and the manifest). Each look
    judges the variants, and counts the claims, of the looks judged again before it; which
    variants the budget ended is taken as recorded (it depended on the clock, not the
    records)."""
    recorded = recorded_looks(campaign).looks
    main = campaign.phase("main")
    records = campaign.records()
    again = Looks()
    for look, mine in enumerate(recorded):
        open_now = again.open_at(look, _candidates(campaign, main))
        judged = judge_at(campaign, look, open_now, records, again.claimed_before(look))
        judged = judged.model_copy(
            update={"decided_at": mine.decided_at, "budget_ended": mine.budget_ended}
        )
        again = again.with_look(judged)
    return list(again.looks)


def judge_at(
    campaign: Campaign,
    look: int,
    open_now: list[str],
    records: dict[str, RunRecord],
    claimed: int,
) -> LookRecord:
    """Look `look` judged from the run records (`judge_recorded_look`: each variant of
    `open_now` on its paired seeds of looks 0..`look`, never a later seed, with the registered
    design, `claimed` variants claimed before it). Nothing is written; the record's
    `decided_at` and `budget_ended` are left for the caller."""
    plan = campaign.plan
    design = look_design(plan)
    merged = judge_recorded_look(plan, records.values(), look, open_now, claimed)
    # One correlation per look: the interval judgements carry the one it assumed.
    rho = next((j.rho for j in merged if j.ci_low is not None and j.rho is not None), 0.0)
    boundary = design.boundary(look, claimed=claimed, rho=rho)
    return LookRecord(
        look=look,
        looks=len(design.looks),
        seeds=design.looks[look],
        alpha=design.alpha,
        alpha_spent=boundary.alpha_spent,
        level=boundary.level,
        comparisons=boundary.comparisons,
        rho=boundary.rho,
        judgements=merged,
        decided_at=0.0,
    )


def _beyond_budget(
    campaign: Campaign,
    record: LookRecord,
    records: dict[str, RunRecord],
    main: list[PlannedRun],
    slots: int,
) -> list[str]:
    """The open variants when the next look's runs do not fit what is left of the window
    (less the gate's reserve); none when they fit or no look follows."""
    plan = campaign.plan
    still_open = record.still_open
    nxt = record.look + 1
    if not still_open or nxt >= record.looks:
        return []
    wanted = set(still_open) | {CONTROL}
    runs = [r for r in main if r.look == nxt and r.variant in wanted]
    measured = [r for r in records.values() if r.status != "trimmed"]
    estimate = estimate_from_records(measured, plan)
    projection = project(plan, runs, estimate, slots)
    elapsed = (time.time() - campaign.registration.registered_at) / 3600
    available = (
        projection.window_hours * (1 - plan.gate.budget_margin) - elapsed - plan.budget.prep_hours
    )
    return [] if projection.wall_hours <= available else list(still_open)
