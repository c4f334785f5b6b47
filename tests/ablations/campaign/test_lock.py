"""One writer per output folder: a second campaign is refused, a dead holder frees the folder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ablations.campaign.lock import LOCK_NAME, hold_folder
from ablations.campaign.opening import existing_registration
from ablations.cli import EXIT_INPUT, main
from ablations.errors import FolderBusyError
from ablations.plan.io import load_plan
from tests.conftest import ROOT
from tests.flows.conftest import TINY_PLAN

HOLDER = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from ablations.campaign.lock import hold_folder\n"
    "with hold_folder(Path(sys.argv[1])):\n"
    "    print('held', flush=True)\n"
    "    time.sleep(120)\n"
)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """Another process holding the lock of `tmp_path/out`."""
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "held"
    yield process, out
    process.kill()
    process.wait()


def test_a_second_run_on_a_held_folder_exits_2_naming_the_holder_and_writes_nothing(
    holder: tuple[subprocess.Popen[str], Path],
    write_plan: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    process, out = holder
    plan = write_plan(TINY_PLAN)
    assert main(["run", str(plan), "--out", str(out)]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert f"pid {process.pid}" in err
    assert socket.gethostname() in err
    assert [p.name for p in out.iterdir()] == [LOCK_NAME]


def test_the_lock_dies_with_its_holder_even_by_sigkill(
    holder: tuple[subprocess.Popen[str], Path],
) -> None:
    process, out = holder
    with pytest.raises(FolderBusyError, match=f"pid {process.pid}"), hold_folder(out):
        pass
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    with hold_folder(out):
        assert f'"pid": {os.getpid()}' in (out / LOCK_NAME).read_text()


def test_the_lock_is_reentrant_in_one_process_and_released_after_the_outermost(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    with hold_folder(out), hold_folder(out / "." / ""):
        pass
    probe = subprocess.run(
        [sys.executable, "-c", HOLDER.replace("time.sleep(120)", "pass"), str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert probe.stdout.strip() == "held", probe.stderr


def test_a_folder_holding_only_its_lock_counts_as_empty(tmp_path: Path, write_plan: Any) -> None:
    out = tmp_path / "out"
    with hold_folder(out):
        pass
    assert existing_registration(load_plan(write_plan(TINY_PLAN), workload="skip"), out) is None
