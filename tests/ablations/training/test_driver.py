"""The training driver on the real digits workload: records, export, hooks, failures."""

from __future__ import annotations

import copy
import csv
import errno
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ablations.campaign.progress import outcome
from ablations.errors import NoUsableRestart
from ablations.run.hooks import RunHistory
from ablations.run.records import CheckpointSummary, RunSpec, Stop
from ablations.run.workload import Workload
from ablations.text.units import metric
from ablations.training.driver import execute, open_run
from ablations.workloads.digits import DigitsWorkload
from tests.specs import bare_spec

DIGITS = "ablations.workloads.digits:DigitsWorkload"


def digits_spec(**overrides: Any) -> RunSpec:
    """A run spec of the built-in digits workload; keyword arguments replace fields."""
    fields: dict[str, Any] = {
        "run_id": "control-s0-0123456789",
        "campaign_id": "test",
        "plan_hash": "0" * 64,
        "variant": "control",
        "category": "essential",
        "phase": "pilot",
        "seed": 0,
        "params": {},
        "steps": 300,
        "eval_every": 50,
        "entry": DIGITS,
        "metric": "accuracy",
        "threshold": 0.9,
        **overrides,
    }
    return bare_spec(**fields)


def losses_of(spec: RunSpec) -> list[float]:
    loop = open_run(spec)
    assert loop.prepare() is None
    assert loop.advance(spec.steps) is None
    return loop.history.losses


def test_a_normal_digits_run_is_accepted_with_a_full_record() -> None:
    record = execute(digits_spec())

    assert record.status == "accepted", record.error
    assert record.metrics["accuracy"] >= 0.9
    assert record.steps_done == 300
    assert [e["step"] for e in record.evaluations] == [50, 100, 150, 200, 250, 300]
    assert record.metrics == {k: v for k, v in record.evaluations[-1].items() if k != "step"}
    assert record.timings.load > 0 and record.timings.train > 0 and record.timings.evaluate > 0
    assert record.timings.checkpoint == 0 and record.timings.export == 0  # no hook, no out_dir
    assert record.step_seconds is not None and 0 < record.step_seconds < record.timings.train
    assert set(record.memory) == {"build", "train", "evaluate"}
    assert all(
        peak.allocated > 0 and peak.reserved >= peak.allocated for peak in record.memory.values()
    )
    assert record.device == "cpu"
    assert record.started_at is not None and record.ended_at is not None
    assert record.started_at < record.ended_at


def test_completed_below_the_threshold_is_rejected_not_stopped() -> None:
    # The quality rule stops runs early; the final evaluation decides accepted or rejected.
    spec = digits_spec(
        steps=70, eval_every=30, threshold=0.999, stop_rules={"quality": {"warmup_steps": 65}}
    )
    record = execute(spec)

    assert record.status == "rejected"
    assert record.stop is None
    assert [e["step"] for e in record.evaluations] == [30, 60, 70]  # and always the last step
    assert record.metrics["accuracy"] < 0.999
    # The reason is recorded: the metric, its value, the threshold and the step.
    assert record.rejection is not None
    assert record.rejection.value == record.metrics["accuracy"]
    assert (record.rejection.threshold, record.rejection.step) == (0.999, 70)
    value = metric(record.metrics["accuracy"])
    assert record.rejection.message == f"accuracy {value} < threshold 0.999 at step 70"
    assert outcome(record) == record.rejection.message  # the progress line prints it


def test_the_same_spec_twice_gives_bitwise_identical_losses() -> None:
    first, second = losses_of(digits_spec(steps=80)), losses_of(digits_spec(steps=80))
    other_seed = losses_of(digits_spec(steps=80, seed=1))

    assert len(first) == 80
    assert np.array(first).tobytes() == np.array(second).tobytes()
    assert first != other_seed


