"""`ablate verify` without a campaign: credentials, file entries, bad input, exit codes.

The checks against a real campaign folder (tampering, re-evaluation, the store) are in
tests/flows/test_output_folder.py.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import pytest
import torch

from ablations.campaign.manifest import ManifestRun, read_manifest
from ablations.cli import main
from ablations.errors import NotACampaignFolder
from ablations.security.credentials import find_credentials, redact_url, secret_values
from ablations.verify.files import check_entry, scan_paths


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("s3://bucket/prefix/run/step-00000010", "s3://bucket/prefix/run/step-00000010"),
        ("s3://AKIAKEY:s3cr3t@bucket/prefix", "s3://bucket/prefix"),
        ("http://user:pw@127.0.0.1:9000", "http://127.0.0.1:9000"),
        (
            "https://host/x?X-Amz-Signature=abc&part=2",
            "https://host/x?X-Amz-Signature=REDACTED&part=2",
        ),
        ("file:///data/ckpt", "file:///data/ckpt"),
        ("memory://tiny", "memory://tiny"),
    ],
)
def test_redact_url(url: str, redacted: str) -> None:
    assert redact_url(url) == redacted


def test_find_credentials_names_what_without_quoting_it() -> None:
    secrets = secret_values({"AWS_SECRET_ACCESS_KEY": "a-long-secret-value", "AWS_REGION": "us"})
    assert list(secrets) == ["AWS_SECRET_ACCESS_KEY"]  # a region is no secret
    found = find_credentials(b"error: a-long-secret-value rejected", secrets)
    assert found == ["the value of $AWS_SECRET_ACCESS_KEY"]
    assert find_credentials(b"see s3://k:v@bucket/x", {}) == ["a URL with user:password@"]
    assert find_credentials(b"id AKIAABCDEFGHIJKLMNOP", {}) == ["an AWS access key id"]
    assert find_credentials(b"accuracy 0.97, s3://bucket/x, testing", {}) == []


def _entry(path: Path, kind: str) -> dict[str, object]:
    data = path.read_bytes()
    return {
        "kind": kind,
        "path": path.name,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
    }


def test_check_entry_loads_each_kind_and_names_the_damage(tmp_path: Path) -> None:
    csv = tmp_path / "p.csv"
    csv.write_text("input_id,label,predicted\n1,2,2\n")
    weights = tmp_path / "m.pt"
    torch.save({"w": torch.ones(2)}, weights)
    assert check_entry(tmp_path, _entry(csv, "predictions"), "run r") == []
    assert check_entry(tmp_path, _entry(weights, "model"), "run r") == []

    wrong = tmp_path / "q.csv"
    wrong.write_text("a,b\n1,2\n")
    [problem] = check_entry(tmp_path, _entry(wrong, "predictions"), "run r")
    assert str(problem).startswith("q.csv: has no column(s) ['input_id', 'label', 'predicted']")

    pickled = tmp_path / "x.pt"
    torch.save({"w": object()}, pickled)  # needs a pickle to load: refused by weights_only
    [problem] = check_entry(tmp_path, _entry(pickled, "model"), "run r")
    assert str(problem).startswith("x.pt: does not load as model")

    outside = {"kind": "model", "path": "../m.pt", "sha256": "0", "bytes": 1}
    [problem] = check_entry(tmp_path, outside, "run r")
    assert str(problem) == "manifest.json: run r: '../m.pt' is not a path inside the folder"


def test_scan_paths_flags_the_folder_and_temporary_dirs_but_not_a_store_outside() -> None:
    manifest = {
        "runs": [
            {"checkpoint": {"uri": "file:///data/ckpt/c/r/step-00000001"}},
            {"checkpoint": {"uri": "file:///data/out/ckpt/c/r/step-00000001"}},  # not portable
        ],
        "checkpoint_store": {"url": "file:///data/out/ckpt"},  # the plan's, as written
        "note": "/data/out/metrics/x.csv",
        "scratch": f"{tempfile.gettempdir()}/tmpab12cd34/x",
    }
    lines = [str(p) for p in scan_paths(manifest, ["/data/out"])]
    assert lines == [
        "manifest.json: runs[1].checkpoint.uri holds an absolute path into the folder",
        "manifest.json: note holds an absolute path into the folder",
        "manifest.json: scratch holds a path into a temporary directory",
    ]


def test_a_folder_without_a_manifest_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(tmp_path)]) == 2
    assert "has no manifest.json" in capsys.readouterr().err
    (tmp_path / "manifest.json").write_text(json.dumps({"campaign_id": "x"}))
    with pytest.raises(NotACampaignFolder, match="holds no 'runs' list"):
        read_manifest(tmp_path)
    assert main(["verify", str(tmp_path / "nope")]) == 2


def test_an_unfinished_export_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    from ablations.verify.folder import verify_folder

    (tmp_path / "manifest.json").write_text(json.dumps({"campaign_id": "x", "runs": []}))
    lines = [str(p) for p in verify_folder(tmp_path).problems]
    assert "manifest.json: has no 'files': the results step did not finish" in lines
    assert "plan.yaml: missing: the registered plan is needed" in lines
    assert "ledger.db: missing" in lines


def test_a_ledger_that_is_not_a_database_is_one_line(tmp_path: Path) -> None:
    from ablations.verify.folder import verify_folder

    (tmp_path / "manifest.json").write_text(json.dumps({"campaign_id": "x", "runs": []}))
    (tmp_path / "ledger.db").write_bytes(b"SQLite format 3\x00"[::-1] * 64)  # reversed: garbage
    lines = [str(p) for p in verify_folder(tmp_path).problems if str(p).startswith("ledger.db")]
    assert lines == [
        "ledger.db: is damaged (file is not a database): SQLite cannot read it back; move it "
        "aside and rerun `ablate run` with the same plan and folder, which writes it again "
        "from the records"
    ]


def _row(run_id: str, uri: str, continues: str | None = None) -> ManifestRun:
    """A finished run's manifest row with a checkpoint URI (what the checkpoint check reads)."""
    return ManifestRun.model_validate(
        {
            **{"run_id": run_id, "variant": "control", "factor": None, "level": None},
            **{"seed": 0, "category": "essential", "phase": "main", "steps": 20, "params": {}},
            **{"status": "accepted", "continues": continues, "checkpoint": {"uri": uri}},
        }
    )


