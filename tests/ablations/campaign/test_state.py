from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.campaign.folder import CampaignFolder
from ablations.campaign.state import register, save_record
from ablations.errors import AblationError, CampaignConflictError
from ablations.run.records import RunRecord


def test_register_freezes_the_plan_text(tmp_path: Path, demo_data: dict[str, Any]) -> None:
    text = "# my comment\n" + yaml.safe_dump(demo_data)
    registration = register(text, tmp_path / "out")
    assert (tmp_path / "out" / "plan.yaml").read_text() == text
    assert register(text, tmp_path / "out").plan_hash == registration.plan_hash


def test_changed_plan_is_refused_naming_both_hashes(
    tmp_path: Path, demo_data: dict[str, Any]
) -> None:
    first = register(yaml.safe_dump(demo_data), tmp_path / "out")
    demo_data["metric"]["threshold"] = 0.5
    with pytest.raises(CampaignConflictError) as info:
        register(yaml.safe_dump(demo_data), tmp_path / "out")
    assert first.plan_hash in str(info.value) and "new campaign" in str(info.value)


def test_non_empty_unregistered_folder_is_refused(
    tmp_path: Path, demo_data: dict[str, Any]
) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "precious.txt").write_text("keep")
    with pytest.raises(AblationError, match="not empty"):
        register(yaml.safe_dump(demo_data), tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["precious.txt"]


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
