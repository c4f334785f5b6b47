"""Fenced work-pool attempts, without a server: the host side run twice for one run.

Attempt 1 pauses mid-run (a paused host); the campaign declares it lost and accepts attempt 2,
which resumes from attempt 1's checkpoint and finishes. Then attempt 1 wakes up and runs on.
Nothing it does afterwards may reach the store's committed state or the output folder, and the
accepted attempt's record, outputs and final checkpoint must be what a clean run gives.
"""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from ablations.checkpoint import fence, open_store
from ablations.pool.attempts import accepted_result, run_on_host
from ablations.run.records import RunRecord, RunSpec
from flows.pool import PoolExecutor, PoolSettings
from tests.faults.workloads import PAUSE
from tests.flows.conftest import plan_text

PAUSED_AT = 25  # after the commit of step 20, before the one of step 30


def _registered_spec(tmp_path: Path, tiny_plan: dict[str, Any]) -> RunSpec:
    from ablations.campaign.campaign import Campaign
    from ablations.campaign.opening import register
    from ablations.campaign.specs import spec_for

    tiny_plan["workload"].update(steps=60, entry="tests.faults.workloads:FaultDigits")
    tiny_plan["checkpoint"] = {"store": f"file://{tmp_path / 'store'}", "interval": {"steps": 10}}
    registration = register(plan_text(tiny_plan), tmp_path / "out")
    campaign = Campaign.load(Path(registration.out_dir))
    run = campaign.phase("main")[0]
    spec = spec_for(campaign.plan, campaign.registration, run)
    return spec.model_copy(update={"resume_step": 0})  # no pilot ran: resume from attempts only


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _training_state(step_folder: Path) -> tuple[bytes, dict[str, Any]]:
    """model.pt's bytes, and state.pt without its wall-clock step times."""
    state = torch.load(io.BytesIO((step_folder / "state.pt").read_bytes()), weights_only=True)
    state["history"].pop("step_seconds")
    return (step_folder / "model.pt").read_bytes(), state


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


def _step_folder(store_root: Path, record: RunRecord) -> Path:
    assert record.checkpoint.uri is not None
    return store_root / record.checkpoint.uri.split("/store/", 1)[1]


