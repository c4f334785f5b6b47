"""A host's slots leased across processes through lock files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ablations.pool.host import HostSlots
from tests.conftest import ROOT


def _host(tmp_path: Path, devices: str, name: str = "gpu-a") -> HostSlots:
    env = {"ABLATE_DEVICES": devices, "ABLATE_HOST": name, "ABLATE_SLOT_DIR": str(tmp_path)}
    return HostSlots.from_env(env)


def _holder(tmp_path: Path, devices: str) -> subprocess.Popen[str]:
    """Another process (a flow run on the same host) that leases a slot and keeps it."""
    code = textwrap.dedent(
        f"""
        import time
        from ablations.pool.host import HostSlots
        host = HostSlots.from_env(
            {{"ABLATE_DEVICES": {devices!r}, "ABLATE_HOST": "gpu-a",
              "ABLATE_SLOT_DIR": {str(tmp_path)!r}}}
        )
        with host.lease() as slot:
            print(slot.name, flush=True)
            time.sleep(600)
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    return process


def test_settings_come_from_the_environment(tmp_path: Path) -> None:
    host = _host(tmp_path, "2")
    assert host.host == "gpu-a" and host.lock_dir == tmp_path
    assert [s.name for s in host.slots] == ["cpu#0", "cpu#1"]
    assert host.lock_path(host.slots[0]).name == "gpu-a-cpu_0.lock"


def test_a_lease_names_the_host_and_frees_the_slot_afterwards(tmp_path: Path) -> None:
    host = _host(tmp_path, "cpu")
    with host.lease() as slot:
        assert slot.name == "gpu-a/cpu#0" and slot.device == "cpu"
    with host.lease(timeout_s=1) as again:  # released: leased again at once
        assert again.name == "gpu-a/cpu#0"


def test_a_slot_held_by_another_process_is_never_handed_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    holder = _holder(tmp_path, "2")
    try:
        assert holder.stdout is not None
        held = holder.stdout.readline().strip()
        assert held == "gpu-a/cpu#0"
        host = _host(tmp_path, "2")
        with host.lease(timeout_s=5) as slot:
            assert slot.name == "gpu-a/cpu#1"
            with (
                pytest.raises(TimeoutError, match="no free slot on gpu-a"),
                host.lease(timeout_s=1),
            ):
                pass
        # said once, in the flow run's log: its worker took more runs than the host has slots
        said = capsys.readouterr().out
        assert said.count("gpu-a: all 2 slot(s) busy; waiting for one") == 1, said
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_a_killed_holder_gives_its_slot_back(tmp_path: Path) -> None:
    holder = _holder(tmp_path, "cpu")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "gpu-a/cpu#0"
        host = _host(tmp_path, "cpu")
        with pytest.raises(TimeoutError), host.lease(timeout_s=1):
            pass
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        started = time.monotonic()
        with host.lease(timeout_s=5) as slot:
            assert slot.name == "gpu-a/cpu#0"
        assert time.monotonic() - started < 2
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_hosts_sharing_a_lock_folder_do_not_block_each_other(tmp_path: Path) -> None:
    with (
        _host(tmp_path, "cpu", "gpu-a").lease() as a,
        _host(tmp_path, "cpu", "gpu-b").lease(timeout_s=1) as b,
    ):
        assert (a.name, b.name) == ("gpu-a/cpu#0", "gpu-b/cpu#0")
