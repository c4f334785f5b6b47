"""Admitting a campaign from a form: the plan's text from a path or pasted YAML, validated and
checked against the output folder before any task starts.

A flow launched from the Prefect UI has no terminal: a bad input must end it with one line a
person reads (the run's state message and one log line), not a traceback from inside a task.
So everything a person can get wrong is checked here, in the flow's own body, and reported
through `one_line`.
"""

from __future__ import annotations

from pathlib import Path

from ablations.campaign.state import existing_registration
from ablations.errors import InputError, PlanError
from ablations.plan.io import parse_yaml, plan_from_text, read_plan_text
from ablations.plan.io import plan_text_of as bounded_text
from ablations.plan.model import Plan
from ablations.security.credentials import redact

NO_PLAN = "no plan given: fill in plan_path (a YAML file on the serving machine) or plan_yaml"


def plan_text_of(plan_yaml: str, plan_path: str) -> tuple[str, str]:
    """(text, source): the pasted plan, else the file's; InputError when neither is given."""
    if plan_yaml.strip():
        # the same bounded reader as a file: a pasted plan never exceeds the size cap
        return bounded_text(plan_yaml, "plan_yaml"), "plan_yaml"
    if not plan_path.strip():
        raise InputError(NO_PLAN)
    return read_plan_text(Path(plan_path)), plan_path


def admit(plan_text: str, source: str, out_dir: Path) -> Plan:
    """The validated plan, once the folder is known to take it (its campaign or empty)."""
    plan = plan_from_text(plan_text, source)
    problems = plan.pilot_problems()
    if problems:
        raise PlanError(problems, source)
    existing_registration(plan, out_dir)
    return plan


def one_line(error: InputError) -> str:
    """The error as one line, a plan's problems joined by `;`, with nothing secret in it: it
    becomes the flow run's state message, which `ablate notify` forwards."""
    if isinstance(error, PlanError):
        head = f"{error.source}: " if error.source else ""
        problems = "; ".join(str(p) for p in error.problems)
        return redact(f"{head}invalid plan: {problems}")
    return redact(" ".join(str(error).split()))


MAX_NAME_CHARS = 64
"""A campaign id is at most 64 characters: a run's name is never longer than one."""


def run_name(plan_yaml: str, plan_path: str) -> str:
    """The flow run's name: the campaign id, or a name that says the input is invalid."""
    return _run_name(plan_yaml, plan_path)[: MAX_NAME_CHARS + len("invalid plan: ")]


def _run_name(plan_yaml: str, plan_path: str) -> str:
    try:
        text, source = plan_text_of(plan_yaml, plan_path)
    except InputError:
        given = plan_yaml.strip() or plan_path.strip()
        return "invalid: unreadable plan_path" if given else "invalid: no plan"
    try:
        return plan_from_text(text, source).campaign.id
    except InputError:
        pass
    try:  # name it after the campaign it meant to be, when that much can be read
        campaign_id = parse_yaml(text, source)["campaign"]["id"]
        return f"invalid plan: {str(campaign_id)[:MAX_NAME_CHARS]}"
    except (InputError, KeyError, TypeError):
        return "invalid plan"
