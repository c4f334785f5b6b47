"""Runs as flow runs of the `variant` deployment on a Prefect process work pool.

With `ablate run --pool NAME` the campaign submits each run (and the preflight) with
`run_deployment("variant/NAME")`; a worker on a GPU host runs it on one of that host's slots
(`flows/variant.py`, `ablations.slots.host`). The two sides meet in the checkpoint store,
which every host reaches with its own credentials. Each submission is an *attempt* with an
id of its own, and writes only under it:

    <store>/<campaign>/<run_id>/accepted.json                      the attempt the campaign waits on
    <store>/<campaign>/<run_id>/attempts/<a>/heartbeat.json        its liveness, every 5 s
    <store>/<campaign>/<run_id>/attempts/<a>/step-NNNNNNNN/        its checkpoints
    <store>/<campaign>/<run_id>/attempts/<a>/outputs/<artifact>    its metrics and predictions
    <store>/<campaign>/<run_id>/attempts/<a>/outputs/result.json   its record, written last

A flow run whose heartbeat stops (its host died: nobody is left to report it crashed) is set
Crashed by the campaign, and another attempt is accepted and submitted; it resumes, on any
host, from the newest checkpoint any attempt committed. A lost attempt that is in fact alive
(a paused host that wakes up) is fenced (`ablations.checkpoint.fence`): it commits no more
checkpoints, its result is not written, and the campaign reads only the accepted attempt's
result and outputs, so nothing of the late attempt reaches the output folder.
Prefect is imported inside the campaign-side calls only, so the worker side stays plain.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ablations.checkpoint import fence
from ablations.errors import InputError, StoreError
from ablations.plan.sections import CheckpointSection, ResourcesSection
from ablations.progress import say
from ablations.records import PreflightReport, RunError, RunRecord, RunSpec
from ablations.slots.devices import SlotSpec, parse_devices
from ablations.slots.host import HostSlots
from ablations.slots.worker import SlotWorker

if TYPE_CHECKING:  # the checkpoint package imports torch: never before a slot is pinned
    from ablations.checkpoint.store import FsspecStore

log = logging.getLogger(__name__)

Kind = Literal["run", "preflight"]
RESULT, HEARTBEAT, OUTPUTS = "outputs/result.json", "heartbeat.json", "outputs"
HEARTBEAT_SECONDS = 5.0
"""How often a running attempt rewrites its heartbeat: cheap next to a checkpoint."""
COMMIT_TRIES = 4
"""Reads of the accepted pointer before an attempt's result is given up (a slow store)."""


def require_shared_store(section: CheckpointSection | None) -> None:
    """A pool's hosts exchange checkpoints and records through the store: it must be shared."""
    if section is None:
        raise InputError(
            "--pool needs a checkpoint section: its store (s3://...) is where the hosts "
            "leave checkpoints and records"
        )
    if section.store.startswith("memory://"):
        raise InputError(
            f"checkpoint.store {section.store!r} lives in one process; with --pool use "
            "s3://BUCKET/PREFIX (or file:// on a folder every host mounts)"
        )


def _store(spec: RunSpec) -> FsspecStore:
    from ablations.checkpoint.store import open_store

    require_shared_store(spec.checkpoint)
    assert spec.checkpoint is not None
    return open_store(spec.checkpoint, check=False)


def _prefix(spec: RunSpec, attempt: str) -> str:
    """Where one attempt of the run writes (its checkpoints are in the same folder)."""
    return f"{spec.campaign_id}/{spec.run_id}/attempts/{attempt}"


def _result(store: FsspecStore, spec: RunSpec, attempt: str) -> str | None:
    try:
        return store.get(f"{_prefix(spec, attempt)}/{RESULT}").decode()
    except StoreError:
        return None


# -- the worker's side ----------------------------------------------------------------------


