"""Opening a campaign from one parse: `admit` checks everything before the folder's lock,
`open_campaign` registers and loads under it without reading the plan back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.campaign import code as code_module
from ablations.campaign.folder import CampaignFolder
from ablations.campaign.opening import admit, open_campaign, register
from ablations.errors import AblationError, CampaignConflictError, InputError, PlanError
from ablations.plan.model import Plan


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


def test_a_folder_registered_by_another_release_is_refused_as_such(
    tmp_path: Path, demo_data: dict[str, Any]
) -> None:
    """The same plan.yaml hashed by a release whose plan model had other fields (a new
    default, `seeds.interim_share`, changes every plan's hash): the refusal says the plan is
    unchanged and what to do, not that it was corrected."""
    text = yaml.safe_dump(demo_data)
    first = register(text, tmp_path / "out")
    folder = CampaignFolder(tmp_path / "out")
    older = first.model_copy(update={"plan_hash": "0" * 64})  # as an older release hashed it
    folder.write_registration(older)
    with pytest.raises(CampaignConflictError) as info:
        register(text, tmp_path / "out")
    message = str(info.value)
    assert "registered by another release of ablate" in message
    assert first.plan_hash in message and "0" * 64 in message and "new output folder" in message
    demo_data["metric"]["threshold"] = 0.5  # a corrected plan is still refused as one
    with pytest.raises(CampaignConflictError, match="A corrected plan is a new campaign"):
        register(yaml.safe_dump(demo_data), tmp_path / "out")


def test_non_empty_unregistered_folder_is_refused(
    tmp_path: Path, demo_data: dict[str, Any]
) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "precious.txt").write_text("keep")
    with pytest.raises(AblationError, match="not empty"):
        register(yaml.safe_dump(demo_data), tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["precious.txt"]


def test_the_campaign_opens_from_the_admitted_plan_without_reading_it_back(
    tmp_path: Path, demo_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "# kept as written\n" + yaml.safe_dump(demo_data)
    admission = admit(text, "plan.yaml", tmp_path / "out")
    assert admission.known is None and admission.out_dir == (tmp_path / "out").resolve()

    def no_read_back(self: CampaignFolder) -> str:
        raise AssertionError("plan.yaml read back")

    monkeypatch.setattr(CampaignFolder, "plan_text", no_read_back)
    campaign = open_campaign(admission)
    assert campaign.plan is admission.plan  # the one parse, handed on
    assert campaign.registration.plan_hash == admission.plan_hash
    assert (tmp_path / "out" / "plan.yaml").read_text() == text
    assert [r.run_id for r in campaign.runs] and campaign.out_dir == admission.out_dir
    again = open_campaign(admit(text, "plan.yaml", tmp_path / "out"))  # a rerun: known
    assert again.registration == campaign.registration


def test_a_folder_registered_between_the_admission_and_the_lock_is_refused(
    tmp_path: Path, demo_data: dict[str, Any]
) -> None:
    admission = admit(yaml.safe_dump(demo_data), "mine.yaml", tmp_path / "out")
    other = dict(demo_data, campaign=dict(demo_data["campaign"], id="someone-else"))
    register(yaml.safe_dump(other), tmp_path / "out")  # another run got the lock first
    with pytest.raises(CampaignConflictError, match="someone-else"):
        open_campaign(admission)


def test_the_callers_refusal_comes_before_any_of_the_users_files_is_read(
    tmp_path: Path, demo_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def hashed(plan: Plan, cwd: Path | None = None) -> None:
        raise AssertionError("the user's code was hashed")

    def refuse(plan: Plan) -> None:
        raise InputError(f"{plan.workload.entry} is not allowed here")

    monkeypatch.setattr(code_module, "workload_code", hashed)
    monkeypatch.setattr("ablations.campaign.opening.workload_code", hashed)
    with pytest.raises(InputError, match="is not allowed here"):
        admit(yaml.safe_dump(demo_data), "plan.yaml", tmp_path / "out", vet=refuse)
    assert not (tmp_path / "out").exists()


def test_a_pilot_problem_and_an_unimportable_workload_are_one_plan_error(
    tmp_path: Path, demo_data: dict[str, Any]
) -> None:
    demo_data["workload"]["entry"] = "no_such_module_here:Workload"
    demo_data["pilot"]["steps"] = 1  # ends before its first evaluation
    with pytest.raises(PlanError) as info:
        admit(yaml.safe_dump(demo_data), "plan.yaml", tmp_path / "out", workload="find")
    fields = {p.path for p in info.value.problems}
    assert "workload.entry" in fields and len(info.value.problems) >= 2, info.value
