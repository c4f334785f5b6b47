"""Preflight: the data check and the restart check, on a leased slot."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from ablations.campaign.steps import preflight_once
from ablations.records import PreflightReport


@task(name="preflight", retries=0)
def run_preflight(out_dir: str) -> PreflightReport:
    """Run the essential checks until they pass (a passed report is reused on restart)."""
    return preflight_once(Path(out_dir))
