"""`CheckpointManager`: the `CheckpointHook` for one run (resume, due, save, close)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from ablations.checkpoint import commit, fence
from ablations.checkpoint.commit import Identity
from ablations.checkpoint.held import HeldCommits
from ablations.checkpoint.interval import IntervalPolicy
from ablations.checkpoint.outage import outlasting
from ablations.checkpoint.saver import Outcome, Retry, Saver
from ablations.checkpoint.store import Store
from ablations.errors import ForeignCheckpoint, StoreError, StoreUnreachable
from ablations.run.hooks import RunHistory
from ablations.run.records import CheckpointSummary, RunSpec
from ablations.run.workload import Workload

log = logging.getLogger(__name__)

OUTLASTED = Retry(attempts=2)
"""A save whose store calls each rode through an outage: tried once more, after a second."""


class CheckpointManager:
    """Saves a run's full state in the background and resumes it from the latest commit.

    The store is opened and probed here, so a store unreachable beyond the outage a run rides
    through (`ablations.checkpoint.outage`) fails (`StoreError`) before any training. Write
    failures never raise into the loop: they are retried, then counted in the summary
    `close()` returns, and logged as errors.

    An attempt on a work pool (`spec.attempt`) writes in its own attempt folder and commits
    only while the campaign accepts it (`ablations.checkpoint.fence`); once superseded it
    commits nothing and its next checkpoint boundary ends the run (`SupersededAttempt`)."""

    def __init__(self, spec: RunSpec, *, store: Store | None = None, retry: Retry | None = None):
        if spec.checkpoint is None:
            raise ValueError(f"run {spec.run_id} has no checkpoint section")
        self.section = spec.checkpoint
        # A pilot keeps its checkpoints under its main run's id (`checkpoint_id`).
        owner = spec.checkpoint_id or spec.run_id
        self.identity = Identity(spec.campaign_id, owner, spec.plan_hash, spec.attempt)
        self.fenced_run = (spec.campaign_id, spec.run_id)  # the pool's key for the pointer
        # What the campaign's folder holds of this run's commits (`held.py`): none for a run
        # without a folder, nor a pool attempt (its host has no folder; the signed store and
        # the fence protect it).
        folder = spec.out_dir if spec.attempt is None else None
        self.held = HeldCommits(folder, owner) if folder else None
        self.superseded: str | None = None
        self.expected_step = spec.resume_step
        # Every call of the run to its store rides through an outage (`outage.py`).
        self.store = store if store is not None else outlasting(self.section)
        # Notes land in the manifest: a store inside the output folder is named relative to
        # it, as the plan wrote it, so a moved folder verifies (no absolute path into it).
        self.store_name = _store_name(self.section.store, spec.out_dir)
        self.policy = IntervalPolicy(self.section)
        # The store's own calls retry through an outage: a save is tried once more at most
        # (a store given by the caller, which may not, keeps the saver's full retries).
        self.saver = Saver(retry or (Retry() if store is not None else OUTLASTED))
        self.summary = CheckpointSummary()
        self._stalls: dict[int, float] = {}
        self._elapsed = 0.0

    # -- resume ---------------------------------------------------------------------------

    def resume(self, workload: Workload, history: RunHistory) -> int:
        """Restore the newest committed checkpoint that verifies; 0 when there is none.

        A corrupt or truncated one is refused (logged, noted in `last_error`) and the
        previous one is used; a foreign one (other plan hash or run id) raises."""
        from ablations.checkpoint import state  # torch: a training program's folder needs none

        return self.resume_with(lambda payload: state.restore(payload, workload, history))

    def resume_with(self, restore: Callable[[dict[str, bytes]], int]) -> int:
        """`resume`, with `restore(verified payload) -> step` putting the state in place (a
        workload's tensors here, a training program's folder in `ablations.byo`)."""
        partial, committed = commit.survey(self.store, self.identity)
        commit.remove(self.store, self.identity, partial)  # saves that died before commit
        step, refused, source = 0, [], self.identity
        holds = self.held.held() if self.held is not None else None
        # Own commits and (on a pool) every earlier attempt's: the newest that verifies.
        for candidate, writer in reversed(committed):
            try:
                mine = holds if writer == self.identity else None
                payload = commit.read(self.store, writer, candidate, holds=mine)
                step, source = restore(payload), writer
                break
            except ForeignCheckpoint:
                raise
            except StoreError as exc:
                unanswered = exc if isinstance(exc, StoreUnreachable) else exc.__cause__
                if isinstance(unanswered, StoreUnreachable):  # no verdict on the step: the
                    raise unanswered from None  # run fails for the store, its steps are kept
                log.error("refused checkpoint step %d: %s", candidate, exc)
                self.summary.last_error = f"refused step {candidate}: {exc}"
                if writer == self.identity:  # another attempt's folder is never ours to edit
                    refused.append(candidate)
        # Newer refused steps would shadow the ones this run writes again: remove them.
        commit.remove(self.store, self.identity, [s for s in refused if s > step])
        if step:
            self.summary.resumed_from_step = step
            self.summary.uri = self.store.uri(commit.step_key(source, step))
            log.info("resumed run %s from step %d", self.identity.run_id, step)
        self.summary.pilot_step = self.expected_step
        if step < self.expected_step:
            # e.g. a memory:// store lives in one worker process: the pilot's ran elsewhere
            # The store as the folder names it: a file:// one inside it is relative.
            start = (
                "trained from the start"
                if not step
                else f"resumed from its last checkpoint, at step {step}"
            )
            self.summary.note = (
                f"its pilot left no checkpoint at step {self.expected_step} in "
                f"{self.store_name} (a stopped pilot commits none there, and a memory:// "
                f"store lives in the pilot's worker): {start}"
            )
            log.warning("run %s: %s", self.identity.run_id, self.summary.note)
        self.policy.start(step, 0.0)
        return step

    # -- the hot path ---------------------------------------------------------------------

    def due(self, step: int, elapsed_train_seconds: float) -> bool:
        self._elapsed = elapsed_train_seconds
        if self.saver.pending_done():
            self._collect(self.saver.wait())  # never blocks: the save is done
        if self.superseded is not None:  # a lost attempt's training counts for nothing
            raise fence.SupersededAttempt(self.superseded)
        return self.policy.due(step, elapsed_train_seconds)

    def save(self, step: int, workload: Workload, history: RunHistory) -> None:
        """Wait for the previous save, copy the state to host memory, commit it behind."""
        started = time.perf_counter()
        self._collect(self.saver.wait())
        from ablations.checkpoint import state  # torch: a training program's folder needs none

        snapshot = state.capture(step, workload, history)
        self.save_payload(step, snapshot.serialize, started)

    def save_payload(
        self, step: int, serialize: Callable[[], dict[str, bytes]], started: float
    ) -> None:
        """Commit `serialize()` (called off the loop) as step `step`, behind the loop; the
        loop stalled since `started` (`time.perf_counter()`) to capture it."""
        self._collect(self.saver.wait())
        stall = time.perf_counter() - started
        self._stalls[step] = stall
        self.policy.saved(step, self._elapsed)
        identity, store, keep = self.identity, self.store, self.section.keep_last
        held = self.held

        def job() -> str:
            if identity.attempt is not None:
                try:
                    fence.require_accepted(store, *self.fenced_run, identity.attempt)
                except fence.SupersededAttempt as exc:
                    self.superseded = str(exc)
                    raise
            # The campaign's record of the commit goes first (`commit.write_committed`).
            hold = None if held is None else partial(held.add, step, keep_last=keep)
            uri, _ = commit.write_committed(store, identity, step, serialize(), hold)
            commit.prune(store, identity, keep, step)
            return uri

        self.saver.submit(step, job)
        log.debug("checkpoint step %d: loop stalled %.4fs", step, stall)

    def wait(self) -> CheckpointSummary:
        """Block until the save in flight is committed or given up; the summary so far."""
        self._collect(self.saver.wait())
        return self.summary.model_copy()

    def _collect(self, outcome: Outcome | None) -> None:
        if outcome is None:
            return
        stall = self._stalls.pop(outcome.step, None)
        if outcome.uri is not None:
            self.summary.saves += 1
            self.summary.uri = outcome.uri
            if stall is not None:  # C: the loop's stall plus the time until committed
                self.policy.measured(stall + outcome.seconds)
        else:
            self.summary.failures += 1
            self.summary.last_error = f"step {outcome.step}: {outcome.error}"

    # -- the end --------------------------------------------------------------------------

    def close(self) -> CheckpointSummary:
        self._collect(self.saver.close())
        policy, summary = self.policy, self.summary
        summary.cost_seconds = policy.cost
        summary.interval_steps = policy.interval_steps
        summary.interval_seconds = policy.tau
        summary.expected_overhead = policy.expected_overhead
        if summary.failures:
            log.error(
                "run %s: %d checkpoint(s) could not be written; last error: %s",
                self.identity.run_id, summary.failures, summary.last_error,
            )  # fmt: skip
        return summary.model_copy()


def _store_name(store: str, out_dir: str | None) -> str:
    """`file://checkpoints` for a store inside the output folder; any other store as given."""
    scheme, _, path = store.partition("://")
    if scheme != "file" or out_dir is None or not os.path.isabs(path):
        return store
    inside = os.path.relpath(path, os.path.abspath(out_dir))
    return store if inside.startswith("..") else f"file://{Path(inside).as_posix()}"
