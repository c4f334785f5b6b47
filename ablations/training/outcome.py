"""How a finished run ends up: its status, and the error of a run interrupted mid-way.

Shared by the driver and every adapter's runs (`ablations.byo`), and free of torch: a command's
run, whose program is another process, never loads it here.
"""

from __future__ import annotations

from ablations.errors import Interrupted
from ablations.process.preemption import TERMINATE
from ablations.run.records import INTERRUPTED, CheckpointSummary, RunError, RunSpec, RunStatus, Stop
from ablations.training.stop_rules import meets_threshold


def run_status(
    spec: RunSpec, stop: Stop | None, error: RunError | None, metrics: dict[str, float]
) -> RunStatus:
    """A finished run's status: failed (crashed), stopped (a rule), else accepted or rejected
    by its final metric against the threshold (the driver's and every adapter's runs alike)."""
    if error is not None:
        return "failed"
    if stop is not None:
        return "stopped"
    value = metrics.get(spec.metric.name)
    if value is not None and meets_threshold(value, spec.metric.direction, spec.metric.threshold):
        return "accepted"
    return "rejected"


def interrupted_error(interrupted: Interrupted, summary: CheckpointSummary) -> RunError:
    """An infrastructure cause: the rerun resumes the run from what it committed."""
    step = interrupted.step
    committed = (
        interrupted.saved and summary.uri is not None and summary.uri.endswith(f"step-{step:08d}")
    )
    where = (
        f"its checkpoint at step {step} is committed; a rerun resumes from it"
        if committed
        else "a rerun resumes from its last committed checkpoint"
    )
    message = f"interrupted by {TERMINATE.reason or 'a terminate request'} at step {step}: {where}"
    return RunError(type=INTERRUPTED, message=message, cause="infrastructure")