@contextmanager
def _heartbeat(store: FsspecStore, spec: RunSpec, attempt: str, host: str) -> Iterator[None]:
    """Rewrite `heartbeat.json` every few seconds while the block runs."""
    stop = threading.Event()

    def beat() -> None:
        count = 0
        while True:
            count += 1
            body = {"attempt": attempt, "host": host, "beat": count, "pid": os.getpid()}
            try:
                store.put(f"{_prefix(spec, attempt)}/{HEARTBEAT}", json.dumps(body).encode())
            except StoreError as exc:  # a missed beat is not a failed run
                log.warning("heartbeat of %s not written: %s", spec.run_id, exc)
            if stop.wait(HEARTBEAT_SECONDS):
                return

    thread = threading.Thread(target=beat, name=f"heartbeat-{spec.run_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


def run_on_host(
    spec: RunSpec, kind: Kind, expected_inputs: dict[str, int] | None, attempt: str
) -> str:
    """On a worker's host: lease a slot, run, leave outputs and the result in the store.

    The heartbeat starts first, so a flow run waiting for a busy host is not taken for a
    lost one. Returns the result (a `RunRecord` or `PreflightReport`) as JSON, once it is
    committed; `SupersededAttempt` (and a line in this attempt's log) when the campaign had
    declared this attempt lost and accepted another meanwhile: nothing of it is committed."""
    store = _store(spec)
    host = HostSlots.from_env()
    with _heartbeat(store, spec, attempt, host.host), host.lease() as slot:
        if kind == "preflight":
            result = _on_slot(slot, "preflight", spec, expected_inputs)
        else:
            result = _run_and_upload(slot, store, spec.model_copy(update={"attempt": attempt}))
    _commit(store, spec, attempt, result)
    return result


def _commit(store: FsspecStore, spec: RunSpec, attempt: str, result: str) -> None:
    """Write the attempt's result, unless the campaign accepts another attempt now."""
    _require_accepted(store, spec, attempt)
    store.put(f"{_prefix(spec, attempt)}/{RESULT}", result.encode())


def _require_accepted(store: FsspecStore, spec: RunSpec, attempt: str) -> None:
    """`SupersededAttempt`, said in this attempt's log, once another attempt is accepted."""
    for tries in range(1, COMMIT_TRIES + 1):
        try:
            fence.require_accepted(store, spec.campaign_id, spec.run_id, attempt)
            return
        except fence.SupersededAttempt as exc:
            say(f"{spec.variant} seed {spec.seed}: result not committed: {exc}")
            raise
        except StoreError:  # the pointer unread is no licence to commit: ask again
            if tries == COMMIT_TRIES:
                raise
            time.sleep(HEARTBEAT_SECONDS)


def _on_slot(slot: SlotSpec, kind: Kind, spec: RunSpec, expected: dict[str, int] | None) -> str:
    """Run or preflight `spec` on the slot.

    A flow run is a process of its own, so a CPU slot runs right here. A CUDA slot runs in a
    `SlotWorker` child: it sets `CUDA_VISIBLE_DEVICES` before torch is imported, which this
    process (torch came in with the store) can no longer promise."""
    if slot.visible_devices == "":
        import torch

        from ablations.slots.jobs import run_preflight, run_spec

        torch.set_num_threads(slot.cpu_threads)
        spec = spec.model_copy(update={"device": slot.local_device})
        if kind == "preflight":
            return run_preflight(spec, expected).model_dump_json()
        return run_spec(spec).model_copy(update={"slot": slot.name}).model_dump_json()
    worker = SlotWorker(slot)
    try:
        if kind == "preflight":
            return worker.preflight(spec, expected).model_dump_json()
        return worker.run(spec).model_dump_json()
    finally:
        worker.close()


def _run_and_upload(slot: SlotSpec, store: FsspecStore, spec: RunSpec) -> str:
    if spec.out_dir is None:
        return _on_slot(slot, "run", spec, None)
    assert spec.attempt is not None
    with tempfile.TemporaryDirectory(prefix="ablate-run-") as local:
        reply = _on_slot(slot, "run", spec.model_copy(update={"out_dir": local}), None)
        record = RunRecord.model_validate_json(reply)
        _require_accepted(store, spec, spec.attempt)  # a superseded attempt uploads nothing
        for relative in record.artifacts.values():
            data = (Path(local) / relative).read_bytes()
            store.put(f"{_prefix(spec, spec.attempt)}/{OUTPUTS}/{relative}", data)
    return reply


# -- the campaign's side --------------------------------------------------------------------


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
        from prefect.client.orchestration import get_client

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
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        raise InputError(
            f"--pool {settings.pool}: set PREFECT_API_URL to the Prefect server the pool's "
            "workers talk to (a temporary local server is unreachable from other hosts)"
        )
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

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


class Attempted(NamedTuple):
    """How the submissions of one run ended."""

    result: str | None
    """The accepted attempt's result (JSON), or None when every attempt was lost."""
    attempt: str | None
    """The attempt whose result it is: its outputs are read from its folder only."""
    problem: str
    """Why no result came back (empty with a result)."""


def accepted_result(store: FsspecStore, spec: RunSpec) -> Attempted | None:
    """The result of the attempt the campaign accepts, if it left one: never another's."""
    attempt = fence.accepted(store, spec.campaign_id, spec.run_id)
    result = _result(store, spec, attempt) if attempt is not None else None
    return Attempted(result, attempt, "") if result is not None else None


class RemoteRunner:
    """The campaign's handle on the pool, used where a leased `SlotWorker` is used locally."""

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings

    def run(self, spec: RunSpec) -> RunRecord:
        """Run one run on the pool; bring its artifacts into the campaign's output folder."""
        store = _store(spec)
        outcome = self._call("run", spec, None, store)
        if outcome.result is None or outcome.attempt is None:
            return RunRecord.failed(spec, "WorkerLost", outcome.problem)
        record = RunRecord.model_validate_json(outcome.result)
        if spec.out_dir is not None:
            outputs = f"{_prefix(spec, outcome.attempt)}/{OUTPUTS}"
            for relative in record.artifacts.values():
                target = Path(spec.out_dir) / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                data = store.get(f"{outputs}/{relative}")
                partial = target.with_name(f".{target.name}.part")
                partial.write_bytes(data)
                os.replace(partial, target)
        return record

    def preflight(self, spec: RunSpec, expected: dict[str, int] | None) -> PreflightReport:
        """The data and restart checks, on a slot of one of the pool's hosts."""
        outcome = self._call("preflight", spec, expected, _store(spec))
        if outcome.result is None:
            error = RunError(type="WorkerLost", message=outcome.problem, cause="infrastructure")
            return PreflightReport(passed=False, error=error)
        return PreflightReport.model_validate_json(outcome.result)

    def _call(
        self, kind: Kind, spec: RunSpec, expected: dict[str, int] | None, store: FsspecStore
    ) -> Attempted:
        """Submit attempts until the accepted one leaves its result in the store."""
        from prefect.client.schemas.objects import FlowRun
        from prefect.deployments import run_deployment

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
            result = _result(store, spec, attempt)
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
        from prefect.client.orchestration import get_client
        from prefect.states import Crashed

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
            beat = json.loads(store.get(f"{_prefix(spec, attempt)}/{HEARTBEAT}"))
        except (StoreError, ValueError):
            return None
        return json.dumps(beat, sort_keys=True)


_POOLS: dict[str, RemoteRunner] = {}
_LOCK = threading.Lock()


@contextmanager
def open_pool(key: str, settings: PoolSettings | None) -> Iterator[RemoteRunner | None]:
    """Route the runs of campaign `key` to the pool for the block (nothing when None)."""
    if settings is None:
        yield None
        return
    runner = RemoteRunner(settings)
    with _LOCK:
        _POOLS[key] = runner
    try:
        yield runner
    finally:
        with _LOCK:
            _POOLS.pop(key, None)


def pool_for(key: str) -> RemoteRunner | None:
    """The pool the runs of campaign `key` go to, or None when they run on local slots."""
    with _LOCK:
        return _POOLS.get(key)
