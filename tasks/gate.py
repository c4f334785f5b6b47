"""The gate's automatic recommendation, and recording the final decision."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from ablations.campaign.campaign import Campaign
from ablations.campaign.gate import GateDecision
from ablations.campaign.steps import (
    gate_recommendation,
    record_gate_decision,
    sized_after_answer,
)

# NO_CACHE on each: the campaign is an in-process handle, which Prefect cannot hash into a key


@task(name="gate-recommendation", cache_policy=NO_CACHE)
def recommend_gate(campaign: Campaign, slots: int) -> GateDecision:
    """The registered policy's decision from the pilot's records."""
    return gate_recommendation(campaign, slots)


@task(name="gate-resize", cache_policy=NO_CACHE)
def resize_after_answer(campaign: Campaign, decision: GateDecision, slots: int) -> GateDecision:
    """A person's answer, its projection and sizing re-made for the runs it keeps."""
    return sized_after_answer(campaign, decision, slots)


@task(name="gate-record", cache_policy=NO_CACHE)
def record_gate(campaign: Campaign, decision: GateDecision) -> GateDecision:
    """Persist the decision so a restarted campaign never asks again."""
    return record_gate_decision(campaign, decision)
