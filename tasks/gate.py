"""The gate's automatic recommendation, and recording the final decision."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from ablations.campaign.gate import GateDecision
from ablations.campaign.steps import (
    gate_recommendation,
    record_gate_decision,
    sized_after_answer,
)


@task(name="gate-recommendation")
def recommend_gate(out_dir: str, slots: int) -> GateDecision:
    """The registered policy's decision from the pilot's records."""
    return gate_recommendation(Path(out_dir), slots)


@task(name="gate-resize")
def resize_after_answer(out_dir: str, decision: GateDecision, slots: int) -> GateDecision:
    """A person's answer, its projection and sizing re-made for the runs it keeps."""
    return sized_after_answer(Path(out_dir), decision, slots)


@task(name="gate-record")
def record_gate(out_dir: str, decision: GateDecision) -> GateDecision:
    """Persist the decision so a restarted campaign never asks again."""
    return record_gate_decision(Path(out_dir), decision)
