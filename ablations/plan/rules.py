"""The rules registered before anything runs: stop rules, the pilot and the gate."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ablations.plan.section import MAX_COUNT, PositiveFloat, PositiveInt, Section


class NonFiniteLossRule(Section):
    """Stop a run whose training loss becomes NaN or infinite."""

    enabled: bool = True
    """Whether the rule is active."""
    check_every: PositiveInt = 10
    """Steps between checks. Losses stay on the device and are copied to the host a window of
    this many steps at a time without the loop waiting for it (a GPU never synchronizes in
    the hot path); a NaN is seen once its window has arrived, a few steps later on a card."""


class QualityRule(Section):
    """Stop a run whose metric is below the threshold at an evaluation after the warm-up."""

    enabled: bool = True
    """Whether the rule is active."""
    warmup_steps: int = Field(default=100, ge=0, le=MAX_COUNT)
    """Evaluations before this step never stop a run (early training is always poor)."""


class TruncationRule(Section):
    """Stop a run, before its first step, if an essential input is truncated."""

    enabled: bool = True
    """Whether the rule is active."""
    essential: list[str] = ["heldout"]
    """Input groups of the workload's input report that must not be truncated."""
    max_truncated_fraction: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    """Largest tolerated fraction of truncated inputs within an essential group."""


class RestartRule(Section):
    """Stop a run whose checkpoint cannot be reloaded into an identical continuation."""

    enabled: bool = True
    """Whether the restart check runs in preflight."""
    check_steps: PositiveInt = 3
    """Steps taken after a reload and compared with the uninterrupted continuation."""


class StopRules(Section):
    """Rules registered before anything runs; a stopped run is never an accepted result."""

    non_finite_loss: NonFiniteLossRule = NonFiniteLossRule()
    """NaN or infinite training loss."""
    quality: QualityRule = QualityRule()
    """Metric below the quality threshold after the warm-up."""
    truncation: TruncationRule = TruncationRule()
    """An essential input truncated."""
    restart: RestartRule = RestartRule()
    """No usable restart from a checkpoint."""


class PilotSection(Section):
    """The short first phase that measures durations and health before the money is spent."""

    variants: list[str] | None = None
    """Variant names to pilot; default: the essential ones (always including the control)."""
    seeds: list[int] | None = None
    """Seeds for the pilot; default: the first registered seed."""
    steps: PositiveInt | None = None
    """Steps of a pilot run; default: a quarter of `workload.steps` (at least one evaluation)."""


Trigger = Literal[
    "control_stopped", "control_failed", "control_below_threshold", "preflight_failed"
]


class GateSection(Section):
    """The decision after the pilot: continue, trim, reframe, or fix (preflight failed)."""

    mode: Literal["auto", "ui"] = "auto"
    """`auto` applies the policy below; `ui` asks in the Prefect UI and falls back to it."""
    timeout_minutes: PositiveFloat = 30.0
    """How long the UI gate waits for an answer before applying the automatic decision."""
    reframe_on: list[Trigger] = ["control_stopped", "control_failed", "control_below_threshold"]
    """Pilot outcomes that mean the question itself must be revised. A failed preflight is a
    defect to fix, never a question: it always ends at `fix` (`preflight_failed` is still
    accepted, for plans written before `fix`, and changes nothing)."""
    trim_stopped: bool = True
    """Drop the main runs of variants whose pilot run was stopped by a rule (an essential
    variant only as `trim_essential` allows)."""
    trim_rejected: bool = True
    """Drop the main runs of variants whose pilot run was rejected (it completed its pilot
    steps below the quality threshold): their verdict is `fails threshold in the pilot`, and
    the gate's decision lists them. An essential variant only as `trim_essential` allows."""
    trim_essential: bool = False
    """Let `trim_stopped` and `trim_rejected` drop an essential variant too, and then only
    when every pilot seed of it was stopped or rejected and there are at least two. Off:
    essential variants are kept and the reason says so (a person at the UI gate can still
    drop them)."""
    trim_order: list[Literal["exploratory", "useful"]] = ["exploratory", "useful"]
    """Categories dropped, in order, when the projected time does not fit the window."""
    budget_margin: float = Field(default=0.15, ge=0.0, lt=1.0, allow_inf_nan=False)
    """Fraction of the remaining package window kept in reserve when projecting the fit."""
