"""A run whose result the campaign took from the store, its flow run's final state never having
reached the server (down as the run ended), is set Completed on the server, saying so, once
the server answers (`flows/settle.py`): the UI no longer shows it Running for good.

A real Prefect server (the session's `prefect_server`); the host is this test's thread, which
sets the flow run Running, beats once and commits the attempt's result, and never reports the
run's end, as a host whose reports met a server down.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
from prefect.client.schemas.objects import FlowRun
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.states import Failed, Running

from ablations.checkpoint.store import open_store
from ablations.plan.infrastructure import CheckpointSection
from ablations.pool.attempts import HEARTBEAT, attempt_prefix, result_key
from ablations.pool.trust import artifact_names, seal
from ablations.run.records import RunSpec
from flows.pool import PoolExecutor, PoolSettings
from flows.settle import Unsettled
from tests.faults.test_untrusted_store import RUN_ID, STEPS_CSV, _record, _spec
from tests.s3_server import free_port


@flow(name="settle-probe")
def _placeholder() -> None:
    """Only its flow runs are used: created and set Running by hand."""


def _host(spec: RunSpec, deployment_id: uuid.UUID, stop: threading.Event) -> None:
    """The flow run the campaign submits: Running, one beat, the result committed; no end."""
    assert spec.checkpoint is not None
    store = open_store(spec.checkpoint, check=False)
    with get_client(sync_client=True) as client:
        while not stop.wait(0.1):
            found = client.read_flow_runs(
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
            )
            if found:
                break
        else:
            return
        run: FlowRun = found[0]
        attempt = run.parameters["attempt"]
        client.set_flow_run_state(run.id, Running(), force=True)
    prefix = attempt_prefix(spec, attempt)
    store.put(f"{prefix}/{HEARTBEAT}", json.dumps({"attempt": attempt, "beat": 1}).encode())
    store.put(f"{prefix}/outputs/{artifact_names(RUN_ID)['steps']}", STEPS_CSV)
    store.put(result_key(spec, attempt), seal(spec, "run", attempt, json.dumps(_record())))


def test_a_run_taken_from_the_store_is_completed_on_the_server_saying_so(
    prefect_server: None, tmp_path: Path
) -> None:
    pool = f"settle-{uuid.uuid4().hex[:8]}"  # its own deployment, `run/<pool>`
    (tmp_path / "out").mkdir()
    spec = _spec(CheckpointSection(store=f"file://{tmp_path / 'store'}"), tmp_path / "out")
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name("run")
        deployment_id = client.create_deployment(flow_id=flow_id, name=pool)
    stop = threading.Event()
    host = threading.Thread(target=_host, args=(spec, deployment_id, stop), daemon=True)
    host.start()
    settings = PoolSettings(pool, heartbeat_timeout_s=30, attempts=1, poll_s=0.2, result_look_s=0.5)
    try:
        record = PoolExecutor(settings, []).run(spec)
    finally:
        stop.set()
        host.join()
    assert record.status == "accepted"
    with get_client(sync_client=True) as client:
        (run,) = client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
        )
    assert run.state is not None and run.state.type.value == "COMPLETED"
    assert "result taken from the store by campaign trust" in (run.state.message or "")


def test_a_flow_run_is_settled_once_the_server_answers_and_never_raises(
    prefect_server: None,
) -> None:
    """Kept while no server answers (a refused connection: no error, no retries of a minute);
    set Completed at the first try that reaches one; a run already final is left as it is."""
    with get_client(sync_client=True) as client:
        running = client.create_flow_run(_placeholder)
        client.set_flow_run_state(running.id, Running(), force=True)
        failed = client.create_flow_run(_placeholder)
        client.set_flow_run_state(failed.id, Failed(message="its own end"), force=True)
    unsettled = Unsettled()
    unsettled.add(running.id, "c1")
    unsettled.add(failed.id, "c1")
    with temporary_settings(updates={PREFECT_API_URL: f"http://127.0.0.1:{free_port()}/api"}):
        assert unsettled.settle() == 2  # nothing listens there: kept
    assert unsettled.settle() == 0
    with get_client(sync_client=True) as client:
        settled = client.read_flow_run(running.id).state
        untouched = client.read_flow_run(failed.id).state
    assert settled is not None and settled.type.value == "COMPLETED"
    assert "result taken from the store by campaign c1" in (settled.message or "")
    assert untouched is not None and untouched.type.value == "FAILED"
    assert untouched.message == "its own end"
