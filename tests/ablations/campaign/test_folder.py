"""CampaignFolder: each file of the output contract written and read back typed, by its name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ablations.budget import project
from ablations.campaign import folder as names
from ablations.campaign.folder import CampaignFolder, Registration
from ablations.campaign.gate import GateDecision
from ablations.plan.model import parse_plan, plan_hash
from ablations.plan.runs import planned_runs
from ablations.run.records import PreflightReport, RunRecord, Stop
from ablations.verify.layout import EXPECTED_ENTRIES


def _record(run_id: str, **fields: Any) -> RunRecord:
    base: dict[str, Any] = {
        "variant": "control",
        "seed": 0,
        "category": "essential",
        "phase": "main",
        "status": "accepted",
    }
    return RunRecord(run_id=run_id, **{**base, **fields})


def test_an_empty_folder_reads_as_nothing_written(tmp_path: Path) -> None:
    folder = CampaignFolder(tmp_path)
    assert folder.registration() is None and folder.preflight() is None
    assert folder.gate() is None and folder.projection() is None
    assert folder.record("nope") is None and folder.records() == {}


def test_each_state_file_round_trips_under_its_contract_name(
    tmp_path: Path, demo_data: dict[str, Any]
) -> None:
    folder = CampaignFolder(tmp_path / "out")
    text = "# as given\n" + yaml.safe_dump(demo_data)
    folder.write_plan(text)
    plan = parse_plan(demo_data)
    registration = Registration(
        campaign_id=plan.campaign.id, plan_hash=plan_hash(plan), out_dir="/x", registered_at=1.5
    )
    folder.write_registration(registration)
    preflight = PreflightReport(passed=False, data_problems=["labels: 3 missing"], seconds=2.0)
    folder.write_preflight(preflight)
    gate = GateDecision(decision="trim", reason="too long", drop=["a"], numbers={"hours": 3.0})
    folder.write_gate(gate)
    projection = project(plan, planned_runs(plan, plan_hash(plan)), plan.budget.estimate, 2)
    folder.write_projection(projection)
    stopped = _record("r1", status="stopped", stop=Stop(rule="quality", message="low", step=5))
    folder.write_record(stopped)
    folder.write_record(_record("r0"))

    root = tmp_path / "out"
    assert (root / names.PLAN).read_text() == text and folder.plan_text() == text
    assert folder.plan() == plan
    assert folder.registration() == registration
    assert folder.preflight() == preflight
    assert folder.gate() == gate
    assert folder.projection() == projection
    assert folder.record("r1") == stopped
    assert list(folder.records()) == ["r0", "r1"]
    assert folder.record_path("r1") == root / "records" / "r1.json"
    assert CampaignFolder.record_name("r1") == "records/r1.json"
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert on_disk == {
        "plan.yaml",
        "registration.json",
        "preflight.json",
        "gate.json",
        "projection.json",
        "records/r0.json",
        "records/r1.json",
    }  # and no temporary left behind


def test_the_layout_verify_expects_is_the_folders_own() -> None:
    assert EXPECTED_ENTRIES == names.TOP_LEVEL
    files = (names.MANIFEST, names.RUNS_CSV, names.REPORT, names.RELOAD, names.LEDGER)
    assert set(files) | set(names.RUN_FOLDERS) | set(names.PLOTS) <= names.TOP_LEVEL
    assert names.WRITTEN_FOLDERS == ("", "metrics", "predictions", "records", "models", "commits")
