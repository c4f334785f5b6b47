"""One run on the campaign's executor. Its task state is named after its status, the reason as
message, and a run that is a finding (stopped, rejected, failed) carries tags saying so."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext
from prefect.states import Cancelled, Completed, Failed, State

from ablations.campaign import steps
from ablations.campaign.campaign import Campaign
from ablations.campaign.executor import Executor
from ablations.campaign.progress import outcome
from ablations.run.records import RunRecord
from ablations.security.credentials import redact


def run_state(record: RunRecord) -> State:
    """The task state the UI shows for a run: `Stopped`, `Rejected`, `Failed` or `Completed`.

    Only an accepted run is of the Completed type (green in the list, the counts and the run
    graph). A stopped run is Cancelled-type (grey: a registered rule ended it early, nothing
    crashed); a rejected run Failed-type (red: it finished but failed the acceptance check);
    a failed run Failed. Every state carries the record as data, which the flow reads with
    `raise_on_failure=False`, so a stopped run stays a finding of the campaign, not an error
    of the flow; the reason (metrics to 4 significant figures) is the state message, which the
    task page shows."""
    message = redact(outcome(record))
    if record.status == "stopped":
        return Cancelled(name="Stopped", message=f"stopped: {message}", data=record)
    if record.status == "failed":
        return Failed(name="Failed", message=message or "failed", data=record)
    if record.status == "rejected":
        return Failed(name="Rejected", message=f"rejected: {message}", data=record)
    return Completed(message=f"{record.status}: {message}", data=record)


def finding_tags(record: RunRecord) -> list[str]:
    """The tags a run's task carries: its status when it is a finding (`stopped`, `rejected`,
    `failed`) and, for a stopped or rejected run, the rule (`rule:quality`, `rule:threshold`).

    Prefect's UI filters task runs by state *type* and by tag, not by state name: a Stopped
    run is of the Cancelled type and a Rejected one of the Failed type, so only a tag finds
    them ("Task runs -> Tags: stopped")."""
    if record.status == "stopped" and record.stop is not None:
        return ["stopped", f"rule:{record.stop.rule}"]
    if record.status == "rejected":
        return ["rejected", "rule:threshold"]
    if record.status == "failed":
        return ["failed"]
    return []


def _tag_this_task_run(tags: list[str]) -> None:
    """Add `tags` to the running task run. Prefect's API cannot change a task run's tags once
    it exists, but the client engine sends the task run (tags included) with every state
    change, and the server records it as sent: tags set on the run's own object now reach the
    server with its final state."""
    context = TaskRunContext.get()
    if context is not None and tags:
        context.task_run.tags = sorted({*context.task_run.tags, *tags})


# NO_CACHE: the executor holds processes and locks, and the campaign is an in-process handle:
# Prefect cannot hash either into a cache key
@task(
    name="execute-run",
    task_run_name="{variant} seed {seed} ({phase})",
    retries=0,
    cache_policy=NO_CACHE,
)
def execute_run(
    campaign: Campaign, run_id: str, variant: str, seed: int, phase: str, executor: Executor
) -> State:
    """Run (or, after a restart, recognize) one registered run; return its state (the record
    as its data). The flow logs the run's one progress line; the reason is the state message."""
    record: RunRecord = steps.execute_run(campaign, run_id, executor)
    _tag_this_task_run(finding_tags(record))
    return run_state(record)