def test_a_late_attempt_declared_lost_commits_nothing_and_the_accepted_one_is_clean(
    tmp_path: Path,
    tiny_plan: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = _registered_spec(tmp_path, tiny_plan)
    assert spec.checkpoint is not None
    monkeypatch.setenv("ABLATE_DEVICES", "2")  # two CPU slots: both attempts at once
    monkeypatch.setenv("ABLATE_HOST", "host-x")
    monkeypatch.setenv("ABLATE_SLOT_DIR", str(tmp_path / "slots"))

    # The reference: the same run, one attempt, nothing in its way, in a store of its own.
    clean_root = tmp_path / "clean" / "store"
    clean_section = spec.checkpoint.model_copy(update={"store": f"file://{clean_root}"})
    clean_spec = spec.model_copy(update={"checkpoint": clean_section})
    fence.accept(open_store(clean_section, check=False), "tiny", spec.run_id, "1-clean")
    clean = RunRecord.model_validate_json(run_on_host(clean_spec, "run", None, "1-clean"))

    store_root = tmp_path / "store"
    store = open_store(spec.checkpoint, check=False)
    run_root = store_root / "tiny" / spec.run_id
    paused, go = tmp_path / "paused", tmp_path / "go"
    monkeypatch.setenv(PAUSE, f"{PAUSED_AT}:{paused}:{go}")

    fence.accept(store, "tiny", spec.run_id, "1-late")
    late: dict[str, Any] = {}

    def late_attempt() -> None:
        try:
            late["reply"] = run_on_host(spec, "run", None, "1-late")
        except Exception as exc:  # what the flow run of the late attempt would end with
            late["error"] = exc

    thread = threading.Thread(target=late_attempt)
    thread.start()
    late_commit = run_root / "attempts" / "1-late" / "step-00000020" / "COMMIT.json"
    deadline = time.monotonic() + 120
    while not (paused.exists() and late_commit.exists()):
        assert time.monotonic() < deadline and thread.is_alive(), late
        time.sleep(0.05)

    # The campaign declares attempt 1 lost and accepts attempt 2, which runs to the end.
    fence.accept(store, "tiny", spec.run_id, "2-accepted")
    accepted = RunRecord.model_validate_json(run_on_host(spec, "run", None, "2-accepted"))
    assert accepted.checkpoint.resumed_from_step == 20  # from the lost attempt's commit
    committed = {k: v for k, v in _files(run_root).items() if not k.startswith("attempts/1-late/")}

    go.touch()  # attempt 1 wakes up and carries on
    thread.join(timeout=120)
    assert not thread.is_alive()

    assert isinstance(late.get("error"), fence.SupersededAttempt), late
    log = capsys.readouterr().out
    assert "result not committed" in log and "declared lost" in log
    assert {k: v for k, v in _files(run_root).items() if not k.startswith("attempts/1-late/")} == (
        committed
    )
    late_files = _files(run_root / "attempts" / "1-late")
    assert not any(k.startswith("outputs/") for k in late_files)  # no result, no outputs
    assert {k.split("/")[0] for k in late_files if k.endswith("COMMIT.json")} == {
        "step-00000010",
        "step-00000020",
    }  # nothing committed after it was declared lost

    # The campaign's side reads the accepted attempt only, into the output folder.
    known = accepted_result(store, spec)
    assert known is not None and known.attempt == "2-accepted"
    brought = PoolExecutor(PoolSettings("gpus"), []).run(spec)  # finds it: submits nothing
    assert brought == accepted
    assert accepted.steps_done == clean.steps_done == 60
    assert accepted.metrics == clean.metrics and accepted.evaluations == clean.evaluations
    assert json.loads(accepted.model_dump_json())["status"] == clean.status

    # Bitwise what the clean run gives: the final checkpoint and the exported outputs.
    final = _step_folder(store_root, accepted)
    assert final.parent.name == "2-accepted" and final.name == "step-00000060"
    model, state = _training_state(final)
    clean_model, clean_state = _training_state(_step_folder(clean_root, clean))
    assert model == clean_model and _same(state, clean_state)
    assert accepted.artifacts and accepted.artifacts.keys() == clean.artifacts.keys()
    out = Path(str(spec.out_dir))
    clean_out = clean_root / "tiny" / spec.run_id / "attempts" / "1-clean" / "outputs"
    for name, relative in accepted.artifacts.items():
        if name != "metrics":  # its step times are wall-clock
            assert (out / relative).read_bytes() == (clean_out / relative).read_bytes(), name

    # `ablate verify` reopens the accepted attempt's checkpoint where the record names it.
    from ablations.campaign.campaign import Campaign
    from ablations.campaign.manifest import ManifestRun
    from ablations.verify.reload import check_checkpoint

    campaign = Campaign.load(out)
    planned = campaign.run(accepted.run_id)
    recorded = {k: v for k, v in accepted if k not in ("variant", "seed", "category", "phase")}
    row = ManifestRun(**{**dict(planned), **recorded, "artifacts": []})
    plan = campaign.plan
    assert check_checkpoint(row, plan, "tiny", spec.plan_hash, stores={}) == ([], None)


def test_a_run_whose_attempts_were_all_lost_fails_for_the_infrastructure_and_a_rerun_resubmits(
    prefect_server: None, tmp_path: Path, tiny_plan: dict[str, Any]
) -> None:
    """No worker: every flow run is reported Crashed (as Prefect does for a lost host)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.states import Crashed

    from flows.run import one_run

    pool = f"lost-{tmp_path.name[-12:]}".lower().replace("_", "-")
    with get_client(sync_client=True) as client:
        client.create_work_pool(WorkPoolCreate(name=pool, type="process"))
        deployment = client.create_deployment(
            flow_id=client.create_flow(one_run),
            name=pool,
            work_pool_name=pool,
            entrypoint="flows/run.py:one_run",
        )
    only_ours = DeploymentFilter(id=DeploymentFilterId(any_=[deployment]))
    done = threading.Event()

    def host_lost() -> None:  # every submitted attempt crashes before it starts
        with get_client(sync_client=True) as client:
            while not done.is_set():
                for flow_run in client.read_flow_runs(deployment_filter=only_ours):
                    if flow_run.state is not None and not flow_run.state.is_final():
                        client.set_flow_run_state(flow_run.id, Crashed(message="host lost"))
                time.sleep(0.2)

    spec = _registered_spec(tmp_path, tiny_plan)
    runner = PoolExecutor(PoolSettings(pool, attempts=2, poll_s=0.2), [])
    crasher = threading.Thread(target=host_lost, daemon=True)
    crasher.start()
    try:
        first = runner.run(spec)
        rerun = runner.run(spec)  # what `ablate run` does again for a run lost this way
    finally:
        done.set()
        crasher.join(timeout=30)

    for record in (first, rerun):
        assert record.status == "failed" and record.lost, record
        assert record.error is not None and record.error.cause == "infrastructure"
        assert "2 attempts" in record.error.message and "rerun" in record.error.message
    with get_client(sync_client=True) as client:
        submitted = client.read_flow_runs(deployment_filter=only_ours)
    # The rerun submitted fresh attempts, not the lost ones back by their idempotency keys.
    assert len(submitted) == 4
    attempts = {flow_run.parameters["attempt"] for flow_run in submitted}
    assert len(attempts) == 4
    assert spec.checkpoint is not None
    store = open_store(spec.checkpoint, check=False)
    assert fence.accepted(store, "tiny", spec.run_id) in attempts
