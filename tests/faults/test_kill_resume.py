"""kill -9 of the campaign's process tree during the pilot, while the gate waits, during a
checkpoint upload and during the main phase; each re-run picks up where the last one died.

One campaign is killed four times in a row and finally completed; an uninterrupted campaign
of the same plan (same run ids) runs in another folder. The end: every run finished once
(records written by an earlier invocation are never rewritten), the half-written checkpoint
is never loaded, and every run's metrics equal the uninterrupted campaign's exactly.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ablations.verify.folder import verify_folder
from tests.faults.conftest import Campaign, fault_plan, kill_when, log_text

# Two minutes of six campaigns on 2 cores: `make test-long` (CI runs it after `make test`);
# the suite keeps one kill per window in test_crash_windows, test_looks_resume and the rest.
pytestmark = [pytest.mark.slow, pytest.mark.long]


def _manifest(campaign: Campaign) -> dict[str, dict[str, object]]:
    runs = json.loads((campaign.out / "manifest.json").read_text())["runs"]
    return {r["run_id"]: r for r in runs}


def test_four_kills_then_the_same_results_as_an_uninterrupted_campaign(tmp_path: Path) -> None:
    home = tmp_path / "prefect-home"  # shared: the database is created once
    plan = fault_plan(gate={"mode": "auto", "timeout_minutes": 0.1})
    reference = Campaign(tmp_path / "reference", plan, home)
    result = reference.run()
    assert result.returncode == 0, result.stdout + result.stderr
    expected = _manifest(reference)

    killed = Campaign(tmp_path / "killed", plan, home)
    kept: dict[str, bytes] = {}

    def assert_kept() -> None:
        """Records from earlier invocations are byte-for-byte unchanged (never re-run)."""
        now = killed.snapshot()
        assert {name: now.get(name) for name in kept} == kept
        kept.update(now)

    # 1. During the pilot: the first pilot run has finished, the gate is not decided yet.
    process = killed.start("--gate", "ui")
    kill_when(process, lambda: len(killed.finished("pilot")) >= 1)
    assert not (killed.out / "gate.json").exists()
    kept.update(killed.snapshot())

    # 2. While the gate waits in the (ephemeral) Prefect UI: the flow run is paused.
    process = killed.start("--gate", "ui")
    kill_when(process, lambda: "gate: waiting" in log_text(killed.logs[-1]))
    assert not (killed.out / "gate.json").exists()  # unanswered: the next run asks again
    assert_kept()

    # 3. In the middle of a checkpoint upload in the main phase: half of state.pt is written.
    marker = killed.cwd / "upload-hangs"
    process = killed.start("--gate", "ui", ABLATE_FAULT_SLOW_UPLOAD=f"100:{marker}")
    kill_when(process, lambda: Path(f"{marker}.key").exists())
    assert (killed.out / "gate.json").exists()  # the gate timed out and was recorded
    half = killed.out / "ckpt" / Path(f"{marker}.key").read_text()
    assert half.exists() and not (half.parent / "COMMIT.json").exists()
    interrupted_run = half.parent.parent.name
    assert_kept()

    # 4. During the main phase, once two more main runs have finished.
    main_before = len(killed.finished("main"))
    process = killed.start()
    kill_when(process, lambda: len(killed.finished("main")) >= main_before + 2)
    assert_kept()

    # 5. Completes.
    result = killed.run()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert_kept()

    got = _manifest(killed)
    assert set(got) == set(expected)
    assert all(r["status"] != "pending" for r in got.values())
    for run_id, run in expected.items():
        assert got[run_id]["status"] == run["status"], run_id
        assert got[run_id]["metrics"] == run["metrics"], run_id  # exactly, not approximately
    # The run killed mid-upload resumed from a committed step on the 50-step interval (50, or
    # a later one if the fourth kill caught it again after it re-saved step 100 properly);
    # the half-written step 100 itself was never loaded (its metrics match exactly above).
    resumed = got[interrupted_run]["checkpoint"]
    assert isinstance(resumed, dict)
    step = resumed["resumed_from_step"]
    assert isinstance(step, int) and step > 0 and step % 50 == 0, resumed
    gate = json.loads((killed.out / "gate.json").read_text())
    assert gate["source"] == "timeout"  # asked again after the kill, then the policy applied
    # Nothing an interrupted invocation left behind is trusted or left over: the folder verifies.
    assert [str(p) for p in verify_folder(killed.out).problems] == []

    # The reference folder is portable: moved, it verifies against its own (relative) store;
    # a copy without that store fails, naming it, instead of reading the original's.
    moved = tmp_path / "moved"
    reference.out.rename(moved)
    manifest_text = (moved / "manifest.json").read_text()
    assert str(reference.out) not in manifest_text and '"file://ckpt/' in manifest_text
    assert [str(p) for p in verify_folder(moved).problems] == []
    copy = tmp_path / "copy"
    shutil.copytree(moved, copy)
    shutil.rmtree(copy / "ckpt")
    lines = [str(p) for p in verify_folder(copy).problems]
    assert lines == [f"file://ckpt: checkpoint store {copy / 'ckpt'} does not exist "
                     "(--skip-store skips it)"], lines  # fmt: skip
