"""The typed manifest: an export's manifest.json validates as `Manifest` and is written again
byte for byte; a malformed one is one error naming the file and the field (verify, report);
it is read once per process while the file is unchanged.

The manifest of a real campaign (trained runs, S3 checkpoints) gets the same round trip in
tests/flows/test_output_folder.py. The committed manifests in fixtures/ were written by the
model as it was before `ManifestRun` was derived from `PlannedRun` and `RunRecord` (commit
3533924): `make demo`'s manifest, trimmed, with a pending, a failed, a rejected and a trimmed
row added (manifest-format2.json), and three rows as format 1 wrote them (artifacts by kind).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ablations.campaign.campaign import Campaign
from ablations.campaign.folder import MANIFEST, CampaignFolder
from ablations.campaign.gate import GateDecision
from ablations.campaign.manifest import Manifest, ManifestRun, parse_manifest, read_manifest
from ablations.campaign.opening import register
from ablations.campaign.steps import project_campaign
from ablations.cli import main
from ablations.errors import ManifestError
from ablations.plan.variants import PlannedRun
from ablations.results.write import write_results
from ablations.run.records import PreflightReport, RunRecord, Stop, Timings
from ablations.verify.folder import verify_folder
from tests.flows.conftest import TINY_PLAN, plan_text


def test_a_row_holds_every_planned_and_record_field() -> None:
    """A field added to PlannedRun or RunRecord must reach the manifest's rows."""
    assert set(ManifestRun.model_fields) == set(PlannedRun.model_fields) | set(
        RunRecord.model_fields
    )
    shared = PlannedRun.model_fields.keys() & RunRecord.model_fields.keys()
    in_order = [*PlannedRun.model_fields, *(k for k in RunRecord.model_fields if k not in shared)]
    assert list(ManifestRun.model_fields) == in_order  # the JSON's order


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("name", ["manifest-format2.json", "manifest-format1.json"])
def test_a_committed_manifest_is_written_again_byte_for_byte(name: str) -> None:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    manifest = parse_manifest(FIXTURES / name)
    assert manifest.to_json() == text
    for row, written in zip(manifest.runs, json.loads(text)["runs"], strict=True):
        assert list(row.model_dump(mode="json")) == list(written)  # the fields' order too
        if row.status in ("pending", "unneeded"):
            assert set(written) == {*PlannedRun.model_fields, "status"} and row.record() is None
        else:
            record = row.record()
            assert record is not None and record.status == row.status
            assert record.artifacts == row.run_file_paths


def test_a_format_1_row_names_its_files_by_kind() -> None:
    manifest = parse_manifest(FIXTURES / "manifest-format1.json")
    assert manifest.manifest_format == 1 and manifest.files is None
    row = manifest.runs[0]
    assert row.run_file_entries == [] and row.run_file("model") == (
        "models/pilot-control-s0-8c1e5ee3bd.pt"
    )


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    """A folder exported from completion records (no training): every registered run has
    one, except the last main run, which is left pending."""
    out = tmp_path / "out"
    register(plan_text(TINY_PLAN), out)
    campaign = Campaign.load(out)
    folder = campaign.folder
    project_campaign(campaign, slots=1)
    folder.write_preflight(PreflightReport(passed=True, seconds=1.25))
    folder.write_gate(GateDecision(decision="continue", reason="healthy", decided_at=1002.0))
    runs = campaign.runs
    for i, run in enumerate(runs[:-1]):
        stopped = run.variant != "control" and run.phase == "main"
        folder.write_record(
            RunRecord(
                run_id=run.run_id,
                variant=run.variant,
                seed=run.seed,
                category=run.category,
                phase=run.phase,
                status="stopped" if stopped else "accepted",
                stop=Stop(rule="quality", message="low", step=20) if stopped else None,
                steps_done=run.steps,
                metrics={"accuracy": 0.8 + i / 100, "loss": 0.5},
                evaluations=[{"step": 20.0, "accuracy": 0.8}],
                timings=Timings(load=0.5, train=1.5),
                started_at=1000.0 + i,
                ended_at=1001.5 + i,
            )
        )
    write_results(campaign)
    return out


def test_an_exported_manifest_validates_and_is_written_again_byte_for_byte(
    exported: Path,
) -> None:
    text = (exported / MANIFEST).read_text()
    manifest = read_manifest(exported)
    assert manifest.to_json() == text
    assert json.loads(manifest.model_dump_json()) == json.loads(text)
    statuses = [r.status for r in manifest.runs]
    assert statuses.count("pending") == 1 and "stopped" in statuses
    pending = json.loads(text)["runs"][statuses.index("pending")]
    assert set(pending) == {*PlannedRun.model_fields, "status"}  # the planned fields only
    assert manifest.gate is not None and manifest.gate.decision == "continue"
    assert manifest.manifest_format == 2 and manifest.files and manifest.decision_reached
    assert manifest.planned_vs_realized is not None
    accepted = next(r for r in manifest.runs if r.status == "accepted")
    assert accepted.record() == CampaignFolder(exported).record(accepted.run_id)


def _tamper(out: Path, change: dict[str, object], row: int | None = None) -> None:
    data = json.loads((out / MANIFEST).read_text())
    (data["runs"][row] if row is not None else data).update(change)
    (out / MANIFEST).write_text(json.dumps(data, indent=2))


@pytest.mark.parametrize(
    ("change", "row", "field"),
    [
        ({"status": "finished"}, 1, "runs[1].status"),
        ({"seed": "zero"}, 0, "runs[0].seed"),
        ({"gate": {"decision": "maybe", "reason": "?"}}, None, "gate.decision"),
        ({"files": [{"kind": "plan", "path": "plan.yaml"}]}, None, "files[0].sha256"),
    ],
)
def test_a_malformed_manifest_is_one_error_naming_the_file_and_field(
    exported: Path,
    change: dict[str, object],
    row: int | None,
    field: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _tamper(exported, change, row)
    named = f"{exported / MANIFEST}: field {field}: "
    with pytest.raises(ManifestError) as info:
        verify_folder(exported)
    assert str(info.value).startswith(named)
    assert main(["verify", str(exported)]) == 2  # bad input: nothing to check
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err
    assert main(["report", str(exported)]) == 2  # the same input error as verify's
    assert named in capsys.readouterr().err


def test_the_manifest_is_read_from_the_file_at_each_call(exported: Path) -> None:
    """No cache: a reader gets the file as it is now (its callers read it once, and `ablate
    run` is handed the manifest the results step wrote)."""
    first = read_manifest(exported)
    assert CampaignFolder(exported).manifest() == first
    _tamper(exported, {"decision_reached": "changed"})
    os.utime(exported / MANIFEST, ns=(1, 1))  # even with the mtime of long ago
    again = read_manifest(exported)
    assert again.decision_reached == "changed" and first.decision_reached != "changed"


def test_unknown_top_level_keys_are_kept_and_missing_parts_are_verifys_findings(
    tmp_path: Path,
) -> None:
    (tmp_path / MANIFEST).write_text(json.dumps({"runs": [], "annotated_by": "a tool"}))
    manifest = read_manifest(tmp_path)
    assert isinstance(manifest, Manifest) and manifest.model_extra == {"annotated_by": "a tool"}
    lines = [str(p) for p in verify_folder(tmp_path).problems]
    assert "manifest.json: has no 'campaign_id': the results step did not finish" in lines
