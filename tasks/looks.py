"""The main phase's looks: which runs a look starts, and what it decided."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from ablations.analysis.looks import LookRecord
from ablations.campaign import looks
from ablations.campaign.campaign import Campaign
from ablations.plan.variants import PlannedRun

# NO_CACHE on each: the campaign is an in-process handle, which Prefect cannot hash into a key


@task(name="look-runs", task_run_name="look {look} runs", cache_policy=NO_CACHE)
def look_runs(campaign: Campaign, look: int) -> list[PlannedRun]:
    """The main runs look `look` starts: its seeds for each open variant and the control."""
    return looks.look_runs(campaign, look)


@task(name="decide-look", task_run_name="look {look}", cache_policy=NO_CACHE)
def decide_look(campaign: Campaign, look: int, slots: int) -> LookRecord:
    """Judge every open variant at this look and record it (a recorded look is kept)."""
    return looks.decide_look(campaign, look, slots)
