"""A portable output folder: URIs into it are relative, verify flags what does not belong,
and a rerun removes its own leftover temporaries."""

from __future__ import annotations

from pathlib import Path

from ablations.campaign.folder import CampaignFolder
from ablations.campaign.state import (
    folder_uri,
    remove_leftover_temporaries,
    save_record,
)
from ablations.run.records import CheckpointSummary, RunRecord
from ablations.verify.layout import scan_layout, store_entry


def _record(uri: str) -> RunRecord:
    return RunRecord(
        run_id="r1", variant="control", seed=0, category="essential", phase="main",
        status="accepted", checkpoint=CheckpointSummary(uri=uri),
    )  # fmt: skip


def test_a_checkpoint_uri_inside_the_folder_is_saved_relative_to_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    inside = f"file://{out}/checkpoints/c/r1/step-00000010"
    save_record(out, _record(inside))
    record = CampaignFolder(out).record("r1")
    assert record is not None and record.checkpoint.uri == "file://checkpoints/c/r1/step-00000010"
    assert str(out) not in (out / "records" / "r1.json").read_text()


def test_stores_outside_the_folder_keep_their_uris(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for uri in (
        f"file://{tmp_path}/elsewhere/c/r1/step-00000010",
        f"file://{tmp_path}/out-sibling/c/r1/step-00000010",
        "s3://bucket/prefix/c/r1/step-00000010",
        "memory://x/c/r1/step-00000010",
    ):
        assert folder_uri(uri, out) == uri


def test_layout_flags_unexpected_hidden_files_and_links_but_not_the_lock_or_store(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    (out / "models").mkdir(parents=True)
    (out / "ckpt").mkdir()
    (out / ".lock").write_text("{}")
    (out / "manifest.json").write_text("{}")
    assert scan_layout(out, "file://./ckpt") == []
    (out / "notes.txt").write_text("mine")
    (out / ".hidden").write_text("")
    (tmp_path / "outside.pt").write_bytes(b"x")
    (out / "models" / "r1.pt").symlink_to(tmp_path / "outside.pt")
    lines = [str(p) for p in scan_layout(out, "file://./ckpt")]
    assert lines[0].startswith(".hidden: is not part of an output folder")
    assert lines[1].startswith("notes.txt: is not part of an output folder")
    assert lines[2].startswith(f"models/r1.pt: is a symbolic link (to {tmp_path}/outside.pt)")
    assert len(lines) == 3


def test_store_entry_is_the_relative_stores_top_folder() -> None:
    assert store_entry("file://./ckpt") == "ckpt"
    assert store_entry("file://checkpoints/deep") == "checkpoints"
    assert store_entry("file:///abs/ckpt") is None
    assert store_entry("file://../outside") is None
    assert store_entry("s3://bucket/x") is None


def test_a_rerun_removes_leftover_temporaries_and_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "metrics").mkdir(parents=True)
    (out / "ckpt").mkdir()
    leftovers = [out / "metrics" / ".r1-steps.csv.123.tmp", out / ".manifest.json.abc.tmp"]
    kept = [out / "metrics" / "r1-steps.csv", out / "ckpt" / ".upload.tmp"]  # the store's own
    for path in leftovers + kept:
        path.write_text("x")
    assert sorted(remove_leftover_temporaries(out)) == sorted(leftovers)
    assert all(p.exists() for p in kept) and not any(p.exists() for p in leftovers)


def test_a_rerun_removes_what_a_killed_store_check_left_in_its_own_store(tmp_path: Path) -> None:
    from ablations.checkpoint.store import CHECK_PREFIX

    out, outside = tmp_path / "out", tmp_path / "shared"
    for store in (out / "ckpt", outside):
        store.mkdir(parents=True)
        (store / f".{CHECK_PREFIX}1f2e.c4e5db37.tmp").write_text("o")  # killed mid-write
        (store / f"{CHECK_PREFIX}9a8b").write_text("ok")  # killed before the delete
        (store / "campaign").mkdir()
    left = sorted(p.name for p in (out / "ckpt").iterdir() if p.is_file())
    removed = remove_leftover_temporaries(out, "file://ckpt")
    assert sorted(p.name for p in removed) == left and len(left) == 2
    assert [p.name for p in (out / "ckpt").iterdir()] == ["campaign"]
    # a store outside the folder may be another campaign's, checking right now: never swept
    assert remove_leftover_temporaries(out, f"file://{outside}") == []
    assert len(list(outside.iterdir())) == 3


def test_the_store_check_leaves_nothing_behind(tmp_path: Path) -> None:
    from ablations.checkpoint.store import open_store
    from ablations.plan.infrastructure import CheckpointSection

    open_store(CheckpointSection(store=f"file://{tmp_path}/ckpt"))  # checks by default
    assert list((tmp_path / "ckpt").rglob("*")) == []


def test_a_moved_folder_runs_its_runs_where_it_is_now(tmp_path: Path) -> None:
    import yaml

    from ablations.campaign.campaign import Campaign
    from ablations.campaign.opening import register
    from ablations.campaign.specs import spec_for
    from tests.flows.conftest import TINY_PLAN

    plan = {**TINY_PLAN, "checkpoint": {"store": "file://checkpoints"}}
    register(yaml.safe_dump(plan), tmp_path / "before")
    moved = tmp_path / "after"
    (tmp_path / "before").rename(moved)
    campaign = Campaign.load(moved)
    run = campaign.phase("pilot")[0]
    spec = spec_for(campaign.plan, campaign.registration, run)
    assert spec.out_dir == str(moved)
    assert spec.checkpoint is not None and spec.checkpoint.store == f"file://{moved}/checkpoints"
