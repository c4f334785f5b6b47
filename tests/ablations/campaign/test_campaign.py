"""`Campaign`: a registered campaign loaded once per process: its runs found by id, the state
files the campaign writes as it goes read when asked."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.analysis.looks import Looks
from ablations.campaign.campaign import Campaign
from ablations.campaign.specs import spec_for
from ablations.campaign.state import register, save_record
from ablations.errors import InputError
from ablations.records import RunRecord
from tests.ablations.analysis.synthetic import PLAN


def sequential_plan() -> dict[str, Any]:
    """Three variants, a pilot of the control, three looks (as tests/.../test_looks.py)."""
    data = copy.deepcopy(PLAN)
    data["factors"] = {"width": {"category": "essential", "levels": [16, 128]}}
    data["seeds"] = {"start": 3, "max": 8, "looks": [3, 5, 8], "spending": "pocock"}
    data["pilot"] = {"variants": ["control"], "steps": 50}
    return data


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    register(yaml.safe_dump(sequential_plan(), sort_keys=False), folder)
    return folder


def test_a_campaign_finds_its_runs_and_reads_its_state_when_asked(out: Path) -> None:
    campaign = Campaign.load(out)
    assert campaign.out_dir == out and campaign.folder.root == out
    assert campaign.registration.out_dir == str(out.resolve())
    pilot, main = campaign.phase("pilot"), campaign.phase("main")
    assert [*pilot, *main] == list(campaign.runs)
    assert {r.variant for r in pilot} == {"control"} and len(main) == 3 * 8
    assert campaign.run(main[5].run_id) == main[5]
    with pytest.raises(InputError, match="run 'nope' is not registered in"):
        campaign.run("nope")

    # written as the campaign goes: read from the folder whenever asked
    assert campaign.records() == {} and campaign.gate() is None
    assert campaign.looks() == Looks() and campaign.preflight() is None
    spec = spec_for(campaign.plan, campaign.registration, pilot[0])
    first = RunRecord(
        run_id=spec.run_id, variant=spec.variant, seed=spec.seed, category=spec.category,
        phase=spec.phase, status="accepted", metrics={"accuracy": 0.9},
    )  # fmt: skip
    save_record(out, first)
    assert campaign.records() == {first.run_id: first}
    assert campaign.finished(first.run_id) == first
    lost_spec = spec_for(campaign.plan, campaign.registration, main[0])
    lost = RunRecord.failed(lost_spec, "WorkerLost", "gone")
    save_record(out, lost)
    assert campaign.finished(lost.run_id) is None  # a rerun retries it


def test_a_folder_moved_after_registration_is_loaded_where_it_is_now(
    out: Path, tmp_path: Path
) -> None:
    moved = tmp_path / "moved"
    out.rename(moved)
    assert Campaign.load(moved).registration.out_dir == str(moved.resolve())


def test_a_folder_without_a_registration_is_refused(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(sequential_plan()))
    with pytest.raises(InputError, match="holds no registered campaign"):
        Campaign.load(tmp_path)
