"""The pre-registered stop rules, as pure checks that return a typed `Stop` or None.

The driver decides *when* each check runs (see `ablations.training.driver`); this module decides
*whether* it fires and says why, in words a reader of the report understands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from ablations.errors import WorkloadError
from ablations.plan.experiment import meets_threshold
from ablations.plan.rules import NonFiniteLossRule, QualityRule, TruncationRule
from ablations.run.records import Stop
from ablations.run.workload import InputReport


def truncation_stop(rule: TruncationRule, report: InputReport, step: int) -> Stop | None:
    """Stop when an essential input group is truncated beyond the tolerated fraction."""
    if not rule.enabled:
        return None
    missing = [name for name in rule.essential if name not in report.groups]
    if missing:
        # A plan naming a group the workload does not report is a mismatch to fix, not a
        # rule outcome: fail loudly rather than treat an unchecked group as fine.
        raise WorkloadError(
            f"stop_rules.truncation.essential names {missing}, but the workload's input "
            f"report has only {sorted(report.groups)}"
        )
    for name in rule.essential:
        group = report.groups[name]
        fraction = group.truncated_fraction
        if fraction > rule.max_truncated_fraction:
            return Stop(
                rule="truncation",
                step=step,
                value=fraction,
                message=(
                    f"essential input group {name!r} is truncated: {group.truncated} of "
                    f"{group.seen} inputs ({fraction:.1%}, tolerated "
                    f"{rule.max_truncated_fraction:.1%})"
                ),
            )
    return None


def non_finite_stop(
    rule: NonFiniteLossRule, losses: Sequence[float], first_step: int, checked_at: int
) -> Stop | None:
    """Stop at the first NaN or infinite loss; `losses[i]` is the loss of `first_step + i`."""
    if not rule.enabled:
        return None
    for i, loss in enumerate(losses):
        if not math.isfinite(loss):
            step = first_step + i
            return Stop(
                rule="non_finite_loss",
                step=step,
                value=loss,
                message=(
                    f"training loss is {loss} at step {step} (seen after step {checked_at}: "
                    f"losses reach the host every {rule.check_every} steps, without waiting "
                    "for the device)"
                ),
            )
    return None


def quality_stop(
    rule: QualityRule,
    metrics: Mapping[str, float],
    *,
    metric: str,
    direction: Literal["maximize", "minimize"],
    threshold: float,
    step: int,
) -> Stop | None:
    """Stop when the metric misses the threshold at an evaluation at or after the warm-up."""
    if not rule.enabled or step < rule.warmup_steps:
        return None
    value = metrics[metric]
    if meets_threshold(value, direction, threshold):
        return None
    relation = "below" if direction == "maximize" else "above"
    return Stop(
        rule="quality",
        step=step,
        value=value,
        message=(
            f"{metric} {value:.4g} is {relation} the threshold {threshold:g} at step {step} "
            f"(warm-up {rule.warmup_steps} steps)"
        ),
    )
