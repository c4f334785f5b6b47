"""The work-pool executor: a campaign's runs as flow runs of the `variant` deployment.

With `ablate run --pool NAME` each run (and the preflight) is submitted with
`run_deployment("variant/NAME")`; a worker on a GPU host runs it (`flows/variant.py`,
`ablations.slots.attempts.run_on_host`). Each submission is an attempt the campaign accepts
in the store before submitting it; a flow run whose heartbeat stops is set Crashed here and
the next attempt resumes from the newest checkpoint any attempt committed (the store's layout
and the fence: `ablations.slots.attempts`, `ablations.checkpoint.fence`).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import FlowRun
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound
from prefect.settings import PREFECT_API_URL
from prefect.states import Crashed

from ablations.campaign.executor import Executor
from ablations.checkpoint import fence
from ablations.errors import InputError, StoreError
from ablations.plan.model import Plan
from ablations.plan.sections import ResourcesSection
from ablations.progress import say
from ablations.records import PreflightReport, RunError, RunRecord, RunSpec
from ablations.slots.attempts import (
    HEARTBEAT,
    OUTPUTS,
    Attempted,
    Kind,
    accepted_result,
    attempt_prefix,
    attempt_result,
    attempt_store,
    require_shared_store,
)
from ablations.slots.devices import SlotSpec, parse_devices

if TYPE_CHECKING:  # the checkpoint package imports torch: never before a slot is pinned
    from ablations.checkpoint.store import FsspecStore


@dataclass(frozen=True)
class PoolSettings:
    """Where the campaign sends its runs, and when it gives up on a silent attempt."""

    pool: str
    """The process work pool; its deployment is `variant/<pool>` (see prefect.yaml)."""
    heartbeat_timeout_s: float = 120.0
    """A running attempt whose heartbeat has not changed for this long is declared lost:
    long enough to ride out a slow store (S3 reads may take 60 s), short next to a run."""
    attempts: int = 3
    """Submissions per run before it is recorded as failed, for an infrastructure cause
    (each resumes the last; a rerun of the campaign submits it again)."""
    poll_s: float = 2.0

    @property
    def deployment(self) -> str:
        return f"variant/{self.pool}"


def pool_slots(
    settings: PoolSettings, resources: ResourcesSection, devices: str | None
) -> list[SlotSpec]:
    """Placeholders for the runs kept in flight on the pool (the projection counts them).

    `--devices` or the plan's `resources.devices` count the pool's devices in all (a number,
    or a list); `auto` counts the workers online in the pool now. Never probed locally."""
    wanted = resources.devices if devices is None else parse_devices(devices)
    if isinstance(wanted, list):
        count = len(wanted)
    elif isinstance(wanted, int):
        count = wanted
    else:
        with get_client(sync_client=True) as client:
            workers = client.read_workers_for_work_pool(settings.pool)
        count = sum(1 for w in workers if str(w.status).upper().endswith("ONLINE"))
    return [
        SlotSpec(name=f"{settings.pool}#{i}", device="pool", cpu_threads=1)
        for i in range(max(1, count))
    ]


def require_pool(settings: PoolSettings) -> None:
    """Refuse, in seconds and before anything runs, a pool (or its `variant/<pool>`
    deployment) that the configured Prefect server does not know."""
    if not PREFECT_API_URL.value():
        raise InputError(
            f"--pool {settings.pool}: set PREFECT_API_URL to the Prefect server the pool's "
            "workers talk to (a temporary local server is unreachable from other hosts)"
        )
    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(settings.pool)
        except ObjectNotFound:
            known = [p.name for p in client.read_work_pools()]
            raise InputError(
                f"--pool {settings.pool}: no such work pool on {PREFECT_API_URL.value()} "
                f"(pools: {', '.join(known) or 'none'})"
            ) from None
        try:
            client.read_deployment_by_name(settings.deployment)
        except ObjectNotFound:
            raise InputError(
                f"--pool {settings.pool}: no deployment {settings.deployment!r}; create it with "
                "`prefect deploy --all` in the folder holding prefect.yaml"
            ) from None


class PoolExecutor:
    """The work-pool executor: each run, and the preflight, a flow run on one of the pool's
    hosts; the results step here, in the campaign's process."""

    def __init__(self, settings: PoolSettings, slots: list[SlotSpec]) -> None:
        self.settings = settings
        self._slots = slots

    @classmethod
    def for_plan(
        cls, plan: Plan, pool: str, devices: str | None, heartbeat_timeout_s: float = 120.0
    ) -> PoolExecutor:
        """The pool's executor for the plan, after every check that can refuse it in seconds
        (a store the hosts cannot share, bad `--devices`, a pool or deployment the server
        does not know): `InputError` before anything runs."""
        require_shared_store(plan.checkpoint)
        if devices is not None:
            parse_devices(devices)  # a bad number is refused before the server is asked
        settings = PoolSettings(pool, heartbeat_timeout_s=heartbeat_timeout_s)
        require_pool(settings)
        return cls(settings, pool_slots(settings, plan.resources, devices))

    @property
    def slots(self) -> list[SlotSpec]:
        """Placeholders for the runs kept in flight on the pool (`pool_slots`)."""
        return self._slots

    def run(self, spec: RunSpec) -> RunRecord:
        """Run one run on the pool; bring its artifacts into the campaign's output folder."""
        store = attempt_store(spec)
        outcome = self._call("run", spec, None, store)
        if outcome.result is None or outcome.attempt is None:
            return RunRecord.failed(spec, "WorkerLost", outcome.problem)
        record = RunRecord.model_validate_json(outcome.result)
        if spec.out_dir is not None:
            outputs = f"{attempt_prefix(spec, outcome.attempt)}/{OUTPUTS}"
            for relative in record.artifacts.values():
                target = Path(spec.out_dir) / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                data = store.get(f"{outputs}/{relative}")
                partial = target.with_name(f".{target.name}.part")
                partial.write_bytes(data)
                os.replace(partial, target)
        return record

    def preflight(self, spec: RunSpec, expected_inputs: dict[str, int] | None) -> PreflightReport:
        """The data and restart checks, on a slot of one of the pool's hosts."""
        outcome = self._call("preflight", spec, expected_inputs, attempt_store(spec))
        if outcome.result is None:
            error = RunError(type="WorkerLost", message=outcome.problem, cause="infrastructure")
            return PreflightReport(passed=False, error=error)
        return PreflightReport.model_validate_json(outcome.result)

    def write_results(self, out_dir: Path) -> Path:
        """In this process: the runs' records and artifacts are in the folder already."""
        from ablations.outputs.export import write_outputs

        return write_outputs(out_dir)

    def _call(
        self, kind: Kind, spec: RunSpec, expected: dict[str, int] | None, store: FsspecStore
    ) -> Attempted:
        """Submit attempts until the accepted one leaves its result in the store."""
        known = accepted_result(store, spec)  # a restarted campaign finds it here
        if known is not None:
            return known
        problem = "never submitted"
        for number in range(1, self.settings.attempts + 1):
            # Ours, accepted before the flow run exists: it may commit from its first step.
            # Unique per submission, so a rerun of the campaign submits afresh rather than
            # getting back (by idempotency key) the flow runs that were lost last time.
            attempt = f"{number}-{uuid.uuid4().hex[:12]}"
            fence.accept(store, spec.campaign_id, spec.run_id, attempt)
            parameters: dict[str, Any] = {
                "spec": spec.model_dump(mode="json"),
                "kind": kind,
                "expected_inputs": expected,
                "attempt": attempt,
            }
            flow_run = run_deployment(
                self.settings.deployment,
                parameters=parameters,
                timeout=0,  # we wait ourselves: Prefect cannot see a host that vanished
                idempotency_key=f"{spec.campaign_id}/{spec.run_id}/{attempt}",
            )
            assert isinstance(flow_run, FlowRun)  # sync call: no coroutine
            problem = self._wait(flow_run.id, store, spec, attempt)
            result = attempt_result(store, spec, attempt)
            if result is not None:
                return Attempted(result, attempt, "")
            say(f"  {spec.variant} seed {spec.seed} ({kind}): attempt {number} lost: {problem}")
        problem = (
            f"{self.settings.attempts} attempts on pool {self.settings.pool} lost "
            f"(a rerun of the campaign submits it again): {problem}"
        )
        return Attempted(None, None, problem)

    def _wait(self, flow_run_id: Any, store: FsspecStore, spec: RunSpec, attempt: str) -> str:
        """Until the flow run is final, or its heartbeat stops; how it ended, in words."""
        last_beat: str | None = None
        changed = time.monotonic()
        with get_client(sync_client=True) as client:
            while True:
                state = client.read_flow_run(flow_run_id).state
                if state is not None and state.is_final():
                    return f"flow run {flow_run_id} ended {state.type.value}: {state.message}"
                now = time.monotonic()
                beat = self._beat(store, spec, attempt)
                if state is None or not state.is_running() or beat != last_beat:
                    last_beat, changed = beat, now  # queued or alive: keep waiting
                elif now - changed > self.settings.heartbeat_timeout_s:
                    host = json.loads(last_beat).get("host") if last_beat else "its host"
                    message = (
                        f"no heartbeat from {host} for {self.settings.heartbeat_timeout_s:.0f} s;"
                        " the host is presumed lost"
                    )
                    client.set_flow_run_state(flow_run_id, Crashed(message=message), force=True)
                    return f"flow run {flow_run_id}: {message}"
                time.sleep(self.settings.poll_s)

    @staticmethod
    def _beat(store: FsspecStore, spec: RunSpec, attempt: str) -> str | None:
        try:
            beat = json.loads(store.get(f"{attempt_prefix(spec, attempt)}/{HEARTBEAT}"))
        except (StoreError, ValueError):
            return None
        return json.dumps(beat, sort_keys=True)


def _conforms(executor: PoolExecutor) -> Executor:  # the typed conformance check: mypy fails here
    return executor
