"""The work-pool executor: a campaign's runs as flow runs of the `variant` deployment.

With `ablate run --pool NAME` each run (and the preflight) is submitted with
`run_deployment("run/NAME")`; a worker on a GPU host runs it (`flows/run.py`,
`ablations.pool.attempts.run_on_host`). Each submission is an attempt the campaign accepts
in the store before submitting it; a flow run whose heartbeat stops is set Crashed here and
the next attempt resumes from the newest checkpoint any attempt committed (the store's layout
and the fence: `ablations.pool.attempts`, `ablations.checkpoint.fence`).
"""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import FlowRun, State
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound
from prefect.settings import PREFECT_API_URL
from prefect.states import Crashed

from ablations.campaign.campaign import Campaign
from ablations.campaign.executor import Executor
from ablations.campaign.folder import CampaignFolder
from ablations.campaign.manifest import Manifest
from ablations.checkpoint import fence
from ablations.errors import InputError, ObjectTooLarge, StoreError
from ablations.plan.infrastructure import ResourcesSection
from ablations.plan.model import Plan
from ablations.pool.attempts import (
    HEARTBEAT,
    HEARTBEAT_SECONDS,
    OUTPUTS,
    Kind,
    accepted_result,
    attempt_prefix,
    attempt_result,
    attempt_store,
    attempts_with_results,
    require_shared_store,
    result_key,
)
from ablations.pool.trust import (
    MAX_ARTIFACT_BYTES,
    MAX_SMALL_BYTES,
    Liveness,
    UntrustedObject,
    artifact_names,
    checked_export,
    checked_preflight,
    checked_record,
    require_sole_result,
    unseal,
)
from ablations.run.records import PreflightReport, RunError, RunRecord, RunSpec
from ablations.slots.devices import SlotSpec, parse_devices
from ablations.text.say import say
from flows.api_outage import ride_api
from flows.settle import Unsettled
from flows.watch import GONE, FlowRunWatch

if TYPE_CHECKING:  # torch (the checkpoint state) never before a slot is pinned
    from ablations.checkpoint.outage import OutlastingStore
    from ablations.checkpoint.store import Store


@dataclass(frozen=True)
class PoolSettings:
    """Where the campaign sends its runs, and when it gives up on a silent attempt."""

    pool: str
    """The process work pool; its deployment is `run/<pool>` (see prefect.yaml)."""
    heartbeat_timeout_s: float = 120.0
    """A running attempt whose heartbeat has not changed for this long is declared lost:
    long enough to ride out a slow store (S3 reads may take 60 s), short next to a run."""
    progress_timeout_s: float = 3600.0
    """A running attempt whose newest committed checkpoint step has not changed for this long
    is declared lost, however alive its heartbeat looks: above the checkpoint interval (which
    `max_loss_minutes`, 10 by default, caps) plus the time to build the workload."""
    attempts: int = 3
    """Submissions per run before it is recorded as failed, for an infrastructure cause
    (each resumes the last; a rerun of the campaign submits it again)."""
    poll_s: float = 0.25
    """How often the campaign reads the state of its flow runs in flight, all in one request
    (`flows.watch`), when the server's events are not heard: a finished run is noticed half
    this late on average, and its place goes to the next run then. About 3 ms of the
    server's CPU a read with a few runs out (py-spy), more with many."""
    poll_heard_s: float = 1.0
    """The same while the server's events of runs ending are heard (`flows.run_events`): an end
    is read as its event comes; the readings in between keep Pending and Running current."""
    liveness_s: float = 10.0
    """How often it reads each running attempt's heartbeat and newest commit from the store
    (two store requests; at most a sixth of `heartbeat_timeout_s`): the timeouts it checks
    them against are minutes, so reading them at every state poll only cost the campaign's
    CPU and the store's requests."""
    result_look_s: float = 2 * HEARTBEAT_SECONDS
    """A beat unchanged this long: the attempt may have committed its result (its beat stops
    first) while its flow run's final state never reached the server (down as the run
    ended): the store is asked for the result, at most once per such interval."""
    queue: str | None = None
    """The pool's work queue the runs go to (None: its default queue). A queue's priority
    puts one campaign's runs before another's; its concurrency limit caps the queue's
    flow runs, which the server applies when a worker asks for runs, counting those Pending
    or Running (one declared lost, still alive on its host, no longer counts). The bound
    of the campaign's own, `PoolExecutor.in_flight`, needs neither."""

    @property
    def deployment(self) -> str:
        return f"run/{self.pool}"


