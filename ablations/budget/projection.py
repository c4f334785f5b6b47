"""How long the registered runs keep the machine busy, and whether that fits the window.

One run's busy time is the sum of its parts, from a per-run `RunEstimate` (the plan's
`budget.estimate`, or the pilot's measurements through `estimate_from_records`):

    load + steps x step + evaluations x eval + checkpoints x checkpoint + export

The runs of a phase are packed onto the slots longest first (LPT): the phase's wall time is
the busiest slot's load, never a plain total / slots, which would assume runs split into
pieces. The pilot and the main phase run one after the other (the gate sits between them),
so their wall times add. A pilot is the prefix of its main run, which resumes from it: that
main run is projected for its remaining steps only, so the pilot's are not counted twice.

**Fits** means: busy wall hours + preparation hours <= window hours (days x 24). Preparation
(`budget.prep_hours`) is human time inside the window that does not occupy the GPU, so it is
added once, not spread over slots. The gate's `budget_margin` is a reserve on top of this and
is applied by the gate, not here.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from ablations.checkpoint.interval import BOOTSTRAP_STEPS, young_daly
from ablations.plan.infrastructure import CheckpointSection
from ablations.plan.model import Plan
from ablations.plan.offers import RunEstimate
from ablations.plan.section import Category
from ablations.plan.variants import Phase, PlannedRun

PARTS = ("load", "train", "evaluate", "checkpoint", "export")
FIT_TOLERANCE_HOURS = 1e-9
"""Float noise below which an exact fit (48 h + 24 h in 72 h) still counts as a fit."""


class WindowFit(BaseModel):
    """Busy wall hours plus preparation against the package window."""

    model_config = ConfigDict(frozen=True)

    window_hours: float
    wall_hours: float
    """Hours the window must hold for the machine-busy part (already spread over the slots)."""
    prep_hours: float = 0.0
    fits: bool
    unused_hours: float
    """Window hours left over when it fits (0 otherwise)."""
    overrun_hours: float
    """Hours beyond the window when it does not fit (0 otherwise)."""


def fit_window(wall_hours: float, prep_hours: float, window_hours: float) -> WindowFit:
    """Whether `wall_hours + prep_hours <= window_hours`, and by how much either way."""
    needed = wall_hours + prep_hours
    fits = needed <= window_hours + FIT_TOLERANCE_HOURS
    return WindowFit(
        window_hours=window_hours,
        wall_hours=wall_hours,
        prep_hours=prep_hours,
        fits=fits,
        unused_hours=max(0.0, window_hours - needed) if fits else 0.0,
        overrun_hours=0.0 if fits else needed - window_hours,
    )


class RunProjection(BaseModel):
    """One registered run's projected busy time, part by part."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    variant: str
    category: Category
    phase: Phase
    steps: int
    parts: dict[str, float]
    """Seconds per part: load, train, evaluate, checkpoint, export."""

    @property
    def hours(self) -> float:
        return sum(self.parts.values()) / 3600.0


class Projection(WindowFit):
    """The registered runs projected onto the slots and the package window."""

    slots: int
    busy_hours: float
    """Machine-busy hours of every run, summed (what the cards do in all)."""
    phase_hours: dict[str, float]
    """Wall hours per phase after LPT packing; they add up to `wall_hours`."""
    category_hours: dict[str, float]
    """Busy hours per category, so the gate knows what dropping a category saves."""
    part_hours: dict[str, float]
    """Busy hours per part (load, train, evaluate, checkpoint, export)."""
    estimate: RunEstimate
    """The per-run estimate the projection was made from."""
    runs: list[RunProjection]


def evaluations(steps: int, eval_every: int) -> int:
    """Evaluations the driver makes: every `eval_every` steps and always at the last step."""
    return math.ceil(steps / eval_every)


def checkpoints(
    steps: int, train_seconds: float, estimate: RunEstimate, section: CheckpointSection
) -> int:
    """Saves the interval policy takes in a run of `steps` steps (see `IntervalPolicy`)."""
    interval = section.interval
    if interval.steps is not None:
        return steps // interval.steps
    if interval.seconds is not None:
        return math.floor(train_seconds / interval.seconds)
    if steps < BOOTSTRAP_STEPS:
        return 0
    # auto: one bootstrap save to measure C, then one every Young/Daly interval
    tau = young_daly(
        max(estimate.checkpoint_seconds, 1e-6),
        section.mtbf_hours * 3600.0,
        section.max_loss_minutes * 60.0,
    )
    return 1 + math.floor(train_seconds / tau)


def run_parts(plan: Plan, steps: int, estimate: RunEstimate) -> dict[str, float]:
    """Projected seconds per part of one run of `steps` steps."""
    train = steps * estimate.step_seconds
    return {
        "load": estimate.load_seconds,
        "train": train,
        "evaluate": evaluations(steps, plan.workload.eval_every) * estimate.eval_seconds,
        "checkpoint": checkpoints(steps, train, estimate, plan.checkpoint)
        * estimate.checkpoint_seconds,
        "export": estimate.export_seconds,
    }


def lpt_makespan(durations: Sequence[float], slots: int) -> float:
    """Wall time of independent jobs on `slots` slots, longest first onto the least loaded."""
    if slots < 1:
        raise ValueError(f"slots must be at least 1, got {slots}")
    loads = [0.0] * min(slots, max(1, len(durations)))
    heapq.heapify(loads)
    for duration in sorted(durations, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + duration)
    return max(loads)


def project(plan: Plan, runs: Sequence[PlannedRun], per_run: RunEstimate, slots: int) -> Projection:
    """Project `runs` with `per_run` onto `slots` slots and the plan's package window."""
    projected = [
        RunProjection(
            run_id=r.run_id,
            variant=r.variant,
            category=r.category,
            phase=r.phase,
            steps=r.trained_steps,  # a main run's pilot trained the steps before its start
            parts=run_parts(plan, r.trained_steps, per_run),
        )
        for r in runs
    ]
    phase_hours: dict[str, float] = {}
    for phase in ("pilot", "main"):
        hours = [p.hours for p in projected if p.phase == phase]
        if hours:
            phase_hours[phase] = lpt_makespan(hours, slots)
    category_hours: dict[str, float] = {}
    for p in projected:
        category_hours[p.category] = category_hours.get(p.category, 0.0) + p.hours
    fit = fit_window(
        sum(phase_hours.values()), plan.budget.prep_hours, plan.budget.package.days * 24.0
    )
    return Projection(
        **fit.model_dump(),
        slots=slots,
        busy_hours=sum(p.hours for p in projected),
        phase_hours=phase_hours,
        category_hours=category_hours,
        part_hours={k: sum(p.parts[k] for p in projected) / 3600.0 for k in PARTS},
        estimate=per_run,
        runs=projected,
    )


def slot_count(plan: Plan, cards: int) -> int:
    """Slots the campaign runs on: the plan's devices if it lists them, else the rented cards.

    `resources.devices` as a number or a list fixes the devices; `auto` means every rented
    card. Either way each device holds `resources.slots_per_device` runs at once (`auto`
    counts as 1 here: how many fit depends on the card the campaign finally runs on).
    """
    devices = plan.resources.devices
    count = (
        devices
        if isinstance(devices, int)
        else len(devices)
        if isinstance(devices, list)
        else cards
    )
    return count * per_device(plan)


def per_device(plan: Plan) -> int:
    """Runs per device for projecting: the plan's number, 1 for `auto`."""
    per = plan.resources.slots_per_device
    return per if isinstance(per, int) else 1
