"""Where a campaign's runs run: the `Executor` protocol the campaign's steps are written against.

Two implementations: `ablations.local.executor.LocalSlots` (a worker process per slot of this
machine) and `flows.pool.PoolExecutor` (each run a flow run on a Prefect work pool's hosts).
The flow opens one and passes it to the steps that need it: nothing looks one up by folder.
"""

from __future__ import annotations

from typing import Protocol

from ablations.campaign.campaign import Campaign
from ablations.campaign.manifest import Manifest
from ablations.run.records import PreflightReport, RunRecord, RunSpec
from ablations.slots.devices import SlotSpec


class Executor(Protocol):
    """Runs, preflights and the results step of one campaign, on the slots it holds."""

    @property
    def slots(self) -> list[SlotSpec]:
        """The slots runs are kept in flight on: the projection and the schedule count them."""
        ...

    @property
    def threads(self) -> int:
        """The campaign's threads for runs: one per slot, or more where a thread can make a
        run ready to start while the slot's current one ends (`PoolExecutor`'s)."""
        ...

    def run(self, spec: RunSpec) -> RunRecord:
        """Run one run on a free slot (waiting for one) and return its record.

        A run that fails comes back as a `failed` record; what raises is the infrastructure
        (the store, the disk), and fails the campaign's step."""
        ...

    def preflight(self, spec: RunSpec, expected_inputs: dict[str, int] | None) -> PreflightReport:
        """The data check and the restart check on `spec` (its continuation in a process
        that did not save the checkpoint)."""
        ...

    def write_results(self, campaign: Campaign) -> Manifest:
        """Write the campaign's output folder from its completion records; the manifest as
        written. In this process from `campaign`, or in another that loads its own from the
        folder (`campaign.out_dir`)."""
        ...

    def terminate(self) -> None:
        """Ask the runs in flight to commit their current step and stop, and return at once:
        the campaign is ending (a SIGTERM, or a step failed on the disk or the store). Each
        comes back as an interrupted record, which a rerun resumes."""
        ...