def pool_slots(
    settings: PoolSettings, resources: ResourcesSection, devices: str | None
) -> list[SlotSpec]:
    """Placeholders for the runs kept in flight on the pool (the projection counts them):
    the campaign's share of the pool, which `PoolExecutor` never exceeds.

    `--devices` or the plan's `resources.devices` count the pool's devices in all (a number,
    or a list); `auto` counts the workers online in the pool now. Never probed locally."""
    wanted = resources.devices if devices is None else parse_devices(devices)
    if isinstance(wanted, list):
        count = len(wanted)
    elif isinstance(wanted, int):
        count = wanted
    else:
        count = online_workers(settings.pool)
    return [
        SlotSpec(name=f"{settings.pool}#{i}", device="pool", cpu_threads=1)
        for i in range(max(1, count))
    ]


def online_workers(pool: str) -> int:
    """How many of the pool's workers are online now (each takes `--limit` runs at once)."""
    with get_client(sync_client=True) as client:
        workers = client.read_workers_for_work_pool(pool)
    return sum(1 for w in workers if str(w.status).upper().endswith("ONLINE"))


def require_queue_with_pool(pool: str | None, queue: str | None) -> None:
    """A work queue belongs to a pool: one without `--pool` is refused, not ignored."""
    if queue and not pool:
        raise InputError(
            f"--queue {queue}: a work queue of a pool; give --pool too (without a pool the "
            "runs use this machine's devices)"
        )


