"""A slot's worker process: a crash fails that run only, and the next run gets a new worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablations.records import RunSpec
from ablations.slots import SlotSpec
from ablations.worker import SlotWorker, Warmup
from tests.ablations.checkpoint.workloads import CRASH_AT


def _spec(run_id: str, workload: str) -> RunSpec:
    return RunSpec(
        run_id=run_id,
        campaign_id="c",
        plan_hash="h",
        variant="control",
        category="essential",
        phase="main",
        seed=0,
        params={"width": 16, "depth": 1},
        steps=20,
        eval_every=10,
        workload=workload,
        metric="accuracy",
        threshold=0.0,
    )


def test_a_crashed_worker_fails_its_run_and_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "go"
    marker.write_text("")
    monkeypatch.setenv(CRASH_AT, f"3:{marker}")  # inherited by the spawned worker
    worker = SlotWorker(SlotSpec(name="cpu#0", device="cpu", cpu_threads=1))
    try:
        crashed = worker.run(_spec("a-s0-1", "tests.ablations.checkpoint.workloads:CrashingDigits"))
        assert crashed.status == "failed" and crashed.error is not None
        assert crashed.error.type == "WorkerCrashed" and "cpu#0" in crashed.error.message
        assert crashed.slot == "cpu#0"
        healthy = worker.run(_spec("b-s0-2", "ablations.workloads.digits:DigitsWorkload"))
        assert healthy.status == "accepted" and healthy.steps_done == 20
        assert healthy.slot == "cpu#0" and worker.restarts == 1
    finally:
        worker.close()


def test_the_results_step_runs_in_the_worker_and_reports_its_failure(tmp_path: Path) -> None:
    worker = SlotWorker(SlotSpec(name="cpu#0", device="cpu", cpu_threads=1), Warmup(results=True))
    try:
        failed = r"writing the results failed: FileNotFoundError: .*plan\.yaml"
        with pytest.raises(RuntimeError, match=failed):
            worker.write_outputs(tmp_path)  # not a campaign folder
        healthy = worker.run(_spec("b-s0-2", "ablations.workloads.digits:DigitsWorkload"))
        assert healthy.status == "accepted"  # the worker goes on after a failed results step
    finally:
        worker.close()
    assert not (tmp_path / "manifest.json").exists()
