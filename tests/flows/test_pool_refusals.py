"""`ablate run --pool` with a pool the server does not know: exit 2 in seconds, nothing written."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ablations.cli import main
from tests.flows.conftest import plan_text


def test_an_unknown_pool_exits_2_naming_it_within_seconds(
    prefect_server: None,
    tmp_path: Path,
    tiny_plan: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    tiny_plan["checkpoint"]["store"] = f"file://{tmp_path / 'store'}"
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_text(tiny_plan))
    out = tmp_path / "out"
    started = time.monotonic()
    code = main(["run", str(plan), "--out", str(out), "--pool", "no-such-pool"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "no such work pool" in err and "no-such-pool" in err
    assert time.monotonic() - started < 10
    assert not out.exists()


def test_an_unknown_queue_of_a_known_pool_exits_2_naming_it_and_the_queues(
    prefect_server: None,
    tmp_path: Path,
    tiny_plan: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate

    pool = f"queues-{tmp_path.name[-10:]}".lower().replace("_", "-")
    with get_client(sync_client=True) as client:
        client.create_work_pool(WorkPoolCreate(name=pool, type="process"))
    tiny_plan["checkpoint"]["store"] = f"file://{tmp_path / 'store'}"
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_text(tiny_plan))
    out = tmp_path / "out"
    code = main(["run", str(plan), "--out", str(out), "--pool", pool, "--queue", "urgnet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--queue urgnet: no such work queue in pool {pool} (queues: default)" in err
    assert f"prefect work-queue create urgnet --pool {pool}" in err
    assert not out.exists()


def test_a_queue_without_a_pool_exits_2_in_one_line(
    tmp_path: Path, tiny_plan: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """Ignored, the queue's priority would silently not apply: refused before anything."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_text(tiny_plan))
    out = tmp_path / "out"
    code = main(["run", str(plan), "--out", str(out), "--queue", "urgent"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip().splitlines() == [
        "error: --queue urgent: a work queue of a pool; give --pool too (without a pool the "
        "runs use this machine's devices)"
    ]
    assert not out.exists()


def test_the_forms_queue_without_a_pool_fails_the_flow_run_in_one_line(
    prefect_server: None, tmp_path: Path, tiny_plan: dict[str, Any]
) -> None:
    """The deployment's form (the Prefect UI) refuses it as `ablate run` does."""
    from flows.campaign import ablation_campaign

    state = ablation_campaign(
        plan_yaml=plan_text(tiny_plan), out_dir=str(tmp_path / "out"), queue="urgent",
        return_state=True,
    )  # fmt: skip
    assert state.is_failed() and state.message is not None
    assert state.message.startswith("--queue urgent: a work queue of a pool")
    assert not (tmp_path / "out").exists()


def test_the_forms_pool_devices_and_queue_reach_the_pool_executor(
    prefect_server: None,
    tmp_path: Path,
    tiny_plan: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A campaign launched from the UI goes to the queue its form names, with its share."""
    import flows.campaign
    from ablations.errors import InputError

    asked: list[tuple[Any, ...]] = []

    def for_plan(plan: Any, pool: str, devices: str | None, heartbeat: float, queue: Any) -> Any:
        asked.append((pool, devices, heartbeat, queue))
        raise InputError("stop here: the pool is the other tests' business")

    monkeypatch.setattr(flows.campaign.PoolExecutor, "for_plan", for_plan)
    tiny_plan["checkpoint"]["store"] = f"file://{tmp_path / 'store'}"
    state = flows.campaign.ablation_campaign(
        plan_yaml=plan_text(tiny_plan), out_dir=str(tmp_path / "out"), pool="gpus",
        devices="3", queue="urgent", heartbeat_timeout_s=30.0, return_state=True,
    )  # fmt: skip
    assert state.is_failed() and state.message == "stop here: the pool is the other tests' business"
    assert asked == [("gpus", "3", 30.0, "urgent")]
