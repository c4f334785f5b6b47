"""Completion records in the output folder."""

from __future__ import annotations

from pathlib import Path

from ablations.campaign.folder import CampaignFolder
from ablations.campaign.state import save_record
from ablations.run.records import RunRecord


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