def require_pool(settings: PoolSettings) -> None:
    """Refuse, in seconds and before anything runs, a pool (its work queue, its `run/<pool>`
    deployment) that the configured Prefect server does not know."""
    if not PREFECT_API_URL.value():
        raise InputError(
            f"--pool {settings.pool}: set PREFECT_API_URL to the Prefect server the pool's "
            "workers talk to (a temporary local server is unreachable from other hosts)"
        )
    # Each read rides through the server's failures (a 500 under load once ended a campaign of
    # 16 hosts here at its first call); a 404 is the answer, and is said as bad input.
    with get_client(sync_client=True) as client:
        try:
            ride_api(f"reading pool {settings.pool}", lambda: client.read_work_pool(settings.pool))
        except ObjectNotFound:
            known = [p.name for p in ride_api("listing work pools", client.read_work_pools)]
            raise InputError(
                f"--pool {settings.pool}: no such work pool on {PREFECT_API_URL.value()} "
                f"(pools: {', '.join(known) or 'none'})"
            ) from None
        if settings.queue is not None:
            queue = settings.queue
            try:
                ride_api(
                    f"reading work queue {queue}",
                    lambda: client.read_work_queue_by_name(queue, work_pool_name=settings.pool),
                )
            except ObjectNotFound:
                found = ride_api(
                    "listing work queues",
                    lambda: client.read_work_queues(work_pool_name=settings.pool),
                )
                queues = [q.name for q in found]
                raise InputError(
                    f"--queue {queue}: no such work queue in pool {settings.pool} "
                    f"(queues: {', '.join(queues)}); create it with `prefect work-queue create "
                    f"{queue} --pool {settings.pool}`"
                ) from None
        try:
            ride_api(
                f"reading deployment {settings.deployment}",
                lambda: client.read_deployment_by_name(settings.deployment),
            )
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
        # The campaign's share of the pool: at most one flow run per slot submitted and not
        # yet over, whoever calls (`ablate run` sizes its task threads to the slots, a flow
        # run from the UI has 16). Runs beyond the pool's free workers wait in its queue. An
        # attempt presumed lost gives its place back at once: if its host was only paused,
        # it may still hold a device there (fenced: it commits nothing) beside the next.
        self.in_flight = threading.BoundedSemaphore(max(1, len(slots)))
        # Set by `terminate`: a run waiting for a place is not submitted (the phase ended).
        self._ending = threading.Event()
        self._watch = FlowRunWatch(settings.poll_s, settings.poll_heard_s)
        # Flow runs whose result was taken from the store while the server still shows them
        # unfinished: set Completed once it answers (at the next state read that succeeds).
        self._unsettled = Unsettled()

    @classmethod
    def for_plan(
        cls,
        plan: Plan,
        pool: str,
        devices: str | None,
        heartbeat_timeout_s: float = 120.0,
        queue: str | None = None,
    ) -> PoolExecutor:
        """The pool's executor for the plan, after every check that can refuse it in seconds
        (a store the hosts cannot share, bad `--devices`, a pool or deployment the server
        does not know): `InputError` before anything runs."""
        require_shared_store(plan.checkpoint)
        if devices is not None:
            parse_devices(devices)  # a bad number is refused before the server is asked
        assert plan.checkpoint is not None  # require_shared_store
        settings = PoolSettings(
            pool,
            heartbeat_timeout_s=heartbeat_timeout_s,
            progress_timeout_s=progress_timeout(plan.checkpoint.max_loss_minutes),
            queue=queue,
        )
        require_pool(settings)
        slots = pool_slots(settings, plan.resources, devices)
        online = online_workers(pool)
        if len(slots) > online:  # allowed: workers may join; the runs wait in the queue
            say(
                f"pool {pool}: up to {len(slots)} runs in flight, {online} worker(s) online: "
                "the others wait in the pool's queue for a free worker"
            )
        return cls(settings, slots)

    @property
    def slots(self) -> list[SlotSpec]:
        """Placeholders for the runs kept in flight on the pool (`pool_slots`)."""
        return self._slots

    @property
    def threads(self) -> int:
        """Two per place: while a run is out on the pool, the next one's thread has its
        attempt accepted and waits at `in_flight`, so it is submitted the moment the first
        is seen over, not after that thread has taken the result in, written the record and
        started the next task (0.6 s of a 10 s run's cycle, `bench/pool_scale.py`)."""
        return 2 * len(self._slots)

    def run(self, spec: RunSpec) -> RunRecord:
        """Run one run on the pool; bring its artifacts into the campaign's output folder.

        What comes back is checked (`ablations.pool.trust`): a result that answers another
        run, names files this run does not export, or exports a file whose sha256 differs
        from the result's is refused, and the run is submitted again with a fresh attempt;
        refused every time, the run is `failed` with `UntrustedResult` and the reason (an
        infrastructure cause: a rerun of the campaign submits it again)."""
        store = attempt_store(spec)

        def take(attempt: str, result: str) -> RunRecord:
            record = checked_record(result, spec, self._name(store, spec, attempt))
            if spec.out_dir is not None:
                self._copy_outputs(store, spec, attempt, record)
            return record

        outcome = self._call("run", spec, None, store, take)
        if outcome.taken is None:
            return RunRecord.failed(spec, outcome.error_type, outcome.problem)
        return outcome.taken

    @staticmethod
    def _copy_outputs(store: Store, spec: RunSpec, attempt: str, record: RunRecord) -> None:
        """The run's exported files, from its accepted attempt's folder into the output
        folder: names rebuilt from the run id, each read without following a symbolic link,
        checked against the sha256 the (signed) result gives it, and written through the
        folder's guard. Refused, none of them stays in the folder."""
        assert spec.out_dir is not None
        folder = CampaignFolder(Path(spec.out_dir))
        outputs = f"{attempt_prefix(spec, attempt)}/{OUTPUTS}"
        written: list[str] = []
        try:
            for kind in record.artifacts:
                relative = artifact_names(spec.run_id)[kind]  # checked_record: a known kind
                try:
                    data = store.get(f"{outputs}/{relative}", limit=MAX_ARTIFACT_BYTES)
                except (ObjectTooLarge, UntrustedObject) as exc:
                    raise UntrustedObject(f"artifact {kind} of the result: {exc}") from None
                except StoreError as exc:
                    if isinstance(exc.__cause__, FileNotFoundError):  # named, never uploaded
                        raise UntrustedObject(f"artifact {kind} of the result: {exc}") from None
                    raise
                checked_export(record, relative, data, store.uri(f"{outputs}/{relative}"))
                folder.write_bytes(relative, data)
                written.append(relative)
        except UntrustedObject:
            for relative in written:
                folder.path(relative).unlink(missing_ok=True)
            raise

    def preflight(self, spec: RunSpec, expected_inputs: dict[str, int] | None) -> PreflightReport:
        """The data and restart checks, on a slot of one of the pool's hosts."""
        store = attempt_store(spec)

        def take(attempt: str, result: str) -> PreflightReport:
            return checked_preflight(result, self._name(store, spec, attempt))

        outcome = self._call("preflight", spec, expected_inputs, store, take)
        if outcome.taken is not None:
            return outcome.taken
        error = RunError(type=outcome.error_type, message=outcome.problem, cause="infrastructure")
        return PreflightReport(passed=False, error=error)

    def write_results(self, campaign: Campaign) -> Manifest:
        """In this process, from the campaign as loaded: the runs' records and artifacts are
        in the folder already."""
        from ablations.results.write import write_results

        self._unsettled.settle()  # a last try for the runs taken last
        return write_results(campaign)

    def terminate(self) -> None:
        """No run waiting for a place is submitted from now on (each comes back failed,
        `NotSubmitted`: a rerun submits it). The runs out on the pool are flow runs of
        their own on their hosts, each writing to the shared store, and go on (as when the
        campaign is killed)."""
        self._ending.set()

    def _call(
        self,
        kind: Kind,
        spec: RunSpec,
        expected: dict[str, int] | None,
        store: OutlastingStore,
        take: Callable[[str, str], Taken],
    ) -> Outcome[Taken]:
        """Submit attempts until the accepted one leaves a result in the store that answers
        `spec` (its envelope: `trust.unseal`) and that `take` accepts (raising
        `UntrustedObject` otherwise); what `take` made of it. A refused result is never used:
        a fresh attempt is submitted instead, a restarted campaign's included."""
        refused = ""
        known = accepted_result(store, spec)  # a restarted campaign finds it here
        if known is not None and known.result is not None and known.attempt is not None:
            name = self._name(store, spec, known.attempt)
            try:
                result = unseal(known.result, spec, kind, known.attempt, name)
                require_sole_result(attempts_with_results(store, spec), known.attempt, name)
                return Outcome(take(known.attempt, result))
            except UntrustedObject as exc:  # planted, moved back, or another campaign's
                refused = str(exc)
                say(f"  {spec.variant} seed {spec.seed} ({kind}): {refused}; submitted afresh")
        problem = refused or "never submitted"
        error_type = "UntrustedResult" if refused else "WorkerLost"
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
            with self.in_flight:  # held until the flow run is over (or presumed lost)
                if self._ending.is_set():
                    return Outcome(None, NOT_SUBMITTED, ENDED_FIRST)
                flow_run = ride_api(
                    f"the submission of {spec.variant} seed {spec.seed} ({kind})",
                    partial(
                        run_deployment,
                        self.settings.deployment,
                        parameters=parameters,
                        timeout=0,  # we wait ourselves: Prefect cannot see a host that vanished
                        # the same flow run back when a retry follows a lost answer
                        idempotency_key=f"{spec.campaign_id}/{spec.run_id}/{attempt}",
                        work_queue_name=self.settings.queue,
                        tags=[campaign_tag(spec.campaign_id)],  # two campaigns, told apart
                        flow_run_name=flow_run_name(spec, kind),
                    ),
                )
                assert isinstance(flow_run, FlowRun)  # sync call: no coroutine
                problem, unfinished = self._wait(flow_run.id, store, spec, attempt, kind)
            error_type = "WorkerLost"
            sealed = attempt_result(store, spec, attempt)
            if sealed is not None:
                try:
                    result = unseal(sealed, spec, kind, attempt, self._name(store, spec, attempt))
                    taken = take(attempt, result)
                    if unfinished:  # accepted: the UI must not show it Running for good
                        self._unsettled.add(flow_run.id, spec.campaign_id)
                        self._unsettled.settle()
                    return Outcome(taken)
                except UntrustedObject as exc:
                    problem, error_type = str(exc), "UntrustedResult"
            what = "refused" if error_type == "UntrustedResult" else "lost"
            say(f"  {spec.variant} seed {spec.seed} ({kind}): attempt {number} {what}: {problem}")
        problem = (
            f"{self.settings.attempts} attempts on pool {self.settings.pool} lost or refused "
            f"(a rerun of the campaign submits it again): {problem}"
        )
        return Outcome(None, error_type, problem)

    def _wait(
        self, flow_run_id: Any, store: OutlastingStore, spec: RunSpec, attempt: str, kind: Kind
    ) -> tuple[str, bool]:
        """Until the flow run is final, its result is in the store, or its heartbeat or its
        progress stops (`Liveness`); how it ended, in words, and whether its result was found
        while the server still showed it unfinished.

        A flow run Pending counts as running: its process has started on a host, and one that
        died there while the server was down (Prefect's first request of a new process is not
        retried) stays Pending for good, with no beat. The store is read through `inner`: a
        beat missed in a store outage is no news, and the poll must not wait the outage out."""
        # The preflight's restart check commits under an id of its own: its beat must do.
        progress_s = self.settings.progress_timeout_s if kind == "run" else math.inf
        liveness = Liveness(self.settings.heartbeat_timeout_s, progress_s)
        # A sixth of the heartbeat's timeout at most: a short timeout given on the command
        # line (`--heartbeat-timeout 12`) is still checked several times within it.
        every = min(self.settings.liveness_s, self.settings.heartbeat_timeout_s / 6)
        observed_at, was_running = -math.inf, False
        quick = store.inner
        beat_seen, still_since, looked_at = None, time.monotonic(), time.monotonic()
        with self._watch.watching(flow_run_id) as watched:
            while True:
                state = ride_api(  # within poll_s, or the reading's error (a server down)
                    f"the state of flow run {flow_run_id}",
                    partial(self._watch.next_state, watched),
                )
                if self._unsettled:  # the server answered: its runs taken may be settled
                    self._unsettled.settle()
                if state == GONE:
                    return f"flow run {flow_run_id} is no longer on the server (deleted)", False
                if isinstance(state, State) and state.is_final():
                    ended = f"flow run {flow_run_id} ended {state.type.value}: {state.message}"
                    return ended, False
                running = isinstance(state, State) and (state.is_running() or state.is_pending())
                now = time.monotonic()
                if running == was_running and now - observed_at < every:
                    continue
                observed_at, was_running = now, running
                beat = self._beat(quick, spec, attempt)
                if beat is not None and beat != beat_seen:
                    beat_seen, still_since = beat, now
                look = self.settings.result_look_s
                if now - still_since > look and now - looked_at > look:
                    looked_at = now
                    if attempt_result(quick, spec, attempt) is not None:
                        where = state.type.value if isinstance(state, State) else "no state"
                        return f"flow run {flow_run_id}: result committed (still {where})", True
                progress = (
                    self._progress(quick, spec, attempt) if running and kind == "run" else None
                )
                lost = liveness.observe(now, running, beat, progress)
                if lost:
                    host = _host_of(liveness.beat)
                    message = f"{lost} from {host}; the attempt is presumed lost"
                    with get_client(sync_client=True) as client:
                        ride_api(
                            f"marking flow run {flow_run_id} crashed",
                            partial(
                                client.set_flow_run_state,
                                flow_run_id,
                                Crashed(message=message),
                                force=True,
                            ),
                        )
                    return f"flow run {flow_run_id}: {message}", False

    @staticmethod
    def _name(store: Store, spec: RunSpec, attempt: str) -> str:
        return store.uri(result_key(spec, attempt))

    @staticmethod
    def _beat(store: Store, spec: RunSpec, attempt: str) -> str | None:
        try:
            key = f"{attempt_prefix(spec, attempt)}/{HEARTBEAT}"
            beat = json.loads(store.get(key, limit=MAX_SMALL_BYTES))
        except (StoreError, ValueError):
            return None
        return json.dumps(beat, sort_keys=True)

    @staticmethod
    def _progress(store: Store, spec: RunSpec, attempt: str) -> int | None:
        """The newest step the attempt committed a checkpoint of (None: none yet)."""
        from ablations.checkpoint.commit import Identity, scan

        owner = spec.checkpoint_id or spec.run_id
        identity = Identity(spec.campaign_id, owner, spec.plan_hash, attempt)
        try:
            committed, _ = scan(store, identity)
        except StoreError:
            return None
        return committed[-1] if committed else None


