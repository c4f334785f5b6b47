"""Flow run names the UI lists: the campaign id, or a name that says the input is invalid."""

from __future__ import annotations

from prefect.runtime import flow_run

from ablations.campaign.admission import run_name


def campaign_run_name() -> str:
    """The campaign flow run's name: its campaign id; `invalid plan: <id>`, `invalid plan` or
    `invalid: no plan` when the form's plan cannot start a campaign."""
    params = flow_run.parameters
    return run_name(str(params.get("plan_yaml") or ""), str(params.get("plan_path") or ""))
