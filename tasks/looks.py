"""The main phase's looks: which runs a look starts, and what it decided."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from ablations.analysis.looks import LookRecord
from ablations.campaign.looks import decide_look, look_runs
from ablations.plan.variants import PlannedRun


@task(name="look-runs", task_run_name="look {look} runs")
def runs_for_look(out_dir: str, look: int) -> list[PlannedRun]:
    """The main runs look `look` starts: its seeds for each open variant and the control."""
    return look_runs(Path(out_dir), look)


@task(name="look", task_run_name="look {look}")
def judge_look(out_dir: str, look: int, slots: int) -> LookRecord:
    """Judge every open variant at this look and record it (a recorded look is kept)."""
    return decide_look(Path(out_dir), look, slots)
