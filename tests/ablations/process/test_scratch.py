"""Scratch folders: removed when their block ends, and when their process was killed -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ablations.process.scratch import remove_abandoned, scratch_folder, scratch_root


@pytest.fixture(autouse=True)
def _own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR


def test_a_scratch_folder_goes_when_its_block_ends() -> None:
    with scratch_folder("run-") as path:
        (path / "big.bin").write_bytes(b"x" * 1000)
        assert path.parent == scratch_root()
    assert not path.exists()


def test_a_live_owners_folder_is_kept_and_a_killed_owners_is_removed(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from ablations.process.scratch import scratch_folder
        with scratch_folder("killed-") as path:
            (path / "checkpoint.bin").write_bytes(b"x" * 1000)
            print(path, flush=True)
            time.sleep(60)
        """
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env)
    assert child.stdout is not None
    left = Path(child.stdout.readline().decode().strip())
    try:
        assert left.is_dir()
        assert remove_abandoned(scratch_root()) == []  # alive: its lock is held
        assert left.is_dir()
        with scratch_folder("mine-") as mine:
            assert left.is_dir()  # opening another leaves a live one alone
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert left.is_dir()  # kill -9: nothing of the child's cleanup ran
    with scratch_folder("next-") as mine:
        assert not left.exists()  # the next opener removes it
        assert mine.is_dir()


def test_a_folder_being_created_is_left_alone() -> None:
    root = scratch_root()
    root.mkdir(mode=0o700)
    creating = root / "run-abc"
    creating.mkdir()  # mkdtemp done, its .owner not yet written
    assert remove_abandoned(root) == []
    assert creating.is_dir()


def test_a_sweep_between_a_new_folders_creation_and_its_lock_leaves_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process's sweep runs at the worst instant: the new folder's lock file exists
    and is not locked yet. flock conflicts between two opens of one file in one process as
    between two processes, so the sweep here is the other process's."""
    import fcntl

    from ablations.process import scratch

    real_flock = fcntl.flock
    swept: list[list[Path]] = []

    def flock_after_a_sweep(fd: int, operation: int) -> None:
        if not swept:  # the first lock taken: the new folder's own
            swept.append([])  # the sweep's own locks go straight through
            swept[0] = remove_abandoned(scratch_root())
        real_flock(fd, operation)

    monkeypatch.setattr(scratch.fcntl, "flock", flock_after_a_sweep)
    with scratch_folder("run-") as path:
        assert swept == [[]] and path.is_dir()
        (path / "checkpoint").mkdir()  # what the run then writes there
