"""The store protocol on its three backends, and clear errors before any training."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ablations.checkpoint import FsspecStore, Store, open_store
from ablations.errors import StoreError
from ablations.plan.infrastructure import CheckpointSection
from tests.s3_server import BUCKET, free_port


@pytest.fixture(params=["file", "memory", "s3"])
def section(request: pytest.FixtureRequest, tmp_path: Path) -> CheckpointSection:
    if request.param == "file":
        return CheckpointSection(store=f"file://{tmp_path}/store")
    if request.param == "memory":
        return CheckpointSection(store=f"memory://store-{tmp_path.name}")
    endpoint = request.getfixturevalue("s3_endpoint")
    return CheckpointSection(store=f"s3://{BUCKET}/{tmp_path.name}", endpoint_url=endpoint)


def test_round_trip_list_and_delete(section: CheckpointSection) -> None:
    store = open_store(section)
    assert isinstance(store, Store)
    store.put("a/step-1/x.pt", b"\x00" * 10)
    store.put("a/step-1/y.pt", b"yy")
    store.put("b/z", b"z")
    assert store.get("a/step-1/y.pt") == b"yy"
    assert store.keys("a") == ["a/step-1/x.pt", "a/step-1/y.pt"]
    store.put("a/step-1/y.pt", b"replaced")
    assert store.get("a/step-1/y.pt") == b"replaced"
    store.delete("a")
    assert store.keys("a") == []
    assert store.keys("b") == ["b/z"]
    assert store.uri("b/z").endswith("/b/z") and store.uri("b/z").startswith(section.store[:5])
    with pytest.raises(StoreError, match=r"cannot read .*missing"):
        store.get("missing")


@pytest.mark.parametrize(
    "make",
    [
        # nothing listens on a fresh free port: connection refused
        lambda tmp: CheckpointSection(
            store="s3://ablate-test/x", endpoint_url=f"http://127.0.0.1:{free_port()}"
        ),
        # the store path lies under a regular file: cannot create it
        lambda tmp: CheckpointSection(store=f"file://{tmp}/a-file/store"),
    ],
    ids=["s3-unreachable", "file-not-writable"],
)
def test_unusable_store_fails_before_training(
    make: Callable[[Path], CheckpointSection], tmp_path: Path, s3_endpoint: str
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(StoreError, match="is not usable \\(checked before any training\\)"):
        open_store(make(tmp_path))


def test_missing_bucket_is_a_clear_error(s3_endpoint: str) -> None:
    section = CheckpointSection(store="s3://no-such-bucket/x", endpoint_url=s3_endpoint)
    with pytest.raises(StoreError, match="s3://no-such-bucket/x is not usable"):
        open_store(section)


def test_file_store_root_is_fixed_when_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    store = open_store(CheckpointSection(store="file://./ckpt"))
    monkeypatch.chdir("/")
    store.put("k", b"v")
    assert (tmp_path / "ckpt" / "k").read_bytes() == b"v"
    assert isinstance(store, FsspecStore) and store.url == f"file://{tmp_path}/ckpt"


@pytest.mark.parametrize(
    ("store", "placed"),
    [
        ("file://checkpoints", "file:///runs/camp/checkpoints"),
        ("file://./ckpt/../ckpt2", "file:///runs/camp/ckpt2"),
        ("file:///data/ckpt", "file:///data/ckpt"),
        ("s3://bucket/prefix", "s3://bucket/prefix"),
        ("memory://name", "memory://name"),
    ],
)
def test_a_relative_file_store_lives_in_the_output_folder(store: str, placed: str) -> None:
    assert CheckpointSection(store=store).in_folder("/runs/camp").store == placed


def test_run_specs_place_the_store_in_the_campaign_folder(tmp_path: Path) -> None:
    from ablations.campaign.folder import Registration
    from ablations.campaign.specs import spec_for
    from ablations.plan.io import load_plan
    from ablations.plan.runs import planned_runs
    from tests.conftest import ROOT

    plan = load_plan(ROOT / "ablations" / "recipes" / "demo.yaml", workload="skip")
    out = tmp_path / "out"
    registration = Registration(
        campaign_id=plan.campaign.id,
        plan_hash="h" * 64,
        out_dir=str(out),
        registered_at=0.0,
    )
    spec = spec_for(plan, registration, planned_runs(plan, "h" * 64)[0])
    assert spec.checkpoint is not None and spec.checkpoint.store == f"file://{out}/checkpoints"


def test_a_local_store_writes_whole_objects_in_the_folders_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local store is often inside the output folder (`file://checkpoints`): its objects go
    through the folder's atomic writer, so a failed write leaves the old object or none (never
    a truncated one, nor a temporary), with the mode every file of the folder has."""
    import os
    import stat

    from tests.file_modes import umask

    store = open_store(CheckpointSection(store=f"file://{tmp_path}/store"))
    with umask(0o002) as expected:
        store.put("c/r/step-00000010/model.pt", b"weights")
    written = tmp_path / "store" / "c" / "r" / "step-00000010" / "model.pt"
    assert stat.S_IMODE(written.stat().st_mode) == expected

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StoreError, match=r"cannot write .*model.pt.*No space left"):
        store.put("c/r/step-00000010/model.pt", b"other weights")
    with pytest.raises(StoreError, match="No space left"):
        store.put("c/r/step-00000010/state.pt", b"state")
    monkeypatch.undo()
    assert store.get("c/r/step-00000010/model.pt") == b"weights"
    assert store.keys("c") == ["c/r/step-00000010/model.pt"]  # no state.pt, no temporary


@pytest.mark.parametrize("planted", ["c", "c/r", "c/r/step-00000010/model.pt"])
def test_a_local_store_never_writes_through_a_link_below_its_root(
    tmp_path: Path, planted: str
) -> None:
    """A link planted below a local store's root (`checkpoints/<campaign>` pointing at another
    folder) is refused at the write, no window between a check and the open: nothing lands
    where it points. A link at the object's own name is replaced, never written through."""
    from ablations.errors import UntrustedObject

    store = open_store(CheckpointSection(store=f"file://{tmp_path}/store"))
    outside = tmp_path / "outside"
    outside.mkdir()
    link = tmp_path / "store" / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside / "target")
    if planted.endswith(".pt"):
        store.put("c/r/step-00000010/model.pt", b"weights")
        assert not link.is_symlink() and link.read_bytes() == b"weights"
    else:
        with pytest.raises(UntrustedObject, match=f"symbolic link .*{planted}"):
            store.put("c/r/step-00000010/model.pt", b"weights")
    assert not list(outside.iterdir())
