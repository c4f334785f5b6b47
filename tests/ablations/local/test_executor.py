"""The local executor: a started worker per slot, the spare for a single slot's restart
check, its conformance to the `Executor` protocol's behaviour on a real run, and a run
waiting while another campaign on the machine holds its slot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ablations.local.executor import LocalSlots
from ablations.run.records import RunRecord
from ablations.slots.devices import SlotSpec
from ablations.slots.locks import SlotLocks
from ablations.workers.worker import Warmup
from tests.ablations.checkpoint.conftest import make_spec
from tests.conftest import ROOT

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


@pytest.mark.slow  # an end-to-end subprocess or worker start: make test, not make check
def test_a_run_waits_while_another_campaign_holds_its_slot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locks = SlotLocks(host="box", lock_dir=tmp_path / "slots")
    hold = ["-m", "tests.ablations.slots.hold_slot", str(locks.lock_dir), "cpu#0", "1", "600"]
    holder = subprocess.Popen(  # another campaign's run on cpu#0 of this machine
        [sys.executable, *hold], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with LocalSlots.open([CPU], Warmup(IMPORTS), locks) as executor:
            records: list[RunRecord] = []
            run = threading.Thread(
                target=lambda: records.append(executor.run(make_spec(f"file://{tmp_path}/ckpt")))
            )
            run.start()
            run.join(timeout=1.5)
            assert run.is_alive() and not records  # waiting for the other campaign's run
            os.kill(holder.pid, signal.SIGKILL)  # its end (or its death) frees the slot
            run.join(timeout=60)
            assert records and records[0].slot == CPU.name
            assert locks.try_lock(CPU) is not None  # and the run gave it back
    finally:
        holder.kill()
        holder.wait(timeout=10)
    said = capsys.readouterr().out
    lock = locks.lock_path(CPU)
    assert said.count(f"cpu#0 is in use by another campaign on this machine (lock {lock})") == 1
