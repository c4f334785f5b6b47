"""Objects in a work pool's shared store are untrusted input: forged ones never reach the folder.

Each test plants what someone with write access to the store prefix could write (a record, a
result envelope, artifacts, the accepted pointer, a heartbeat) and reads it back the way the
campaign does (`PoolExecutor.run`), on a `file://` store and on a real S3 protocol server.
`attempts=0`: nothing is submitted, so only what is already in the store is read.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ablations.campaign.folder import CampaignFolder
from ablations.checkpoint import commit, fence
from ablations.checkpoint.commit import Identity
from ablations.checkpoint.store import FsspecStore, open_store
from ablations.errors import OutsideFolder, RefusedCheckpoint
from ablations.plan.infrastructure import CheckpointSection
from ablations.pool.attempts import attempt_prefix, result_key
from ablations.pool.trust import Liveness, artifact_names, seal
from ablations.run.records import RunSpec
from ablations.security.signing import SIGNING_KEY_ENV
from flows.pool import PoolExecutor, PoolSettings
from tests.s3_server import BUCKET
from tests.specs import bare_spec

ATTEMPT = "1-0123456789ab"
RUN_ID = "control-s0-0123456789"


def _spec(section: CheckpointSection, out: Path) -> RunSpec:
    return bare_spec(
        run_id=RUN_ID, campaign_id="trust", plan_hash="h" * 64, variant="control",
        category="essential", phase="main", seed=0, params={"width": 8}, steps=10,
        eval_every=5, entry="ablations.workloads.digits:DigitsWorkload", metric="accuracy",
        threshold=0.5, checkpoint=section, out_dir=str(out),
    )  # fmt: skip


STEPS_CSV = b"step,loss\n"


def _record(**changes: Any) -> dict[str, Any]:
    """The record a host leaves, its export hashed in it (`export_sha256`)."""
    steps = artifact_names(RUN_ID)["steps"]
    record = {
        "run_id": RUN_ID, "variant": "control", "seed": 0, "category": "essential",
        "phase": "main", "status": "accepted", "metrics": {"accuracy": 1.0}, "steps_done": 10,
        "artifacts": {"steps": steps},
        "export_sha256": {steps: hashlib.sha256(STEPS_CSV).hexdigest()},
    }  # fmt: skip
    return {**record, **changes}


@pytest.fixture(params=["file", "s3"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> RunSpec:
    if request.param == "file":
        section = CheckpointSection(store=f"file://{tmp_path / 'store'}")
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        prefix = f"s3://{BUCKET}/{request.node.name.replace('[', '-').strip(']')}"
        section = CheckpointSection(store=prefix, endpoint_url=endpoint)
    (tmp_path / "out").mkdir()
    return _spec(section, tmp_path / "out")


def _store(spec: RunSpec) -> FsspecStore:
    assert spec.checkpoint is not None
    return open_store(spec.checkpoint, check=False)


Plant = Callable[..., None]


def _forge(store: FsspecStore) -> Callable[[str, bytes], None]:
    """A forger's own writes: the filesystem's, not the store's `put`, which refuses keys
    that lead out of its root (the forger's tools do not)."""
    return lambda key, data: store.fs.pipe_file(f"{store.root}/{key}", data)


@pytest.fixture
def plant(spec: RunSpec) -> Plant:
    """Write an accepted pointer, a result and artifacts as a forger would (no key)."""

    def write(
        record: dict[str, Any] | None = None,
        envelope: bytes | None = None,
        artifacts: dict[str, bytes] | None = None,
        attempt: str = ATTEMPT,
    ) -> None:
        store = _store(spec)
        fence.accept(store, spec.campaign_id, spec.run_id, attempt)
        if envelope is None:
            envelope = seal(spec, "run", attempt, json.dumps(record or _record()))
        forge = _forge(store)
        forge(result_key(spec, attempt), envelope)
        outputs = f"{attempt_prefix(spec, attempt)}/outputs"
        for relative, data in (artifacts or {artifact_names(RUN_ID)["steps"]: STEPS_CSV}).items():
            forge(f"{outputs}/{relative}", data)

    return write


def _run(spec: RunSpec) -> Any:
    return PoolExecutor(PoolSettings("gpus", attempts=0), []).run(spec)


def test_a_result_that_answers_its_spec_is_taken_with_its_artifacts(
    spec: RunSpec, plant: Plant
) -> None:
    plant()
    record = _run(spec)
    assert record.status == "accepted" and record.metrics == {"accuracy": 1.0}
    copied = Path(str(spec.out_dir)) / artifact_names(RUN_ID)["steps"]
    assert copied.read_bytes() == b"step,loss\n"


@pytest.mark.parametrize(
    ("forged", "named"),
    [
        ({"run_id": "another-run"}, "run_id 'another-run'"),
        ({"run_id": "../../x"}, "run_id '../../x'"),
        ({"variant": "width=64"}, "variant 'width=64'"),
        ({"seed": 7}, "seed 7"),
        ({"phase": "pilot"}, "phase 'pilot'"),
    ],
)
def test_a_record_of_another_run_is_a_failure_that_says_so(
    spec: RunSpec, plant: Plant, forged: dict[str, Any], named: str
) -> None:
    plant(_record(**forged))
    record = _run(spec)
    assert record.status == "failed" and record.error is not None
    assert record.error.type == "UntrustedResult" and named in record.error.message
    assert record.metrics == {} and not list(Path(str(spec.out_dir)).rglob("*.csv"))


@pytest.mark.parametrize("field", ["campaign_id", "plan_hash", "run_id", "attempt", "kind"])
def test_an_envelope_for_another_campaign_plan_or_attempt_is_refused(
    spec: RunSpec, plant: Plant, field: str
) -> None:
    envelope = json.loads(seal(spec, "run", ATTEMPT, json.dumps(_record())))
    envelope[field] = "other"
    plant(envelope=json.dumps(envelope).encode())
    record = _run(spec)
    assert record.status == "failed" and record.error is not None
    assert f"{field} 'other'" in record.error.message and "result.json" in record.error.message


def test_artifacts_with_absolute_or_escaping_paths_are_never_written(
    spec: RunSpec, plant: Plant, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    escaping = {"steps": str(victim), "model": "../../victim2.txt"}
    plant(_record(artifacts=escaping), artifacts={str(victim): b"pwned", "../../v2": b"x"})
    record = _run(spec)
    assert record.status == "failed" and record.error is not None
    assert "artifact 'steps' at '/tmp" in record.error.message
    assert "expected 'metrics/" in record.error.message
    assert not victim.exists() and not (tmp_path / "victim2.txt").exists()


def test_an_accepted_pointer_naming_an_escaping_attempt_is_not_followed(
    spec: RunSpec, plant: Plant
) -> None:
    plant(attempt="../../elsewhere")
    assert fence.accepted(_store(spec), spec.campaign_id, spec.run_id) is None
    record = _run(spec)  # nothing accepted: an attempt would be submitted (none here)
    assert record.status == "failed" and record.error is not None
    assert record.error.type == "WorkerLost" and record.metrics == {}


def test_an_oversized_result_is_never_read_whole(spec: RunSpec, plant: Plant) -> None:
    plant(envelope=b" " * (16 << 20) + b"{}")
    record = _run(spec)
    assert record.status == "failed" and record.metrics == {}


def test_with_a_signing_key_unsigned_and_wrongly_signed_results_are_refused(
    spec: RunSpec, plant: Plant, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant()  # written without a key: an unsigned pointer, an unsigned result
    monkeypatch.setenv(SIGNING_KEY_ENV, "campaign-secret")
    assert fence.accepted(_store(spec), spec.campaign_id, spec.run_id) is None  # names none
    record = _run(spec)
    assert record.error is not None and record.error.type == "WorkerLost"
    fence.accept(_store(spec), spec.campaign_id, spec.run_id, ATTEMPT)  # the campaign's own
    record = _run(spec)
    assert record.status == "failed" and record.error is not None
    assert record.error.type == "UntrustedResult"
    assert "not signed" in record.error.message and "result.json" in record.error.message

    monkeypatch.setenv(SIGNING_KEY_ENV, "a-forgers-guess")
    plant()  # signed, with the wrong key (the pointer too)
    monkeypatch.setenv(SIGNING_KEY_ENV, "campaign-secret")
    assert fence.accepted(_store(spec), spec.campaign_id, spec.run_id) is None
    fence.accept(_store(spec), spec.campaign_id, spec.run_id, ATTEMPT)
    record = _run(spec)
    assert record.error is not None and "signature does not match" in record.error.message

    plant()  # signed with the campaign's key: taken
    assert _run(spec).status == "accepted"


def test_with_a_signing_key_an_unsigned_commit_record_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(CheckpointSection(store=f"file://{tmp_path}"), check=False)
    identity = Identity("trust", RUN_ID, "h" * 64)
    commit.write(store, identity, 5, {"model.pt": b"weights"})  # no key: unsigned
    monkeypatch.setenv(SIGNING_KEY_ENV, "campaign-secret")
    with pytest.raises(RefusedCheckpoint, match=r"step-00000005/COMMIT.json: not signed"):
        commit.read(store, identity, 5)
    commit.write(store, identity, 6, {"model.pt": b"weights"})  # signed now
    assert commit.read(store, identity, 6) == {"model.pt": b"weights"}
    record = json.loads(store.get(f"{commit.step_key(identity, 6)}/COMMIT.json"))
    record["step"] = 6
    record["objects"]["model.pt"]["size"] = 7  # any edit breaks the signature
    record["run_id"] = "other"
    store.put(f"{commit.step_key(identity, 6)}/COMMIT.json", json.dumps(record).encode())
    with pytest.raises(RefusedCheckpoint, match="signature does not match"):
        commit.read(store, identity, 6)


def test_a_heartbeat_without_progress_does_not_keep_an_attempt_alive() -> None:
    liveness = Liveness(heartbeat_timeout_s=60, progress_timeout_s=600)
    assert liveness.observe(0, running=False, beat=None, progress=None) == ""  # queued
    lost = ""
    for second in range(0, 1200, 5):  # a beat that changes every time, a step that never does
        lost = liveness.observe(second, running=True, beat=f"beat {second}", progress=40)
        if lost:
            break
    assert second == 605 and "no progress for 600 s (still at step 40" in lost

    liveness = Liveness(heartbeat_timeout_s=60, progress_timeout_s=600)
    for second in range(0, 3000, 5):  # real progress: alive however long it runs
        assert liveness.observe(second, True, f"beat {second}", second // 300) == ""
    assert "no heartbeat for 60 s" in liveness.observe(3100, True, "beat 2995", 9)


def test_an_unreadable_beat_is_neither_a_fresh_heartbeat_nor_forgets_the_host() -> None:
    liveness = Liveness(heartbeat_timeout_s=60, progress_timeout_s=600)
    assert liveness.observe(0, running=True, beat='{"host": "gpu-1"}', progress=None) == ""
    for second in range(5, 60, 5):  # read mid-write: every other beat cannot be parsed
        beat = None if second % 10 else f'{{"host": "gpu-1", "beat": {second}}}'
        assert liveness.observe(second, True, beat, progress=second) == ""
        assert liveness.beat is not None and "gpu-1" in liveness.beat
    for second in range(60, 200, 5):  # the host went away: only failed reads from now on
        lost = liveness.observe(second, True, None, progress=second)
        if lost:
            break
    assert second == 115 and "no heartbeat for 60 s" in lost


def test_every_write_of_the_folder_refuses_a_path_that_leads_out(tmp_path: Path) -> None:
    folder = CampaignFolder(tmp_path / "out")
    (tmp_path / "out").mkdir()
    for name in ("../x.json", "/tmp/x.json", "records/../../x.json"):
        with pytest.raises(OutsideFolder, match="outside the campaign folder"):
            folder.write_bytes(name, b"x")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out" / "records").symlink_to(tmp_path / "elsewhere")  # a planted link
    with pytest.raises(OutsideFolder):
        folder.record_path("control-s0-1")
    assert not list((tmp_path / "elsewhere").iterdir())


def test_a_pool_host_with_an_allow_list_refuses_other_workloads_before_import(
    spec: RunSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ablations.errors import WorkloadError
    from ablations.pool.attempts import run_on_host

    monkeypatch.setenv("ABLATE_ALLOW_ENTRY", "mypkg")
    monkeypatch.setenv("ABLATE_SLOT_DIR", str(tmp_path / "slots"))
    foreign = spec.with_workload(entry="os:system")
    with pytest.raises(WorkloadError, match="'os:system' is not on this server's allow-list"):
        run_on_host(foreign, "run", None, attempt=ATTEMPT)
    assert not (tmp_path / "slots").exists()  # refused before a slot was leased


def test_an_export_whose_bytes_differ_from_the_signed_hash_is_refused_and_not_kept(
    spec: RunSpec, plant: Plant
) -> None:
    steps = artifact_names(RUN_ID)["steps"]
    evals = artifact_names(RUN_ID)["evals"]
    genuine = _record(
        artifacts={"steps": steps, "evals": evals},
        export_sha256={
            steps: hashlib.sha256(STEPS_CSV).hexdigest(),
            evals: hashlib.sha256(b"step,accuracy\n10,1.0\n").hexdigest(),
        },
    )
    # the steps file is the host's; the evaluations were swapped in the store afterwards
    plant(genuine, artifacts={steps: STEPS_CSV, evals: b"step,accuracy\n10,0.5\n"})
    record = _run(spec)
    assert record.status == "failed" and record.error is not None
    assert record.error.type == "UntrustedResult"
    assert (
        f"{evals} has sha256" in record.error.message and "the result says" in record.error.message
    )
    assert not list(Path(str(spec.out_dir)).rglob("*.csv"))  # the steps file is not kept either


def test_a_record_without_the_hashes_of_its_exports_is_refused(spec: RunSpec, plant: Plant) -> None:
    plant(_record(export_sha256={}))
    record = _run(spec)
    assert record.error is not None and record.error.type == "UntrustedResult"
    assert "names no sha256" in record.error.message


@pytest.mark.parametrize("link", ["file", "folder"])
def test_an_export_planted_as_a_symbolic_link_is_never_followed(
    tmp_path: Path, plant: Plant, link: str
) -> None:
    """A shared `file://` store: an export that is a link to a secret of the campaign's
    machine (or a folder of exports linked elsewhere) is refused, its target never read."""
    section = CheckpointSection(store=f"file://{tmp_path / 'store'}")
    spec = _spec(section, tmp_path / "out")
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "id_rsa").write_text("-----BEGIN PRIVATE KEY-----\n")
    steps = artifact_names(RUN_ID)["steps"]
    _plant_for(spec)(
        _record(export_sha256={steps: hashlib.sha256(b"-----BEGIN PRIVATE KEY-----\n").hexdigest()})
    )
    outputs = tmp_path / "store" / attempt_prefix(spec, ATTEMPT) / "outputs"
    if link == "file":
        (outputs / steps).unlink()
        (outputs / steps).symlink_to(secret / "id_rsa")
    else:  # the whole metrics folder: the file's own name is right, a folder above is a link
        shutil.rmtree(outputs / "metrics")
        (secret / Path(steps).name).write_text("-----BEGIN PRIVATE KEY-----\n")
        (outputs / "metrics").symlink_to(secret)
    record = _run(spec)
    assert record.status == "failed" and record.error is not None
    assert record.error.type == "UntrustedResult" and "is a symbolic link" in record.error.message
    assert not (tmp_path / "out" / steps).exists()


def _plant_for(spec: RunSpec) -> Plant:
    """`plant` for a spec made in the test (the fixture's is parametrized by store)."""

    def write(record: dict[str, Any]) -> None:
        store = _store(spec)
        fence.accept(store, spec.campaign_id, spec.run_id, ATTEMPT)
        store.put(result_key(spec, ATTEMPT), seal(spec, "run", ATTEMPT, json.dumps(record)))
        steps = artifact_names(RUN_ID)["steps"]
        store.put(f"{attempt_prefix(spec, ATTEMPT)}/outputs/{steps}", STEPS_CSV)

    return write


def test_a_pointer_moved_back_to_an_older_signed_attempt_is_refused(
    spec: RunSpec, plant: Plant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two genuinely signed results (the older attempt 0.50, the accepted one 0.95): the
    pointer put back to the older one names an attempt that is not the only one with a
    result, so neither is taken and the run gets a fresh attempt (none here: attempts=0)."""
    monkeypatch.setenv(SIGNING_KEY_ENV, "campaign-secret")
    older, newer = "1-0000000000aa", "2-0000000000bb"
    plant(_record(metrics={"accuracy": 0.50}), attempt=older)
    plant(_record(metrics={"accuracy": 0.95}), attempt=newer)  # accepted last
    fence.accept(_store(spec), spec.campaign_id, spec.run_id, older)  # moved back (a replay)
    record = _run(spec)
    assert record.status == "failed" and record.error is not None
    assert record.error.type == "UntrustedResult" and record.error.cause == "infrastructure"
    assert f"names attempt {older}, but attempt(s) {newer} left a result too" in (
        record.error.message
    )
    assert record.metrics == {}


def test_a_signed_pointer_copied_from_another_run_names_no_attempt(
    spec: RunSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SIGNING_KEY_ENV, "campaign-secret")
    store = _store(spec)
    fence.accept(store, spec.campaign_id, "other-run", ATTEMPT)
    copied = store.get(f"{spec.campaign_id}/other-run/accepted.json")
    store.put(f"{spec.campaign_id}/{spec.run_id}/accepted.json", copied)
    assert fence.accepted(store, spec.campaign_id, "other-run") == ATTEMPT
    assert fence.accepted(store, spec.campaign_id, spec.run_id) is None


def test_a_pool_host_refuses_a_store_or_a_length_its_operator_does_not_allow(
    spec: RunSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ablations.errors import InputError
    from ablations.pool.attempts import run_on_host

    monkeypatch.setenv("ABLATE_SLOT_DIR", str(tmp_path / "slots"))
    monkeypatch.setenv("ABLATE_ALLOW_STORE", "s3://somewhere-else/prefix")
    with pytest.raises(InputError, match="is outside what this server allows"):
        run_on_host(spec, "run", None, attempt=ATTEMPT)
    monkeypatch.delenv("ABLATE_ALLOW_STORE")
    monkeypatch.setenv("ABLATE_MAX_STEPS", "5")
    with pytest.raises(InputError, match="10 steps, above the 5 this host allows"):
        run_on_host(spec, "run", None, attempt=ATTEMPT)
    assert not (tmp_path / "slots").exists()  # refused before a slot was leased
