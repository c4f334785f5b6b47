"""One run on the campaign's executor. Its task state is named after its status, the reason as
message."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, Failed, State

from ablations.campaign.executor import Executor
from ablations.campaign.steps import execute_registered_run
from ablations.progress import PROGRESS_LOG, outcome
from ablations.records import RunRecord


def run_state(record: RunRecord) -> State:
    """The task state the UI shows for a run: `Stopped`, `Rejected`, `Failed` or `Completed`.

    Stopped and rejected runs completed their work (a rule or the threshold decided), so their
    type stays Completed; a failed run crashed, so its state is Failed. Every state carries the
    record as data, and the reason (metrics to 4 significant figures) as its message."""
    message = outcome(record)
    if record.status == "stopped":
        return Completed(name="Stopped", message=message, data=record)
    if record.status == "failed":
        return Failed(name="Failed", message=message or "failed", data=record)
    if record.status == "rejected":
        return Completed(name="Rejected", message=message, data=record)
    return Completed(message=f"{record.status}: {message}", data=record)


# NO_CACHE: the executor holds processes and locks, which Prefect cannot hash into a cache key
@task(name="run", task_run_name="{variant} seed {seed} ({phase})", retries=0, cache_policy=NO_CACHE)
def execute_run(
    out_dir: str, run_id: str, variant: str, seed: int, phase: str, executor: Executor
) -> State:
    """Run (or, after a restart, recognize) one registered run; return its record."""
    record: RunRecord = execute_registered_run(Path(out_dir), run_id, executor)
    state = run_state(record)
    # Only to this task run's logs in the UI: the flow prints the terminal's line for it.
    PROGRESS_LOG.info(f"{run_id}: {state.name}: {state.message}")
    return state
