"""Work-pool attempts: a run on a pool host's slot, and where each attempt of it writes.

With `ablate run --pool NAME` the campaign (`flows/pool.py`) submits each run (and the
preflight) as a flow run of the `run/NAME` deployment; a worker on a GPU host runs it here
(`run_on_host`) on one of that host's slots (`ablations.pool.host`). The two sides meet in
the checkpoint store,
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
result and outputs, so nothing of the late attempt reaches the output folder. No Prefect here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

from ablations.checkpoint import fence
from ablations.errors import InputError, StoreError
from ablations.plan.infrastructure import CheckpointSection
from ablations.pool.host import HostSlots
from ablations.pool.trust import MAX_RESULT_BYTES, seal
from ablations.process.scratch import scratch_folder
from ablations.process.threads import share_cores
from ablations.run.records import RunRecord, RunSpec
from ablations.security.entries import require_allowed_entry, require_allowed_store
from ablations.security.limits import MAX_STEPS_ENV, process_limits
from ablations.slots.devices import SlotSpec
from ablations.text.say import say
from ablations.workers.jobs import PreflightJob, RunJob, preflight_on_slot, run_spec
from ablations.workers.worker import SlotWorker

if TYPE_CHECKING:  # torch (the checkpoint state) never before a slot is pinned
    from ablations.checkpoint.outage import OutlastingStore
    from ablations.checkpoint.store import Store

log = logging.getLogger(__name__)

Kind = Literal["run", "preflight"]
RESULT, HEARTBEAT, OUTPUTS = "outputs/result.json", "heartbeat.json", "outputs"
HEARTBEAT_SECONDS = 5.0
"""How often a running attempt rewrites its heartbeat: cheap next to a checkpoint."""


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


def attempt_store(spec: RunSpec) -> OutlastingStore:
    """The shared store the attempts of `spec` write to (opened without a probe), each call
    riding through an outage as a run's own store calls do (`ablations.checkpoint.outage`):
    a store down for a while delays the pointer, the uploads and the result, and fails
    nothing. Its `inner` store answers at once, for reads whose miss is no news (a beat)."""
    from ablations.checkpoint.outage import OutlastingStore
    from ablations.checkpoint.store import open_store

    require_shared_store(spec.checkpoint)
    assert spec.checkpoint is not None
    return OutlastingStore(open_store(spec.checkpoint, check=False))


def attempt_prefix(spec: RunSpec, attempt: str) -> str:
    """Where one attempt of the run writes (its checkpoints are in the same folder)."""
    return f"{spec.campaign_id}/{spec.run_id}/attempts/{attempt}"


def result_key(spec: RunSpec, attempt: str) -> str:
    """Where the attempt's result envelope is (`ablations.pool.trust.seal`)."""
    return f"{attempt_prefix(spec, attempt)}/{RESULT}"


def attempt_result(store: Store, spec: RunSpec, attempt: str) -> bytes | None:
    """The result envelope the attempt committed, unchecked (`trust.unseal`), or None when
    there is none (or it is larger than any result: never read whole)."""
    try:
        return store.get(result_key(spec, attempt), limit=MAX_RESULT_BYTES)
    except StoreError:
        return None


# -- the worker's side ----------------------------------------------------------------------


@contextmanager
def _heartbeat(store: Store, spec: RunSpec, attempt: str, host: str) -> Iterator[None]:
    """Rewrite `heartbeat.json` every few seconds while the block runs."""
    stop = threading.Event()

    def beat() -> None:
        count = 0
        while True:
            count += 1
            body = {"attempt": attempt, "host": host, "beat": count, "pid": os.getpid()}
            try:
                store.put(f"{attempt_prefix(spec, attempt)}/{HEARTBEAT}", json.dumps(body).encode())
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
    host = HostSlots.from_env()
    limits = process_limits()  # the host's own caps (ABLATE_MAX_STEPS), never the spec's
    if spec.steps > limits.max_steps:
        raise InputError(
            f"run {spec.run_id}: {spec.steps} steps, above the {limits.max_steps} this host "
            f"allows ({MAX_STEPS_ENV} in its worker's environment): refused before it runs"
        )
    if host.allowed_entries is not None:  # the API reaches this host: refused before import
        named = [spec.workload.entry]
        if spec.workload.lightning is not None:
            named += [spec.workload.lightning.module, spec.workload.lightning.data]
        if spec.workload.hf_trainer is not None:
            named.append(spec.workload.hf_trainer)
        for entry in named:
            require_allowed_entry(entry, host.allowed_entries)
    if host.allowed_stores is not None and spec.checkpoint is not None:  # before it is opened
        section = spec.checkpoint
        require_allowed_store(section.store, section.endpoint_url, (), host.allowed_stores)
    store = attempt_store(spec)
    # A missed beat is not a failed run: the next one, 5 s on, is as good as a retried one.
    with _heartbeat(store.inner, spec, attempt, host.host), host.lease() as slot:
        if kind == "preflight":
            result = _on_slot(slot, "preflight", spec, expected_inputs)
        else:
            result = _run_and_upload(slot, store, spec.model_copy(update={"attempt": attempt}))
    _commit(store, spec, kind, attempt, result)
    return result


