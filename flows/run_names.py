"""Flow run names the UI lists: the campaign id instead of Prefect's random names."""

from __future__ import annotations

from pathlib import Path

import yaml
from prefect.runtime import flow_run


def campaign_id_of(plan_yaml: str, plan_path: str) -> str | None:
    """The plan's `campaign.id`, read leniently (registration validates the plan later)."""
    try:
        text = plan_yaml or (Path(plan_path).read_text() if plan_path else "")
        data = yaml.safe_load(text)
        return str(data["campaign"]["id"])
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError):
        return None


def campaign_run_name() -> str:
    """The campaign flow run's name: its campaign id (the flow's name when unreadable)."""
    params = flow_run.parameters
    found = campaign_id_of(str(params.get("plan_yaml") or ""), str(params.get("plan_path") or ""))
    return found or "ablation-campaign"
