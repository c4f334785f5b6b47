"""The gate's automatic recommendation, a person's answer resized, and the final decision."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from ablations.campaign import steps
from ablations.campaign.campaign import Campaign
from ablations.campaign.gate import GateDecision

# NO_CACHE on each: the campaign is an in-process handle, which Prefect cannot hash into a key


@task(name="recommend-gate", cache_policy=NO_CACHE)
def recommend_gate(campaign: Campaign, slots: int) -> GateDecision:
    """The registered policy's decision from the pilot's records."""
    return steps.recommend_gate(campaign, slots)


@task(name="resize-after-answer", cache_policy=NO_CACHE)
def resize_after_answer(campaign: Campaign, decision: GateDecision, slots: int) -> GateDecision:
    """A person's answer, its projection and sizing re-made for the runs it keeps."""
    return steps.resize_after_answer(campaign, decision, slots)


@task(name="record-gate-decision", cache_policy=NO_CACHE)
def record_gate_decision(campaign: Campaign, decision: GateDecision) -> GateDecision:
    """Persist the decision so a restarted campaign never asks again."""
    return steps.record_gate_decision(campaign, decision)
