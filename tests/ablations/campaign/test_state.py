"""Completion records in the output folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablations.campaign.folder import CampaignFolder
from ablations.campaign.opening import register
from ablations.campaign.state import save_record
from ablations.errors import OutsideFolder
from ablations.run.records import CheckpointSummary, RunError, RunRecord
from tests.conftest import DEMO_PLAN


def test_completion_record_roundtrip(tmp_path: Path) -> None:
    record = RunRecord(
        run_id="r-s0-1",
        variant="control",
        seed=0,
        category="essential",
        phase="main",
        status="accepted",
        metrics={"accuracy": 0.97},
    )
    assert CampaignFolder(tmp_path).record("r-s0-1") is None
    save_record(tmp_path, record)
    assert CampaignFolder(tmp_path).record("r-s0-1") == record
    assert not list((tmp_path / "records").glob(".*tmp"))


def test_a_records_messages_name_the_folders_files_relative_to_it_without_escapes(
    tmp_path: Path,
) -> None:
    """A run that rightly refused a bad checkpoint says so in `last_error`; the record names
    the file relative to the folder (a moved folder verifies) and keeps no terminal escape."""
    out = tmp_path / "out"
    step = f"file://{out.resolve()}/checkpoints/c/r/step-00000010"
    refused = f"refused step 10: \x1b[31m{step}/model.pt\x1b[0m: truncated\x07"
    record = RunRecord(
        run_id="r-s0-1",
        variant="control",
        seed=0,
        category="essential",
        phase="main",
        status="accepted",
        checkpoint=CheckpointSummary(uri=step, last_error=refused, note=f"at {out}/x"),
        error=RunError(type="StoreError", message=f"cannot read {out.resolve()}/checkpoints/k"),
    )
    save_record(out, record)
    text = (out / "records" / "r-s0-1.json").read_text()
    saved = CampaignFolder(out).record("r-s0-1")
    assert saved is not None and saved.error is not None
    assert saved.checkpoint.last_error == (
        "refused step 10: file://checkpoints/c/r/step-00000010/model.pt: truncated"
    )
    assert saved.checkpoint.uri == "file://checkpoints/c/r/step-00000010"
    assert saved.checkpoint.note == "at x" and saved.error.message == "cannot read checkpoints/k"
    assert str(tmp_path) not in text and "\\u001b" not in text and "\\u0007" not in text


@pytest.mark.parametrize("planted", ["checkpoints/digits-demo", "ledger.db", "records", "logs"])
def test_a_link_planted_in_a_finished_folder_is_refused_before_any_write(
    tmp_path: Path, planted: str
) -> None:
    """A rerun on a folder where a link now stands where the campaign writes (its store's
    campaign prefix, the ledger SQLite would follow even dangling, a run folder) is refused
    in one line naming the link; nothing is written where it points."""
    text = DEMO_PLAN.read_text()
    out = tmp_path / "out"
    register(text, out)
    outside = tmp_path / "outside"
    link = out / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)  # dangling: a write through it would create it
    with pytest.raises(OutsideFolder, match=f"^{planted} in the output folder .* symbolic link"):
        register(text, out)
    assert not outside.exists()
