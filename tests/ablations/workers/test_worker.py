"""A slot's worker process: any job runs itself there; a crash fails that run only, and the next
run gets a new worker."""

from __future__ import annotations

import multiprocessing
import os
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from ablations.checkpoint.commit import COMMIT
from ablations.errors import (
    InfrastructureError,
    JobFailed,
    StoreError,
    WorkloadError,
    WorkloadFailed,
)
from ablations.results.job import RESULTS_PRELOAD, ResultsJob
from ablations.run.records import RunSpec
from ablations.slots.devices import SlotSpec
from ablations.workers.jobs import RunJob
from ablations.workers.messages import Failed, job_error
from ablations.workers.worker import START_METHOD_ENV, SlotWorker, Warmup
from tests.ablations.checkpoint.conftest import make_spec
from tests.ablations.checkpoint.workloads import CRASH_AT
from tests.ablations.workers.foreign_job import Imported, Origin
from tests.specs import bare_spec


def _spec(run_id: str, workload: str) -> RunSpec:
    return bare_spec(
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
        entry=workload,
        metric="accuracy",
        threshold=0.0,
    )


def test_any_job_runs_itself_and_the_worker_imports_only_the_kinds_it_receives() -> None:
    worker = SlotWorker(SlotSpec(name="cpu#0", device="cpu", cpu_threads=1))
    try:
        before = set(worker.do(Imported()))
        assert "ablations.workers.jobs" not in before  # no run came yet
        record = worker.do(RunJob(_spec("b-s0-2", "ablations.workloads.digits:DigitsWorkload")))
        after = set(worker.do(Imported()))
    finally:
        worker.close()
    assert record.status == "accepted" and "ablations.workers.jobs" in after
    assert not {m for m in after if m.startswith("ablations.results")}  # no results job came


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_a_worker_starts_with_the_callers_environment_of_its_start_and_sigterms_default(
    method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forked by the fork server (which ignores SIGTERM and kept the environment of its own
    start) or spawned, a worker sees what its caller's environment is when it starts."""
    monkeypatch.setenv(START_METHOD_ENV, method)
    no_grace = Warmup(on_terminate=False)  # SIGTERM then ends the worker: its default action
    first = SlotWorker(SlotSpec(name="cpu#0", device="cpu", cpu_threads=1), no_grace)
    second = SlotWorker(SlotSpec(name="cpu#1", device="cpu", cpu_threads=1), no_grace)
    try:
        first.do(Origin())  # the fork server runs from here on
        monkeypatch.setenv("ABLATE_TEST_MARK", "set after the first worker started")
        origin = second.do(Origin())
    finally:
        first.close()
        second.close()
    assert origin["mark"] == "set after the first worker started"
    assert origin["sigterm_default"] is True
    assert (origin["parent"] == os.getpid()) is (method == "spawn")
    # Forked, it shares torch's objects frozen by the server: its collections skip them.
    frozen = origin["frozen_objects"]
    assert isinstance(frozen, int) and (frozen > 100_000) is (method == "forkserver"), frozen


@pytest.mark.slow  # fault injection: a worker process killed mid-run
def test_a_crashed_worker_fails_its_run_and_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "go"
    marker.write_text("")
    monkeypatch.setenv(CRASH_AT, f"3:{marker}")  # inherited by the spawned worker
    worker = SlotWorker(SlotSpec(name="cpu#0", device="cpu", cpu_threads=1))
    try:
        crashed = worker.do(
            RunJob(_spec("a-s0-1", "tests.ablations.checkpoint.workloads:CrashingDigits"))
        )
        assert crashed.status == "failed" and crashed.error is not None
        assert crashed.error.type == "WorkerCrashed" and "cpu#0" in crashed.error.message
        assert crashed.error.cause == "infrastructure" and crashed.lost  # a rerun retries it
        assert crashed.slot == "cpu#0"
        healthy = worker.do(RunJob(_spec("b-s0-2", "ablations.workloads.digits:DigitsWorkload")))
        assert healthy.status == "accepted" and healthy.steps_done == 20
        assert healthy.slot == "cpu#0" and worker.restarts == 2  # crashed, retried, crashed
    finally:
        worker.close()


def test_the_results_step_runs_in_the_worker_and_reports_its_failure(tmp_path: Path) -> None:
    worker = SlotWorker(
        SlotSpec(name="cpu#0", device="cpu", cpu_threads=1), Warmup(preload=RESULTS_PRELOAD)
    )
    try:
        failed = r"writing the results failed: FileNotFoundError: .*plan\.yaml"
        with pytest.raises(JobFailed, match=failed) as raised:
            worker.do(ResultsJob(str(tmp_path)))  # not a campaign folder
        assert raised.value.error_type == "FileNotFoundError"
        healthy = worker.do(RunJob(_spec("b-s0-2", "ablations.workloads.digits:DigitsWorkload")))
        assert healthy.status == "accepted"  # the worker goes on after a failed results step
    finally:
        worker.close()
    assert not (tmp_path / "manifest.json").exists()


@pytest.mark.slow  # fault injection: a worker process killed mid-run
def test_a_worker_lost_mid_run_is_retried_once_from_its_last_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = make_spec(f"file://{tmp_path}/ckpt", interval={"steps": 10}).with_workload(
        entry="tests.ablations.checkpoint.workloads:CrashingDigits"
    )
    commit = tmp_path / "ckpt" / "camp" / "run-a" / "step-00000020" / COMMIT
    monkeypatch.setenv(CRASH_AT, f"25:{commit}:{tmp_path / 'crashed-once'}")
    worker = SlotWorker(SlotSpec(name="cpu#0", device="cpu", cpu_threads=1))
    try:
        record = worker.do(RunJob(spec))
    finally:
        worker.close()
    assert record.status == "accepted" and record.steps_done == 40, record.error
    assert record.checkpoint.resumed_from_step == 20 and worker.restarts == 1
    assert "run-a: WorkerCrashed: the worker process of slot cpu#0 died" in capsys.readouterr().out


def test_a_lost_run_is_not_finished_but_a_workload_failure_is(tmp_path: Path) -> None:
    from ablations.campaign.campaign import Campaign
    from ablations.campaign.opening import register
    from ablations.campaign.progress import outcome
    from ablations.campaign.state import save_record
    from ablations.run.records import RunError, RunRecord
    from tests.flows.conftest import TINY_PLAN, plan_text

    campaign = Campaign.load(Path(register(plan_text(TINY_PLAN), tmp_path).out_dir))
    spec = _spec("lost-s0-1", "x:Y")
    lost = RunRecord.failed(spec, "WorkerCrashed", "the worker process of slot cpu#0 died")
    save_record(tmp_path, lost)
    assert campaign.finished(lost.run_id) is None  # a rerun retries it
    assert outcome(lost).startswith("WorkerCrashed: the worker process of slot cpu#0 died")
    raised = lost.model_copy(
        update={"run_id": "raised-s0-1", "error": RunError(type="ValueError", message="bad")}
    )
    save_record(tmp_path, raised)
    assert campaign.finished(raised.run_id) == raised  # same code, same failure
    assert outcome(raised) == "ValueError: bad"
    older = lost.model_dump(mode="json")
    del older["error"]["cause"]  # a record written before causes were recorded
    assert RunRecord.model_validate(older).lost


@pytest.mark.parametrize(
    ("error", "cause", "raised"),
    [
        (StoreError("s3://b unreachable"), "infrastructure", JobFailed),
        (OSError(28, "No space left on device"), "infrastructure", JobFailed),
        (ValueError("probe_groups raised"), "workload", WorkloadFailed),
    ],
)
def test_a_failed_job_is_an_error_of_its_cause(
    error: Exception, cause: str, raised: type[Exception]
) -> None:
    failure = Failed.of(error)
    assert failure.cause == cause and failure.error_type == type(error).__name__
    typed = job_error(failure, f"probe of control failed: {failure}")
    assert type(typed) is raised and typed.error_type == failure.error_type
    assert isinstance(typed, InfrastructureError if cause == "infrastructure" else WorkloadError)
    assert str(typed) == f"probe of control failed: {type(error).__name__}: {error}"


def test_a_runs_own_output_goes_to_its_log_not_the_terminal(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """What a framework prints (a tip on stdout, a warning on stderr, here a command's) lands
    in `logs/<run_id>.log` of the campaign's folder, redacted (a token it echoes is masked);
    the worker's terminal stays quiet."""
    from tests.ablations.byo.test_command import SCRIPT, spec_for

    chatty = tmp_path / "chatty.py"
    chatty.write_text(
        "import sys, warnings\n"
        "print('Tip: try our cloud', flush=True)\n"
        "print('login with hf_' + 'AbCdEfGhIjKlMnOpQrStUvWxYz01234567', flush=True)\n"
        "warnings.warn('old API')\n"
        f"exec(compile(open({str(SCRIPT)!r}).read(), 'train', 'exec'))\n"
    )
    spec = spec_for(None, tmp_path, command=["python", str(chatty), "--lr", "{lr}"])
    worker = SlotWorker(
        SlotSpec(name="cpu#0", device="cpu", cpu_threads=1), Warmup(log_dir=str(tmp_path / "out"))
    )
    try:
        record = worker.do(RunJob(spec))
    finally:
        worker.close()
    assert record.status == "accepted", record
    log = (tmp_path / "out" / "logs" / f"{spec.run_id}.log").read_text()
    assert "Tip: try our cloud" in log and "UserWarning: old API" in log
    assert "login with REDACTED" in log and "hf_AbCd" not in log  # through the one redaction
    printed = capfd.readouterr()
    assert "Tip" not in printed.out + printed.err and "old API" not in printed.err


class _ExitsAfterSending:
    """A worker process seen dead right after it sent its last message: the child's reply and
    exit land between the parent's poll of the pipe and its look at the process."""

    def __init__(self, child: Connection, last: object | None) -> None:
        self.child, self.last = child, last

    def is_alive(self) -> bool:
        if self.last is not None:
            self.child.send(self.last)
        return False


@pytest.mark.parametrize("last", ["a reply", None])
def test_a_reply_sent_just_before_the_worker_exits_is_read(
    last: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ablations.workers.worker._POLL_SECONDS", 0.01)
    parent, child = multiprocessing.Pipe()
    worker = SlotWorker(SlotSpec("cpu#0", "cpu", 1))
    worker._conn, worker._process = parent, _ExitsAfterSending(child, last)
    # Read as dead, the run's committed reply was lost and the run retried on a fresh worker.
    assert worker._receive() == ((True, last) if last is not None else (False, None))
