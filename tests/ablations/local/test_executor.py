"""The local executor: a started worker per slot, the spare for a single slot's restart
check, and its conformance to the `Executor` protocol's behaviour on a real run."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablations.local.executor import LocalSlots
from ablations.slots.devices import SlotSpec
from ablations.workers.worker import Warmup
from tests.ablations.checkpoint.conftest import make_spec

CPU = SlotSpec(name="cpu#0", device="cpu", cpu_threads=1)
DIGITS = "ablations.workloads.digits:DigitsWorkload"

IMPORTS = (("workload.entry", DIGITS),)


@pytest.mark.slow  # an end-to-end subprocess or worker start: make test, not make check
def test_one_slot_borrows_a_spare_that_is_closed_after_the_check(tmp_path: Path) -> None:
    with LocalSlots.open([CPU], Warmup(IMPORTS, restart_check=True)) as executor:
        slot_pid = executor.leases.slots[0].pid
        with executor.other_process() as spare:
            spare_pid = spare.pid
            assert spare_pid is not None and spare_pid != slot_pid
        assert spare.pid is None  # closed: it served its one check
        with executor.other_process() as fallback:  # none left: a new process, never the slot's
            assert fallback is not executor.leases.slots[0]


@pytest.mark.slow  # an end-to-end subprocess or worker start: make test, not make check
def test_runs_preflight_and_results_go_through_the_started_workers(tmp_path: Path) -> None:
    spec = make_spec(f"file://{tmp_path}/ckpt")
    with LocalSlots.open([CPU], Warmup(IMPORTS)) as executor:
        assert executor.slots == [CPU]
        pid = executor.leases.slots[0].pid
        record = executor.run(spec)
        report = executor.preflight(spec.model_copy(update={"run_id": "check"}), None)
        assert executor.leases.slots[0].pid == pid  # the same process served both jobs
    assert record.status in ("accepted", "rejected") and record.steps_done == spec.steps
    assert record.slot == CPU.name
    assert report.passed, report
    assert pid is not None and executor.leases.slots[0].pid is None  # stopped at the end
