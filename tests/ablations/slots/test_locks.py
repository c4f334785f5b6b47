"""Slot locks across processes: two processes on one slot never overlap, the second waits
and says so, a killed holder frees the slot, and a pool host's lease honours the same locks."""

from __future__ import annotations

import itertools
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ablations.pool.host import HostSlots
from ablations.slots.devices import SlotLease, SlotSpec
from ablations.slots.locks import POLL_SECONDS, SlotLocks, lease_held, unlock
from tests.conftest import ROOT

GPU0 = SlotSpec(name="cuda:0", device="cuda:0", cpu_threads=1)
WAITING = "cuda:0 is in use by another campaign on this machine (lock "


def _hold(lock_dir: Path, runs: int, seconds: float) -> subprocess.Popen[str]:
    """Another campaign's process holding `cuda:0` of host `box` (`hold_slot.py`: its first
    hold ends when the test writes a line)."""
    command = [sys.executable, "-m", "tests.ablations.slots.hold_slot", str(lock_dir)]
    return subprocess.Popen(
        [*command, "cuda:0", str(runs), str(seconds)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip


def _holds(output: str) -> list[tuple[float, float]]:
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    return [(line["start"], line["end"]) for line in lines]


def test_two_processes_on_one_slot_take_turns_and_the_second_waits(tmp_path: Path) -> None:
    first = _hold(tmp_path, runs=2, seconds=0.2)
    assert first.stdin and first.stdout
    assert first.stdout.readline().strip() == "held"
    second = _hold(tmp_path, runs=2, seconds=0.2)  # started while the first holds cuda:0
    assert second.stdin and second.stdout
    waiting = second.stdout.readline()  # while the first holds cuda:0
    lock = tmp_path / "box-cuda_0.lock"
    assert WAITING in waiting and f"(lock {lock}): waiting" in waiting, waiting
    first.stdin.write("\n")
    first.stdin.close()
    assert second.stdout.readline().strip() == "held"
    second.stdin.write("\n")
    second.stdin.close()
    first_out = first.stdout.read()
    second_out = second.stdout.read()
    assert first.wait(timeout=30) == 0 and second.wait(timeout=30) == 0
    a, b = _holds(first_out), _holds(second_out)
    assert len(a) == len(b) == 2
    ordered = sorted(a + b)
    overlaps = [(x, y) for x, y in itertools.pairwise(ordered) if y[0] < x[1]]
    assert not overlaps, ordered
    assert b[0][0] >= a[0][1]  # the second's first hold began after the first's ended
    assert WAITING not in second_out  # said once per wait, not once per retry


def test_a_holder_killed_with_sigkill_frees_the_slot(tmp_path: Path) -> None:
    holder = _hold(tmp_path, runs=1, seconds=600)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        locks = SlotLocks(host="box", lock_dir=tmp_path)
        assert locks.try_lock(GPU0) is None  # held by the other process
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        started = time.monotonic()
        with locks.held(GPU0):
            assert time.monotonic() - started < 2
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_a_pool_host_and_a_local_campaign_of_one_host_name_exclude_each_other(
    tmp_path: Path,
) -> None:
    env = {"ABLATE_DEVICES": "1", "ABLATE_HOST": "box", "ABLATE_SLOT_DIR": str(tmp_path)}
    host = HostSlots.from_env(env)
    local = SlotLocks.from_env(env)
    assert host.locks == local and host.lock_path(host.slots[0]) == local.lock_path(host.slots[0])
    busy = pytest.raises(TimeoutError, match="no free slot on box")
    with local.held(host.slots[0]), busy, host.lease(timeout_s=0.1):  # a local run on cpu#0
        pass
    other = SlotLocks(host="other-box", lock_dir=tmp_path)
    with host.lease(timeout_s=1) as slot, other.held(host.slots[0]):  # another host name
        assert slot.name == "box/cpu#0"


def test_the_lock_folder_is_made_for_every_user_of_the_machine(tmp_path: Path) -> None:
    locks = SlotLocks(host="box", lock_dir=tmp_path / "ablate-slots")
    with locks.held(GPU0):
        assert locks.lock_path(GPU0).name == "box-cuda_0.lock"
    assert stat.S_IMODE(locks.lock_dir.stat().st_mode) == 0o1777  # /tmp's: sticky, shared


def test_a_wait_ends_when_give_up_raises(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locks = SlotLocks(host="box", lock_dir=tmp_path)
    other = locks.try_lock(GPU0)  # another open file: flock tells it from ours, as a process
    assert other is not None

    def give_up() -> None:  # a campaign asked to stop: nothing new starts
        raise InterruptedError("stop")

    with pytest.raises(InterruptedError, match="stop"), locks.held(GPU0, give_up):
        pytest.fail("held a slot another holds")
    assert capsys.readouterr().out.count(WAITING) == 1
    unlock(other)
    with locks.held(GPU0):  # free again: at once, without a line
        pass
    assert WAITING not in capsys.readouterr().out


def test_a_campaign_takes_its_free_slot_no_other_holds_and_waits_when_all_are_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gpu1 = SlotSpec(name="cuda:1", device="cuda:1", cpu_threads=1)
    locks = SlotLocks(host="box", lock_dir=tmp_path)
    leases = SlotLease([GPU0, gpu1])  # the campaign's slots, cuda:0 first in its queue
    other = locks.try_lock(GPU0)  # another campaign's run on cuda:0
    assert other is not None
    started = time.monotonic()
    with lease_held(leases, lambda slot: slot, locks) as slot:
        assert slot == gpu1 and time.monotonic() - started < POLL_SECONDS  # no wait for cuda:0
        assert locks.try_lock(gpu1) is None  # held while the run uses it
        pauses: list[str] = []

        def give_up() -> None:  # every free slot held elsewhere: it pauses, and here stops
            pauses.append("pause")
            raise InterruptedError("stop")

        with pytest.raises(InterruptedError), lease_held(leases, lambda slot: slot, locks, give_up):
            pytest.fail("a second run on a held slot")
    assert pauses == ["pause"] and capsys.readouterr().out.count(WAITING) == 1
    unlock(other)
    with (
        lease_held(leases, lambda slot: slot, locks) as first,
        lease_held(leases, lambda slot: slot, locks) as second,
    ):
        assert {first, second} == {GPU0, gpu1}
