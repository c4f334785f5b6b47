"""The local executor: the campaign's runs on this machine's slots, one worker per slot.

The flow (or `ablate run`, before Prefect's server is up) opens it once and passes it to the
steps; it holds the worker processes for the campaign's lifetime. Each run (and the
preflight) also holds its slot's lock file while it uses the slot (`ablations.slots.locks`),
so two campaigns on one machine, or a campaign and a pool worker of the same host name, never
put runs on one slot at once: a run takes a free slot no other holds, or waits, saying so.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path

from ablations.campaign.campaign import Campaign
from ablations.campaign.executor import Executor
from ablations.campaign.folder import CampaignFolder
from ablations.campaign.manifest import Manifest
from ablations.errors import CampaignInterrupted, Problem
from ablations.plan.model import Plan
from ablations.preflight.across import preflight_across
from ablations.probe.sweep import peak_for_slots
from ablations.process.preemption import TERMINATE
from ablations.results.job import RESULTS_PRELOAD, ResultsJob
from ablations.run.records import PreflightReport, RunRecord, RunSpec
from ablations.slots.devices import SlotLease, SlotSpec, plan_slots
from ablations.slots.locks import SlotLocks, lease_held, unlock
from ablations.workers.jobs import PreflightOnSlot, RunJob
from ablations.workers.worker import SlotWorker, Warmup


def local_slots_for(plan: Plan, plan_path: Path | None, devices: str | None) -> list[SlotSpec]:
    """This machine's slots for the plan (`--devices` over `resources.devices`), packed by
    the plan's probe result when `slots_per_device` is `auto`. Bad `--devices`: `InputError`."""
    peak = peak_for_slots(plan, plan_path)
    return plan_slots(plan.resources, devices, peak, plan.probe.margin)


def warmup_for(plan: Plan, out_dir: Path) -> Warmup:
    """What the slots prepare at start: the workload's module, and (with one slot) a spare
    for the restart check when this folder's preflight is still to run and reloads from a
    store another process can see."""
    check = plan.stop_rules.restart.enabled and not plan.checkpoint.store.startswith("memory://")
    known = CampaignFolder(out_dir).preflight()
    return Warmup(
        workload_imports=tuple(plan.workload.named_imports),
        restart_check=check and not (known is not None and known.passed),
        preload=RESULTS_PRELOAD,
        on_terminate=plan.checkpoint.on_terminate,
        terminate_grace_seconds=plan.checkpoint.terminate_grace_seconds,
        log_dir=str(out_dir.resolve()),  # logs/<run>.log: frameworks' output, off the terminal
    )