def _commit(store: Store, spec: RunSpec, kind: Kind, attempt: str, result: str) -> None:
    """Write the attempt's result, unless the campaign accepts another attempt now."""
    _require_accepted(store, spec, attempt)
    store.put(result_key(spec, attempt), seal(spec, kind, attempt, result))


def _require_accepted(store: Store, spec: RunSpec, attempt: str) -> None:
    """`SupersededAttempt`, said in this attempt's log, once another attempt is accepted.
    The pointer unread (the store down past its outage, `StoreUnreachable`) is no licence to
    commit either: it raises."""
    try:
        fence.require_accepted(store, spec.campaign_id, spec.run_id, attempt)
    except fence.SupersededAttempt as exc:
        say(f"{spec.variant} seed {spec.seed}: result not committed: {exc}")
        raise


def _on_slot(
    slot: SlotSpec,
    kind: Kind,
    spec: RunSpec,
    expected: dict[str, int] | None,
    store: OutlastingStore | None = None,
) -> str:
    """Run or preflight `spec` on the slot.

    A flow run is a process of its own, so a CPU slot runs right here, a run's checkpoints on
    `store` (the attempt's, in use). A CUDA slot runs in a `SlotWorker` child: it sets
    `CUDA_VISIBLE_DEVICES` before torch is imported, which this process (a flow run may have
    loaded torch already) cannot promise."""
    if slot.visible_devices == "":
        # A command's program is a process of its own: this one then never loads torch.
        share_cores(slot.cpu_threads, load_torch=spec.workload.command is None)
        spec = spec.model_copy(update={"device": slot.local_device})
        if kind == "preflight":
            return preflight_on_slot(spec, expected).model_dump_json()
        return run_spec(spec, store).model_copy(update={"slot": slot.name}).model_dump_json()
    worker = SlotWorker(slot)
    try:
        if kind == "preflight":
            return worker.do(PreflightJob(spec, expected)).model_dump_json()
        return worker.do(RunJob(spec)).model_dump_json()
    finally:
        worker.close()


def _run_and_upload(slot: SlotSpec, store: OutlastingStore, spec: RunSpec) -> str:
    """Run, upload the exported files, and return the record with each file's sha256 in it
    (`export_sha256`): the result is sealed (signed) with them, so an export swapped in the
    store afterwards is refused by the campaign."""
    if spec.out_dir is None:
        return _on_slot(slot, "run", spec, None, store)
    assert spec.attempt is not None
    with scratch_folder("run-") as local:
        local_spec = spec.model_copy(update={"out_dir": str(local)})
        reply = _on_slot(slot, "run", local_spec, None, store)
        record = RunRecord.model_validate_json(reply)
        _require_accepted(store, spec, spec.attempt)  # a superseded attempt uploads nothing
        hashes: dict[str, str] = {}
        for relative in record.artifacts.values():
            data = (Path(local) / relative).read_bytes()
            hashes[relative] = hashlib.sha256(data).hexdigest()
            store.put(f"{attempt_prefix(spec, spec.attempt)}/{OUTPUTS}/{relative}", data)
    return record.model_copy(update={"export_sha256": hashes}).model_dump_json()


# -- read by the campaign ------------------------------------------------------------------


class Attempted(NamedTuple):
    """How the submissions of one run ended."""

    result: bytes | None
    """The accepted attempt's result envelope (unchecked), or None when every attempt was
    lost."""
    attempt: str | None
    """The attempt whose result it is: its outputs are read from its folder only."""
    problem: str
    """Why no result came back (empty with a result)."""


def attempts_with_results(store: Store, spec: RunSpec) -> list[str]:
    """Every attempt of the run that left a result envelope in the store."""
    base = f"{spec.campaign_id}/{spec.run_id}/attempts"
    found = []
    for key in store.keys(base):
        attempt, _, rest = key.removeprefix(f"{base}/").partition("/")
        if rest == RESULT:
            found.append(attempt)
    return found


def accepted_result(store: Store, spec: RunSpec) -> Attempted | None:
    """The result of the attempt the campaign accepts, if it left one: never another's."""
    attempt = fence.accepted(store, spec.campaign_id, spec.run_id)
    result = attempt_result(store, spec, attempt) if attempt is not None else None
    return Attempted(result, attempt, "") if result is not None else None
