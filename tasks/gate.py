"""The gate's automatic recommendation, and recording the final decision."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from ablations.campaign.gate import GateDecision
from ablations.campaign.steps import gate_recommendation, record_gate_decision


@task(name="gate-recommendation")
def recommend_gate(out_dir: str, slots: int) -> GateDecision:
    """The registered policy's decision from the pilot's records."""
    return gate_recommendation(Path(out_dir), slots)


@task(name="gate-record")
def record_gate(out_dir: str, decision: GateDecision) -> GateDecision:
    """Persist the decision so a restarted campaign never asks again."""
    return record_gate_decision(Path(out_dir), decision)