class LocalSlots:
    """A started worker per slot; runs lease one, the results step uses the first."""

    def __init__(
        self, slots: list[SlotSpec], warmup: Warmup | None = None, locks: SlotLocks | None = None
    ) -> None:
        """Start a worker per slot now: their imports overlap whatever the campaign does
        meanwhile. With `warmup.restart_check` and a single slot, a spare worker starts too:
        the restart check's continuation needs a process that did not save. `locks`: the
        machine's slot locks (default: from `ABLATE_SLOT_DIR` and `ABLATE_HOST`)."""
        warmup = warmup or Warmup()
        self.locks = locks if locks is not None else SlotLocks.from_env()
        others = replace(warmup, preload=())  # the first slot writes the results
        workers = [SlotWorker(s, warmup if i == 0 else others) for i, s in enumerate(slots)]
        self.leases = SlotLease(workers)
        self._spare = (
            SlotWorker(slots[0], others) if warmup.restart_check and len(slots) == 1 else None
        )
        self._lock = threading.Lock()
        for worker in self._workers():
            worker.start()

    @classmethod
    @contextmanager
    def open(
        cls, slots: list[SlotSpec], warmup: Warmup | None = None, locks: SlotLocks | None = None
    ) -> Iterator[LocalSlots]:
        """The started slots for the block; every worker stops at its end."""
        executor = cls(slots, warmup, locks)
        finished = False
        try:
            yield executor
            finished = True
        finally:
            executor.close(wait=finished)

    @property
    def slots(self) -> list[SlotSpec]:
        return [worker.slot for worker in self.leases.slots]

    @property
    def threads(self) -> int:
        """One per slot: a run's thread holds its slot's worker from start to end."""
        return len(self.leases.slots)

    def run(self, spec: RunSpec) -> RunRecord:
        with self._leased() as worker:
            return worker.do(RunJob(spec))

    def preflight(self, spec: RunSpec, expected_inputs: dict[str, int] | None) -> PreflightReport:
        with self._leased() as worker:
            slot = PreflightOnSlot(worker)
            other = partial(self._other_preflight, worker.slot)
            return preflight_across(slot, other, spec, expected_inputs)

    def write_results(self, campaign: Campaign) -> Manifest:
        """In the first slot's worker, which imported the results' libraries while it waited
        (the campaign process never loads them) and loads the campaign from its folder. Not
        leased: every run has returned its slot."""
        return self.leases.slots[0].do(ResultsJob(str(campaign.out_dir)))

    def workload_problem(self) -> Problem | None:
        """Why the plan's workload cannot be imported, as the first worker found at start."""
        return self.leases.slots[0].workload_problem()

    @contextmanager
    def other_process(self, beside: SlotSpec | None = None) -> Iterator[SlotWorker]:
        """A worker other than the one leased for the preflight (on `beside`, whose lock the
        preflight holds), for the restart check's continuation: a second slot (idle before
        the pilot) no other campaign holds, else the spare (once), else a new one on
        `beside` (default: the first slot)."""
        if len(self.leases.slots) > 1:
            with self.leases.lease() as worker:
                # Not waited for: a preflight waiting for a second lock while it holds one
                # would wait forever on a campaign doing the same in the other order.
                fd = self.locks.try_lock(worker.slot)
                if fd is not None:
                    try:
                        yield worker
                    finally:
                        unlock(fd)
                    return
        # On the slot the preflight holds already: no second lock (a second flock on it,
        # from this process too, would wait for the first).
        with self._lock:
            spare, self._spare = self._spare, None
        worker = spare or SlotWorker(beside or self.leases.slots[0].slot)
        try:
            yield worker
        finally:
            worker.close()

    def _leased(self) -> AbstractContextManager[SlotWorker]:
        """A free worker whose slot's lock across processes this campaign holds, for one run
        (never across the gate's wait or between runs): while other campaigns on this machine
        hold every free one, one line and a wait."""

        def give_up() -> None:  # a campaign asked to stop starts nothing new
            if TERMINATE.requested:
                raise CampaignInterrupted(
                    f"not started: {TERMINATE.reason} received while waiting for a slot"
                )

        return lease_held(self.leases, _slot_of, self.locks, give_up)

    @contextmanager
    def _other_preflight(self, beside: SlotSpec) -> Iterator[PreflightOnSlot]:
        with self.other_process(beside) as worker:
            yield PreflightOnSlot(worker)

    def _workers(self) -> list[SlotWorker]:
        return [*self.leases.slots, *([self._spare] if self._spare else [])]

    def terminate(self) -> None:
        """Pass a SIGTERM on to every worker (returns at once): each run commits its step.
        Not with `checkpoint.on_terminate` off: the signal would kill the worker, and its
        run would be retried on a fresh one."""
        for worker in self._workers():
            if worker.warmup.on_terminate:
                worker.terminate()

    def close(self, *, wait: bool = True) -> None:
        """Stop every worker: all asked at once, so each exit overlaps the others'."""
        with self._lock:
            workers, self._spare = self._workers(), None
        for worker in workers:
            worker.ask_to_finish()
        for worker in workers:
            worker.close(wait=wait)


def _slot_of(worker: SlotWorker) -> SlotSpec:
    return worker.slot


def _conforms(executor: LocalSlots) -> Executor:  # the typed conformance check: mypy fails here
    return executor
