"""The results step as a slot worker's job (`LocalSlots.write_results`): the worker imported
their libraries (pandas, matplotlib, optuna) while it waited, and the campaign process never
loads them. Importing this module imports none of them either. The manifest comes back as the
reply's text: the campaign process never reads manifest.json back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ablations.campaign.manifest import Manifest
from ablations.errors import WorkerLost
from ablations.workers.messages import Failed, Job, Worker, job_error

RESULTS_PRELOAD = ("ablations.results.write",)
"""What the worker that will write the results imports while it waits (pandas, matplotlib,
optuna: seconds), so the step starts at once."""


@dataclass(frozen=True)
class ResultsJob(Job[Manifest]):
    """The campaign's results step (ledger, report, manifest); `Done` holds the manifest."""

    out_dir: str

    def run(self) -> Manifest:
        from ablations.results.write import write_results_at

        return write_results_at(Path(self.out_dir))  # the campaign loaded once, here

    def dump(self, result: Manifest) -> str:
        return result.to_json()

    def failure(self, exc: Exception) -> Failed:
        """The machine's, whatever its type: no workload code runs in this step (the campaign
        process raises it as the results task's error)."""
        return Failed.of(exc, cause="infrastructure")

    def send(self, worker: Worker) -> Manifest:
        """The results step in the worker: the manifest it wrote; raises on failure
        (`WorkerLost`, or `JobFailed` naming what the step raised)."""
        reply = worker.call(self)
        if reply is None:
            raise WorkerLost(f"the worker process of slot {worker.slot.name} died writing results")
        if isinstance(reply, Failed):
            raise job_error(reply, f"writing the results failed: {reply}")
        return Manifest.model_validate_json(reply.body)