def test_losses_are_read_back_once_per_check_window() -> None:
    spec = digits_spec(
        steps=100, eval_every=50, stop_rules={"non_finite_loss": {"check_every": 10}}
    )
    loop = open_run(spec)
    loop.prepare()
    loop.advance(100)

    assert len(loop.history.losses) == 100
    assert len(loop.history.step_seconds) == 10  # one sync per 10 steps, never one per step


def test_export_writes_steps_evals_and_predictions(tmp_path: Path) -> None:
    spec = digits_spec(steps=100, out_dir=str(tmp_path))
    record = execute(spec)

    assert record.artifacts == {
        "steps": f"metrics/{spec.run_id}.steps.csv",
        "evals": f"metrics/{spec.run_id}.evals.csv",
        "predictions": f"predictions/{spec.run_id}.csv",
        "model": f"models/{spec.run_id}.pt",  # accepted: its final weights are kept
    }
    assert record.status == "accepted"
    assert record.timings.export > 0
    steps = list(csv.DictReader((tmp_path / record.artifacts["steps"]).open()))
    assert [int(r["step"]) for r in steps] == list(range(1, 101))
    assert [float(r["loss"]) for r in steps] == losses_of(spec)  # exact through the text
    evals = list(csv.DictReader((tmp_path / record.artifacts["evals"]).open()))
    assert [(int(r["step"]), float(r["accuracy"])) for r in evals] == [
        (int(e["step"]), e["accuracy"]) for e in record.evaluations
    ]
    predictions = list(csv.DictReader((tmp_path / record.artifacts["predictions"]).open()))
    assert len(predictions) == 364
    correct = sum(r["label"] == r["predicted"] for r in predictions)
    assert correct / len(predictions) == pytest.approx(record.metrics["accuracy"])
    assert not list(tmp_path.rglob("*.tmp"))


class Failing(DigitsWorkload):
    """Digits that raises at step 3 (`ERROR` is set per test)."""

    ERROR: Exception = RuntimeError("boom at step 3")

    def train_step(self, step: int) -> torch.Tensor:
        if step == 3:
            raise self.ERROR
        return super().train_step(step)


@pytest.mark.parametrize(
    ("error", "type_name"),
    [
        (RuntimeError("boom at step 3"), "RuntimeError"),
        (
            torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
            "OutOfMemoryError",
        ),
    ],
)
def test_a_workload_that_raises_is_failed_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, error: Exception, type_name: str
) -> None:
    monkeypatch.setattr(Failing, "ERROR", error)
    record = execute(digits_spec(entry=f"{__name__}:Failing"))

    assert record.status == "failed"
    assert record.stop is None
    assert record.error is not None
    assert (record.error.type, record.error.message) == (type_name, str(error))
    assert record.steps_done == 2


def test_a_workload_that_cannot_be_imported_is_failed() -> None:
    record = execute(digits_spec(entry="no_such_module:Workload"))

    assert record.status == "failed"
    assert record.error is not None and record.error.type == "WorkloadError"
    assert "no_such_module" in record.error.message


class MemoryHook:
    """A checkpoint hook keeping full training state in memory, every `every` steps."""

    def __init__(self, every: int, saved: dict[str, Any] | None = None) -> None:
        self.every = every
        self.saved = saved
        self.due_calls: list[tuple[int, float]] = []
        self.saves: list[tuple[int, int]] = []
        self.closed = False

    def resume(self, workload: Workload, history: RunHistory) -> int:
        if self.saved is None:
            return 0
        state = copy.deepcopy(self.saved)
        workload.model.load_state_dict(state["model"])
        workload.optimizer.load_state_dict(state["optimizer"])
        workload.scheduler.load_state_dict(state["scheduler"])
        workload.load_state_dict(state["workload"])
        torch.set_rng_state(state["rng"])
        history.losses[:] = state["history"].losses
        history.evaluations[:] = state["history"].evaluations
        return int(state["step"])

    def due(self, step: int, elapsed_train_seconds: float) -> bool:
        self.due_calls.append((step, elapsed_train_seconds))
        return step % self.every == 0

    def save(self, step: int, workload: Workload, history: RunHistory) -> None:
        self.saves.append((step, len(history.losses)))
        self.saved = copy.deepcopy(
            {
                "model": workload.model.state_dict(),
                "optimizer": workload.optimizer.state_dict(),
                "scheduler": workload.scheduler.state_dict(),
                "workload": workload.state_dict(),
                "rng": torch.get_rng_state(),
                "history": history,
                "step": step,
            }
        )

    def close(self) -> CheckpointSummary:
        self.closed = True
        return CheckpointSummary(uri="memory://test/run", saves=len(self.saves))


