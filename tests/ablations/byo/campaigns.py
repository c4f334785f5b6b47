"""Helpers for the adapters' end-to-end campaigns: `ablate run` killed with `kill -9` once a
main run committed a checkpoint, run again, then read back (the command surface's way)."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ablations.byo import ExternalWorkload
from ablations.byo.session import Reply, Session
from ablations.checkpoint.manager import CheckpointManager
from ablations.plan.rules import RestartRule
from ablations.run.records import RunSpec
from tests.faults.conftest import Campaign, kill_when

__all__ = ["committed_on_request", "killed_and_rerun", "manifest", "steps_trained_twice", "verify"]


def killed_and_rerun(root: Path, plan: dict[str, Any], commit: str, **env: str) -> Campaign:
    """The campaign in `root`, SIGKILLed once `commit` (a glob under the store's campaign
    folder, e.g. `lr-0.1-*/step-00000060/COMMIT.json`) exists, then run to its end."""
    done = Campaign(root / "c", plan, root / "prefect-home")
    process = done.start(**env)
    store = done.out / "ckpt" / plan["campaign"]["id"]
    kill_when(process, lambda: any(store.glob(commit)))
    result = done.run(**env)
    assert result.returncode == 0, result.stdout + result.stderr
    return done


def manifest(campaign: Campaign) -> dict[str, dict[str, Any]]:
    runs = json.loads((campaign.out / "manifest.json").read_text())["runs"]
    return {f"{r['variant']} s{r['seed']} {r['phase']}": r for r in runs}


def verify(campaign: Campaign) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ablations.cli", "verify", str(campaign.out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def steps_trained_twice(log: Path, steps: int) -> list[int]:
    """The steps a run's `TRAINED_LOG` file shows trained more than once by its own attempts;
    every one of 1..`steps` must be there (a resumed run never starts again from step 0).

    The preflight's restart check trains the checked run's log first (straight to `2 k`, then
    to `k` and resumed to `2 k`); those steps are the check's, not work a kill lost."""
    trained = [int(step) for step in log.read_text().split()]
    check = list(range(1, 2 * RestartRule().check_steps + 1)) * 2
    # Only when the rest trains every step: a run killed at step 2 k before its first commit
    # (beside the run the kill waited for) retrains 1..2 k, the same pattern as the check's.
    if trained[: len(check)] == check and set(trained[len(check) :]) >= set(range(1, steps + 1)):
        trained = trained[len(check) :]
    counts = collections.Counter(trained)
    assert sorted(counts) == list(range(1, steps + 1)), log.name
    return [step for step, n in counts.items() if n > 1]


def assert_retrained_after_a_commit(log: Path, steps: int, interval: int) -> None:
    """A kill lost only the steps after a commit: one stretch starting after a multiple of
    `interval`, shorter than two intervals. Commits run in the background while training goes
    on (`ablations.checkpoint.saver`), so a kill while the commit of step 2 k was in flight
    loses that interval too (under load: 21..42 retrained with an interval of 20)."""
    twice = sorted(steps_trained_twice(log, steps))
    if twice:
        first = twice[0]
        assert twice == list(range(first, first + len(twice))), (log.name, twice)
        assert (first - 1) % interval == 0 and len(twice) < 2 * interval, (log.name, twice)


class RequestingSession(Session):
    """A session asked for a checkpoint from outside at `at` (as a SIGTERM handler would),
    on a run whose interval would never ask."""

    at = 7

    def report(
        self, step: int, loss: float | None = None, metrics: Mapping[str, float] | None = None
    ) -> Reply:
        if step == self.at:
            self.request_checkpoint()
        return super().report(step, loss, metrics)


def committed_on_request(spec: RunSpec, workload: ExternalWorkload) -> str:
    """The URI of the one checkpoint a run committed when asked at `RequestingSession.at`."""
    session = RequestingSession(spec, CheckpointManager(spec))
    workload.run_external(spec, session)
    summary = session.close()
    assert summary.saves == 1, summary
    return summary.uri or ""