Taken = TypeVar("Taken")
NOT_SUBMITTED = "NotSubmitted"
"""The error of a run whose thread was waiting for a place when the phase ended
(`PoolExecutor.terminate`): an infrastructure cause, submitted by a rerun."""
ENDED_FIRST = (
    "not submitted: the campaign's phase ended while it waited for a place on the pool "
    "(a rerun submits it)"
)


@dataclass(frozen=True)
class Outcome(Generic[Taken]):
    """How the submissions of one run (or preflight) ended: what was taken of the accepted
    attempt's result, or why nothing was."""

    taken: Taken | None
    error_type: str = ""
    """`WorkerLost` (no result came back) or `UntrustedResult` (the last one was refused)."""
    problem: str = ""


def flow_run_name(spec: RunSpec, kind: Kind) -> str:
    """The name the UI lists a run's flow run under: its campaign, variant, seed and phase."""
    if kind == "preflight":
        return f"{spec.campaign_id}: preflight"
    return f"{spec.campaign_id}: {spec.variant} seed {spec.seed} ({spec.phase})"


def campaign_tag(campaign_id: str) -> str:
    """The tag of a campaign's flow runs on the pool: the UI's filter for one campaign."""
    return f"campaign:{campaign_id}"


def progress_timeout(max_loss_minutes: float) -> float:
    """Seconds without a new committed checkpoint before a running attempt is lost: three
    times the longest interval `max_loss_minutes` allows, and never under an hour (the first
    checkpoint also waits for the workload to build and the data to load)."""
    return max(3600.0, 3 * 60 * max_loss_minutes)


def _host_of(beat: str | None) -> str:
    try:
        host = json.loads(beat).get("host") if beat else None
    except (ValueError, AttributeError):
        host = None
    return str(host)[:80] if host else "its host"


def _conforms(executor: PoolExecutor) -> Executor:  # the typed conformance check: mypy fails here
    return executor
