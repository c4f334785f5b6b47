"""`ablate worker`'s side that needs no server: when it asks for runs, and its fork server.

Its flow runs on a real server and pool: tests/flows/test_work_pool*.py and test_shared_pool.py
(long)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flows.host_worker import EAGER_SECONDS, PollPolicy
from tests.flows.conftest import plan_text
from tests.flows.test_shared_pool import _plan
from tests.flows.test_work_pool import _wait_for
from tests.flows.work_pool import POOL, Loopback, flow_runs
from tests.s3_server import BUCKET


def test_a_host_with_every_slot_busy_never_asks() -> None:
    policy = PollPolicy(query_seconds=1.0)
    assert not any(policy.due(t / 10, slot_free=False) for t in range(1000))


def test_an_idle_host_asks_every_query_interval() -> None:
    policy = PollPolicy(query_seconds=1.0)
    asked = [t / 10 for t in range(100) if policy.due(t / 10, slot_free=True)]
    assert asked == [float(s) for s in range(10)]  # at 0.0, 1.0, ... 9.0: one a second


def test_a_host_whose_run_ended_asks_at_every_tick_for_a_while() -> None:
    policy = PollPolicy(query_seconds=1.0)
    assert policy.due(0.0, slot_free=True)
    policy.run_ended(0.05)
    ticks = [round(0.1 + t / 5, 1) for t in range(40)]  # 0.1 .. 7.9, every 0.2 s
    asked = [t for t in ticks if policy.due(t, slot_free=True)]
    eager = [t for t in ticks if t - 0.05 < EAGER_SECONDS]
    assert asked[: len(eager)] == eager  # every tick while eager
    later = asked[len(eager) :]  # then back to one a second
    assert later and all(b - a >= 1.0 for a, b in itertools.pairwise(later))
    assert later[0] - eager[-1] >= 1.0


def test_a_free_host_asks_once_as_a_run_is_scheduled_not_at_its_next_interval() -> None:
    policy = PollPolicy(query_seconds=1.0)
    assert policy.due(0.0, slot_free=True)
    assert not policy.due(0.3, slot_free=True)  # within its interval
    policy.scheduled(0.4)
    assert not policy.due(0.45, slot_free=False)  # every slot busy: still not
    assert policy.due(0.5, slot_free=True)  # free: at once
    assert not policy.due(0.6, slot_free=True)  # once per scheduled run, then its interval
    assert policy.due(1.5, slot_free=True)


def test_the_fork_server_builds_prefects_deferred_models_and_drops_the_suspension_watch() -> None:
    """What a forked run no longer pays (py-spy, docs/performance.md): the validators of the
    models it reads, the engine's watch for a suspension (a thread and a websocket), which
    `run_engine` swaps for nothing, and the wait for the heartbeat thread at the end. A Prefect
    that renames either fails here, not silently."""
    check = (
        "import flows.engine_fork as f, prefect.flow_engine as e\n"
        "from prefect.client.schemas.objects import FlowRun\n"
        "from prefect.client.schemas.responses import DeploymentResponse\n"
        "assert FlowRun.__pydantic_complete__ and DeploymentResponse.__pydantic_complete__\n"
        "assert e.observe_flow_run_suspension is not f._no_observer\n"
        "f._without_suspension_observer()\n"
        "assert e.observe_flow_run_suspension is f._no_observer\n"
        "import inspect\n"
        "assert 'join_on_exit' in inspect.signature(e._send_heartbeats).parameters\n"
        "f._heartbeats_without_join(); f._heartbeats_without_join()\n"
        "assert e._send_heartbeats.__wrapped_by_ablate__\n"
        "import sys\n"  # what each run imported is there; torch, a CUDA slot's, is not
        "assert all(m in sys.modules for m in f.RUN_IMPORTS) and 'torch' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.long  # `make test-long`: a server, a worker and a campaign (about 2 minutes)
def test_a_run_cancelled_in_the_ui_stops_on_its_host(
    loopback: Loopback, s3_endpoint: str, tmp_path: Path
) -> None:
    """`prefect flow-run cancel` (the UI's Cancel) on a main run in flight: `ablate worker`
    stops its process and the flow run ends Cancelled, in seconds (Prefect's worker leaves a
    started run to a control channel a forked run has not: it stayed Cancelling)."""
    plan = _plan("cx", f"s3://{BUCKET}/cancel-{tmp_path.name}", s3_endpoint)
    plan["workload"]["command"][3] = "60"  # each run sleeps a minute: cancelled mid-run
    (tmp_path / "plan.yaml").write_text(plan_text(plan))
    loopback.worker("host-a", "1")
    run = ["run", str(tmp_path / "plan.yaml"), "--out", str(tmp_path / "out"), "--pool", POOL]
    campaign = loopback.start([sys.executable, "-m", "ablations.cli", *run], loopback.env, "c.log")
    api = loopback.env["PREFECT_API_URL"]

    def running_main_run() -> dict[str, Any] | None:
        assert campaign.poll() is None, loopback.log("c.log")[-3000:]
        for flow_run in flow_runs(api):
            spec = flow_run["parameters"].get("spec") or {}
            if spec.get("phase") == "main" and flow_run["state_type"] == "RUNNING":
                return flow_run
        return None

    target = _wait_for(running_main_run, 400, "a main run Running")["id"]
    loopback.prefect("flow-run", "cancel", target)
    ended = _wait_for(
        lambda: next(
            (r for r in flow_runs(api) if r["id"] == target and r["state_type"] == "CANCELLED"),
            None,
        ),
        60,  # the worker looks every 5 s, its run has 30 s to stop: it stops at once
        "the cancelled run's Cancelled state",
    )
    assert "host-a stopped its process" in ended["state"]["message"]
    campaign.kill()
