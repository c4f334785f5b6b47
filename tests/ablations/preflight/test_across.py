"""The campaign's preflight across two already-started workers, and the slots' warm-up."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ablations.checkpoint import open_store
from ablations.errors import WorkloadFailed
from ablations.preflight.across import preflight_across
from ablations.slots.devices import SlotSpec
from ablations.workers.jobs import ContinueJob, PreflightOnSlot, PreflightStartJob
from ablations.workers.worker import SlotWorker, Warmup
from tests.ablations.checkpoint.conftest import make_spec

CPU = SlotSpec(name="cpu#0", device="cpu", cpu_threads=1)
DIGITS = "ablations.workloads.digits:DigitsWorkload"

pytestmark = pytest.mark.slow  # each test starts slot workers: make test, not make check


@contextmanager
def _worker(warmup: Warmup | None = None) -> Iterator[SlotWorker]:
    worker = SlotWorker(CPU, warmup)
    worker.start()
    try:
        yield worker
    finally:
        worker.close()


def test_the_continuation_runs_in_the_other_worker_and_agrees(tmp_path: Path) -> None:
    spec = make_spec(f"file://{tmp_path}/ckpt")
    with _worker() as first, _worker() as second:
        start = first.do(PreflightStartJob(spec, None))
        assert start.reference is not None and start.reference.pid == first.pid
        got = second.do(ContinueJob(spec.for_restart_check(), start.reference.until))
        assert got.pid == second.pid != first.pid
        assert got.resumed == start.reference.early and got.losses == start.reference.losses

        report = preflight_across(PreflightOnSlot(first), lambda: _borrow(second), spec, None)
    assert report.passed and report.restart is None and report.error is None
    assert spec.checkpoint is not None
    assert open_store(spec.checkpoint).keys("camp") == []  # the check leaves nothing behind


@contextmanager
def _borrow(worker: SlotWorker) -> Iterator[PreflightOnSlot]:
    yield PreflightOnSlot(worker)


def test_a_checkpoint_missing_state_fails_the_preflight_across_workers(tmp_path: Path) -> None:
    spec = make_spec(f"file://{tmp_path}/ckpt").with_workload(
        entry="tests.ablations.checkpoint.workloads:ForgetfulDigits"
    )
    with _worker() as first, _worker() as second:
        report = preflight_across(PreflightOnSlot(first), lambda: _borrow(second), spec, None)
    assert not report.passed and report.restart is not None
    assert report.restart.rule == "restart" and "after reload has loss" in report.restart.message


def test_a_continuation_that_cannot_run_is_a_failed_reload(tmp_path: Path) -> None:
    spec = make_spec(f"file://{tmp_path}/ckpt")
    with _worker() as first, _worker() as second:
        start = first.do(PreflightStartJob(spec, None))
        assert start.reference is not None
        broken = spec.for_restart_check().with_workload(entry="no_such_module:X")
        try:
            second.do(ContinueJob(broken, start.reference.until))
        except WorkloadFailed as exc:  # the workload does not import: not the machine's fault
            assert "no_such_module" in str(exc)
        else:
            raise AssertionError("a continuation that cannot build its workload must raise")


def test_a_worker_reports_a_workload_that_does_not_import() -> None:
    bad = ("workload.entry", "ablations.workloads.digits:NoSuchWorkload")
    with _worker(Warmup((bad,))) as worker:
        problem = worker.workload_problem()
    assert problem is not None and "has no 'NoSuchWorkload'" in problem.message
    with _worker(Warmup((("workload.entry", DIGITS),))) as worker:
        assert worker.workload_problem() is None
