"""An output folder that cannot be written, or a disk that fills up: a clear error, and nothing
half-written left behind that looks complete."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ablations.campaign.folder import CampaignFolder
from ablations.campaign.opening import register
from ablations.campaign.state import save_record
from ablations.errors import AblationError
from ablations.files.atomic import atomic_write_text
from ablations.run.records import RunRecord
from tests.conftest import ROOT
from tests.flows.conftest import TINY_PLAN


def test_out_inside_a_regular_file_is_refused_before_prefect_starts(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(TINY_PLAN))
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "ablations.cli", "run", str(plan), "--out", str(blocker / "out")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PREFECT_HOME=str(tmp_path / "prefect-home")),
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"cannot create the output folder {blocker / 'out'}" in result.stderr
    assert "is a file" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert not (tmp_path / "prefect-home").exists()  # refused before Prefect started
    assert time.monotonic() - started < 30
    assert blocker.read_text() == "not a folder\n"


def _disk_full_for(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    real = os.replace

    def replace(src: str, dst: str) -> None:
        if Path(dst).name == name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), dst)
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


def _no_temp_files(folder: Path) -> None:
    assert [p.name for p in folder.rglob("*.tmp")] == []


def test_disk_full_while_registering_is_a_clear_error_and_no_registration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _disk_full_for(monkeypatch, "registration.json")
    out = tmp_path / "out"
    with pytest.raises(AblationError, match=r"cannot write the output folder .*No space left"):
        register(yaml.safe_dump(TINY_PLAN), out)
    assert not (out / "registration.json").exists()  # never presented as a registered campaign
    _no_temp_files(out)


def test_disk_full_while_recording_a_run_keeps_the_old_record_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = RunRecord(
        run_id="r-s0-0000000000", variant="control", seed=0, category="essential",
        phase="main", status="accepted", metrics={"accuracy": 0.9},
    )  # fmt: skip
    save_record(tmp_path, first)
    _disk_full_for(monkeypatch, f"{first.run_id}.json")
    with pytest.raises(OSError, match="No space left"):
        save_record(tmp_path, first.model_copy(update={"metrics": {"accuracy": 0.1}}))
    assert CampaignFolder(tmp_path).record(first.run_id) == first  # the earlier, complete record
    _disk_full_for(monkeypatch, "new-s0-1111111111.json")
    with pytest.raises(OSError):
        atomic_write_text(tmp_path / "records" / "new-s0-1111111111.json", "{}")
    assert CampaignFolder(tmp_path).record("new-s0-1111111111") is None  # no half record
    _no_temp_files(tmp_path)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 600 KiB tmpfs (root only; skipped elsewhere): the campaign fills it mid-way."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(disk)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.slow
@pytest.mark.long  # `make test-long`: two campaigns in subprocesses (about a minute)
def test_a_full_disk_stops_with_one_line_and_a_rerun_after_freeing_space_verifies(
    small_disk: Path, tmp_path: Path
) -> None:
    from ablations.verify.folder import verify_folder
    from tests.faults.conftest import Campaign, fault_plan

    campaign = Campaign(small_disk / "c", fault_plan(), tmp_path / "prefect-home")
    full = campaign.run()
    output = full.stdout + full.stderr
    assert full.returncode == 1, output
    assert "Traceback" not in output and "internal error" not in output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0], output
    assert "rerun the same command" in errors[0]
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    rerun = campaign.run()
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert [str(p) for p in verify_folder(campaign.out).problems] == []


def test_an_os_error_is_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ablations import cli
    from ablations.cli import registry as cli_registry

    def full(args: object) -> int:
        atomic_write_text(tmp_path / "records" / "r.json", "{}")
        return 0

    _disk_full_for(monkeypatch, "r.json")
    monkeypatch.setitem(cli_registry.COMMANDS, "validate", full)
    monkeypatch.delenv("ABLATE_DEBUG", raising=False)
    assert cli.main(["validate", "plan.yaml"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"error: No space left on device: {tmp_path / 'records' / 'r.json'}.")
    _no_temp_files(tmp_path)
