"""Flow run names the UI lists: the campaign id instead of Prefect's random names."""

from __future__ import annotations

from pathlib import Path

from prefect.runtime import flow_run

from ablations.errors import AblationError
from ablations.plan.io import parse_yaml, plan_text_of, read_plan_text

MAX_NAME_CHARS = 64
"""A campaign id is at most 64 characters (the plan validates it later): a name never more."""


def campaign_id_of(plan_yaml: str, plan_path: str) -> str | None:
    """The plan's `campaign.id`, read leniently (registration validates the plan later), but
    through the same bounded reader as the plan itself: a pasted alias bomb never expands."""
    try:
        if plan_yaml:
            text = plan_text_of(plan_yaml, "plan_yaml")
        elif plan_path:
            text = read_plan_text(Path(plan_path))
        else:
            return None
        found = parse_yaml(text)["campaign"]["id"]
    except (AblationError, KeyError, TypeError):
        return None
    return found[:MAX_NAME_CHARS] if isinstance(found, str) and found else None


def campaign_run_name() -> str:
    """The campaign flow run's name: its campaign id (the flow's name when unreadable)."""
    params = flow_run.parameters
    found = campaign_id_of(str(params.get("plan_yaml") or ""), str(params.get("plan_path") or ""))
    return found or "ablation-campaign"