def test_an_unreachable_store_is_one_problem_not_one_per_run() -> None:
    from ablations.plan.model import parse_plan, plan_hash
    from ablations.verify.reload import check_checkpoint
    from tests.flows.conftest import TINY_PLAN
    from tests.s3_server import free_port

    data = json.loads(json.dumps(TINY_PLAN))
    data["checkpoint"] = {
        "store": "s3://bucket/p",
        "endpoint_url": f"http://127.0.0.1:{free_port()}",
    }
    plan = parse_plan(data)
    stores: dict[str, object] = {}
    lines = []
    for run_id in ("a", "b"):
        row = _row(run_id, f"s3://bucket/p/tiny/{run_id}/step-00000020")
        problems, _ = check_checkpoint(row, plan, "tiny", plan_hash(plan), stores=stores)
        lines += [str(p) for p in problems]
    assert len(lines) == 1 and lines[0].startswith(
        "s3://bucket/p: checkpoint store cannot be listed"
    )
    row = _row("a", "s3://other/p/tiny/a/step-00000020")
    [problem] = check_checkpoint(row, plan, "tiny", plan_hash(plan), stores=stores)[0]
    assert "outside the plan's store s3://bucket/p" in str(problem)


def test_a_pilots_checkpoint_is_its_main_runs_and_is_not_reopened() -> None:
    from ablations.plan.model import parse_plan, plan_hash
    from ablations.verify.reload import check_checkpoint
    from tests.flows.conftest import TINY_PLAN
    from tests.s3_server import free_port

    data = json.loads(json.dumps(TINY_PLAN))
    data["checkpoint"] = {
        "store": "s3://bucket/p",
        "endpoint_url": f"http://127.0.0.1:{free_port()}",
    }
    plan = parse_plan(data)
    uri = "s3://bucket/p/tiny/main-s0/step-00000020"
    pilot = _row("pilot-s0", uri, continues="main-s0")
    # Its main run's folder (which that run may have pruned since): no problem, no store opened.
    assert check_checkpoint(pilot, plan, "tiny", plan_hash(plan), stores={}) == ([], None)
    elsewhere = pilot.model_copy(update={"continues": "other-s0"})
    [problem] = check_checkpoint(elsewhere, plan, "tiny", plan_hash(plan), stores={})[0]
    assert "points elsewhere" in str(problem) and "tiny/other-s0/step-" in str(problem)
