"""kill -9 of only the `ablate run` process (not its process group) mid-run: its slot workers
and its temporary server die with it, and nothing goes on writing the store."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.faults.conftest import Campaign, fault_plan
from tests.faults.workloads import PAUSE

pytestmark = pytest.mark.slow


def _group(pgid: int) -> list[int]:
    """Live (not zombie) processes of the process group `pgid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"


def _store(campaign: Campaign) -> dict[str, int]:
    store = campaign.out / "ckpt"
    return {str(p): p.stat().st_size for p in store.rglob("*") if p.is_file()}


def test_killing_only_the_campaign_process_takes_its_workers_and_server_along(
    tmp_path: Path,
) -> None:
    campaign = Campaign(tmp_path / "c", fault_plan(), tmp_path / "prefect-home", own_server=True)
    marker, go = tmp_path / "paused", tmp_path / "go"
    process = campaign.start(**{PAUSE: f"30:{marker}:{go}"})
    deadline = time.monotonic() + 240
    while not marker.exists():  # a run is mid-training in a slot worker, paused at step 30
        assert process.poll() is None, Path(campaign.logs[-1]).read_text()
        assert time.monotonic() < deadline, "no run reached step 30"
        time.sleep(0.05)
    children = [pid for pid in _group(process.pid) if pid != process.pid]
    assert len(children) >= 3  # the server and the slot workers (2 slots) at least

    os.kill(process.pid, signal.SIGKILL)  # the campaign process alone, as `kill -9 PID` does
    process.wait(timeout=30)
    go.touch()  # a surviving worker would train on from here and save checkpoints
    deadline = time.monotonic() + 5
    while _group(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = {pid: _command(pid) for pid in _group(process.pid)}
    assert alive == {}, "still alive 5 s after the campaign process was killed"
    written = _store(campaign)
    time.sleep(2)
    assert _store(campaign) == written
