"""A campaign killed between two writes of its folder (through the `ABLATE_FAULT` crash
points, not a sleep) is completed correctly by a rerun: nothing refused, nothing half-applied.

- between plan.yaml and registration.json: the plan-only folder is this campaign's, by hash;
- between gate.json and the trimmed runs' records: the rerun derives the records from the
  recorded decision (and never asks the gate again).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablations.process.crash_points import AFTER_GATE, AFTER_PLAN, FAULT, FAULT_EXIT
from ablations.verify.folder import verify_folder
from tests.faults.conftest import Campaign, fault_plan

pytestmark = pytest.mark.slow


def test_killed_between_the_plan_and_its_registration_the_rerun_registers(
    tmp_path: Path,
) -> None:
    campaign = Campaign(tmp_path / "c", fault_plan(), tmp_path / "prefect-home")
    killed = campaign.run(**{FAULT: AFTER_PLAN})
    assert killed.returncode == FAULT_EXIT, killed.stdout + killed.stderr
    assert (campaign.out / "plan.yaml").exists()
    assert not (campaign.out / "registration.json").exists()

    result = campaign.run()
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((campaign.out / "registration.json").read_text())["campaign_id"] == "tiny"
    assert verify_folder(campaign.out, check_store=False).problems == []


def test_a_plan_only_folder_of_another_plan_is_refused(tmp_path: Path) -> None:
    campaign = Campaign(tmp_path / "c", fault_plan(), tmp_path / "prefect-home")
    campaign.out.mkdir(parents=True)
    (campaign.out / "plan.yaml").write_text(
        (campaign.plan.read_text()).replace("steps: 200", "steps: 201")
    )
    result = campaign.run()
    assert result.returncode == 2, result.stdout + result.stderr
    assert "unregistered plan.yaml hashing to" in result.stderr
    assert not (campaign.out / "registration.json").exists()


def test_killed_between_the_gate_and_the_trimmed_records_the_rerun_trims(
    tmp_path: Path,
) -> None:
    # lr 1e-6 learns nothing: its pilot is stopped and `trim_stopped` drops the useful variant.
    plan = fault_plan(
        factors={"lr": {"category": "useful", "levels": [1.0e-6]}},
        seeds=[0],
        pilot={"steps": 100, "variants": ["control", "lr=1e-06"]},
    )
    campaign = Campaign(tmp_path / "c", plan, tmp_path / "prefect-home")
    killed = campaign.run(**{FAULT: AFTER_GATE})
    assert killed.returncode == FAULT_EXIT, killed.stdout + killed.stderr
    gate = json.loads((campaign.out / "gate.json").read_text())
    assert gate["decision"] == "trim" and len(gate["drop"]) == 1, gate
    (dropped,) = gate["drop"]
    assert not (campaign.out / "records" / f"{dropped}.json").exists()

    result = campaign.run()
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((campaign.out / "gate.json").read_text()) == gate  # never asked again
    record = json.loads((campaign.out / "records" / f"{dropped}.json").read_text())
    assert record["status"] == "trimmed"
    runs = json.loads((campaign.out / "manifest.json").read_text())["runs"]
    assert {r["run_id"]: r["status"] for r in runs}[dropped] == "trimmed"
    assert verify_folder(campaign.out, check_store=False).problems == []
