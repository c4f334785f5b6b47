"""The work-pool mode's parts that need no server: refusals, slot counts, the worker side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ablations.cli import main
from ablations.errors import AblationError, InputError
from ablations.plan.infrastructure import CheckpointSection, ResourcesSection
from ablations.pool.attempts import require_shared_store, run_on_host
from flows.pool import PoolSettings, pool_slots
from tests.ablations.cli.test_main import ablate
from tests.flows.conftest import plan_text


def test_a_pool_needs_a_store_every_host_reaches() -> None:
    with pytest.raises(AblationError, match="needs a checkpoint section"):
        require_shared_store(None)
    with pytest.raises(AblationError, match=r"'memory://x' lives in one process.*s3://"):
        require_shared_store(CheckpointSection(store="memory://x"))
    require_shared_store(CheckpointSection(store="s3://bucket/prefix"))


def test_ablate_run_refuses_a_memory_store_with_a_pool_before_anything_starts(
    tmp_path: Path, tiny_plan: dict[str, Any]
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_text(tiny_plan))  # memory://tiny-ckpt
    out = tmp_path / "out"
    result = ablate("run", str(plan), "--out", str(out), "--pool", "gpus")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "memory://tiny-ckpt" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("devices", "override", "count"),
    [(3, None, 3), (["cuda:0", "cuda:1"], None, 2), ("auto", "4", 4), (1, "cuda:0,cuda:1", 2)],
)
def test_pool_slots_count_the_pools_devices_without_probing_this_machine(
    devices: Any, override: str | None, count: int
) -> None:
    # cuda:1 is not on this machine: the pool's hosts have it, so it must not be checked here.
    slots = pool_slots(PoolSettings("gpus"), ResourcesSection(devices=devices), override)
    assert [s.name for s in slots] == [f"gpus#{i}" for i in range(count)]


@pytest.mark.parametrize(
    ("value", "reason"),
    [("0", "must be at least 1"), ("abc", "unknown device 'abc'"), (",", "list is empty")],
)
@pytest.mark.parametrize("pool", [None, "gpus"])
def test_a_bad_devices_value_exits_2_in_one_line_with_a_pool_as_without(
    value: str,
    reason: str,
    pool: str | None,
    tmp_path: Path,
    tiny_plan: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    tiny_plan["checkpoint"]["store"] = f"file://{tmp_path / 'store'}"  # one a pool can share
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_text(tiny_plan))
    out = tmp_path / "out"
    args = ["run", str(plan), "--out", str(out), "--devices", value]
    # Refused before a server is asked: no server runs for this test.
    assert main([*args, *(["--pool", pool] if pool else [])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --devices ") and err.count("\n") == 1, err
    assert value in err and reason in err
    assert not out.exists()
    with pytest.raises(InputError, match=reason):  # the pool's count: the same refusal
        pool_slots(PoolSettings("gpus"), ResourcesSection(devices=1), value)


def test_the_worker_side_leaves_record_outputs_and_heartbeat_in_the_store(
    tmp_path: Path, tiny_plan: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ablations.campaign.campaign import Campaign
    from ablations.campaign.opening import register
    from ablations.campaign.specs import spec_for
    from ablations.checkpoint import fence, open_store

    store = tmp_path / "store"
    tiny_plan["checkpoint"]["store"] = f"file://{store}"
    registration = register(plan_text(tiny_plan), tmp_path / "out")
    campaign = Campaign.load(Path(registration.out_dir))
    run = campaign.phase("pilot")[0]
    spec = spec_for(campaign.plan, campaign.registration, run)
    assert spec.checkpoint is not None
    monkeypatch.setenv("ABLATE_DEVICES", "cpu")
    monkeypatch.setenv("ABLATE_HOST", "host-x")
    monkeypatch.setenv("ABLATE_SLOT_DIR", str(tmp_path / "slots"))

    fence.accept(open_store(spec.checkpoint, check=False), "tiny", run.run_id, "flow-run-1")
    reply = json.loads(run_on_host(spec, "run", None, attempt="flow-run-1"))

    base = store / "tiny" / run.run_id / "attempts" / "flow-run-1"
    assert reply["slot"] == "host-x/cpu#0" and reply["status"] in {"accepted", "rejected"}
    envelope = json.loads((base / "outputs" / "result.json").read_text())
    assert json.loads(envelope["result"]) == reply  # with the spec it answers
    assert (envelope["run_id"], envelope["attempt"], envelope["kind"]) == (
        run.run_id, "flow-run-1", "run"
    )  # fmt: skip
    assert json.loads((base / "heartbeat.json").read_text())["attempt"] == "flow-run-1"
    assert reply["artifacts"]
    for relative in reply["artifacts"].values():  # exported on the host, not in its out_dir
        assert (base / "outputs" / relative).stat().st_size > 0
        assert not (campaign.out_dir / relative).exists()


def test_a_run_waiting_for_a_place_when_the_phase_ends_is_not_submitted(
    tmp_path: Path, tiny_plan: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool campaign keeps a second thread per place, its run accepted and waiting for the
    place (`PoolExecutor.threads`); once the phase ends (`terminate`), such a run comes back
    failed, `NotSubmitted`, without a flow run: a failed phase does not start new runs."""
    import threading

    import flows.pool
    from ablations.campaign.campaign import Campaign
    from ablations.campaign.opening import register
    from ablations.campaign.specs import spec_for
    from flows.pool import NOT_SUBMITTED, PoolExecutor

    tiny_plan["checkpoint"]["store"] = f"file://{tmp_path / 'store'}"
    registration = register(plan_text(tiny_plan), tmp_path / "out")
    campaign = Campaign.load(Path(registration.out_dir))
    spec = spec_for(campaign.plan, campaign.registration, campaign.phase("pilot")[0])

    def no_submission(*args: object, **kwargs: object) -> None:
        raise AssertionError("a run was submitted after the phase ended")

    monkeypatch.setattr(flows.pool, "run_deployment", no_submission)
    executor = PoolExecutor(
        PoolSettings("gpus"), pool_slots(PoolSettings("gpus"), ResourcesSection(devices=1), None)
    )
    assert executor.threads == 2 * len(executor.slots) == 2
    records = []
    executor.in_flight.acquire()  # the place is taken: the run's thread waits for it
    waiting = threading.Thread(target=lambda: records.append(executor.run(spec)))
    waiting.start()
    executor.terminate()
    executor.in_flight.release()
    waiting.join(30)
    (record,) = records
    assert record.status == "failed" and record.lost
    assert record.error is not None and record.error.type == NOT_SUBMITTED