def test_the_hook_is_asked_every_step_and_saves_with_history_flushed() -> None:
    hook = MemoryHook(every=25)
    record = execute(digits_spec(steps=100), hook)

    assert [step for step, _ in hook.due_calls] == list(range(1, 101))
    elapsed = [seconds for _, seconds in hook.due_calls]
    assert elapsed == sorted(elapsed) and elapsed[-1] <= record.timings.train
    assert hook.saves == [(25, 25), (50, 50), (75, 75), (100, 100)]
    assert hook.closed
    assert record.checkpoint.saves == 4 and record.checkpoint.uri == "memory://test/run"
    assert record.timings.checkpoint > 0


def test_a_resumed_run_continues_exactly_where_it_stopped() -> None:
    spec = digits_spec(steps=100)
    uninterrupted = losses_of(spec)
    interrupted = open_run(spec, MemoryHook(every=60))
    interrupted.prepare()
    interrupted.advance(70)  # "preempted" after step 70; the last checkpoint is at 60

    hook = MemoryHook(every=1000, saved=interrupted.hook.saved)  # type: ignore[union-attr]
    resumed = open_run(spec, hook)
    resumed.prepare()
    assert resumed.step == 60
    resumed.advance(spec.steps)

    assert resumed.history.losses == uninterrupted
    assert [e["step"] for e in resumed.history.evaluations] == [50, 100]


def test_a_restart_check_that_finds_no_usable_restart_stops_the_run() -> None:
    def no_restart(spec: RunSpec) -> Stop:
        return Stop(rule="restart", step=0, message=f"{spec.run_id}: reload diverged at step 2")

    record = execute(digits_spec(), restart_check=no_restart)

    assert record.status == "stopped"
    assert record.stop is not None and record.stop.rule == "restart"
    assert record.stop.message.endswith("reload diverged at step 2")
    assert record.steps_done == 0


def test_a_hook_that_cannot_resume_stops_the_run_with_the_restart_rule() -> None:
    class Corrupt(MemoryHook):
        def resume(self, workload: Workload, history: RunHistory) -> int:
            raise NoUsableRestart("checkpoint step-200 has no commit marker", step=200)

    hook = Corrupt(every=10)
    record = execute(digits_spec(), hook)

    assert record.status == "stopped"
    assert record.stop == Stop(
        rule="restart", step=200, message="checkpoint step-200 has no commit marker"
    )
    assert hook.closed  # the hook is closed whatever happened


def test_a_full_disk_at_export_fails_the_run_for_the_infrastructure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def full_disk(*_: object) -> dict[str, str]:
        raise OSError(errno.ENOSPC, "No space left on device")

    # the run files are the only write of a run without checkpoints: the disk fills there
    monkeypatch.setattr("ablations.training.driver.write_run_files", full_disk)
    record = execute(digits_spec(steps=50, out_dir=str(tmp_path)))

    assert record.status == "failed" and record.error is not None
    assert (record.error.type, record.error.cause) == ("OSError", "infrastructure")
    assert record.lost  # not finished: a rerun retrains it


def test_a_workloads_own_error_stays_the_workloads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Failing, "ERROR", ValueError("bad shape"))
    record = execute(digits_spec(entry=f"{__name__}:Failing"))

    assert record.error is not None and record.error.cause == "workload"
    assert not record.lost
