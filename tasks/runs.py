"""One run on a leased slot. Stopped runs end in a Completed state named `Stopped`."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.states import Completed, State

from ablations.campaign_phases import execute_registered_run
from ablations.progress import outcome
from ablations.records import RunRecord


@task(name="run", task_run_name="{variant} seed {seed} ({phase})", retries=0)
def execute_run(out_dir: str, run_id: str, variant: str, seed: int, phase: str) -> State:
    """Run (or, after a restart, recognize) one registered run; return its record."""
    record: RunRecord = execute_registered_run(Path(out_dir), run_id)
    if record.status == "stopped" and record.stop is not None:
        message = f"{record.stop.rule} at step {record.stop.step}: {record.stop.message}"
        return Completed(name="Stopped", message=message, data=record)
    if record.status == "failed" and record.error is not None:
        message = f"{record.error.type}: {record.error.message}"
        return Completed(name="Failed run", message=message, data=record)
    return Completed(message=f"{record.status}: {outcome(record)}", data=record)
