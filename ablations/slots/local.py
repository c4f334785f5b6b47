"""The live slots of a running campaign: one worker per slot, leased by run tasks.

Prefect tasks receive only ids and paths, so the workers (which hold processes) live here,
keyed by the campaign's output folder, for the lifetime of the flow run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from ablations.errors import InfrastructureError
from ablations.slots.devices import SlotPool, SlotSpec
from ablations.slots.worker import SlotWorker, Warmup


@dataclass
class _Runtime:
    pool: SlotPool[SlotWorker]
    spare: SlotWorker | None
    """With a single slot and the restart check to run: the check's other process."""


_RUNTIMES: dict[str, _Runtime] = {}
_LOCK = threading.Lock()


@contextmanager
def open_slots(
    key: str, slots: list[SlotSpec], warmup: Warmup | None = None
) -> Iterator[SlotPool[SlotWorker]]:
    """Start a worker per slot now, and stop them all at the end.

    Workers start at once (not at their first run) so their imports overlap whatever the
    campaign does meanwhile. Opened again for the same key (the CLI opens the slots before
    Prefect's server is up; the flow opens them too), the open pool is reused and the outer
    opener closes it. With `warmup.restart_check` and a single slot, a spare worker starts
    too: the restart check's continuation needs a process that did not save.
    """
    with _LOCK:
        existing = _RUNTIMES.get(key)
    if existing is not None:
        yield existing.pool
        return
    warmup = warmup or Warmup()
    others = replace(warmup, results=False)  # the first slot writes the results
    pool = SlotPool([SlotWorker(s, warmup if i == 0 else others) for i, s in enumerate(slots)])
    spare = SlotWorker(slots[0], others) if warmup.restart_check and len(slots) == 1 else None
    workers = [*pool.slots, *([spare] if spare else [])]
    for worker in workers:
        worker.start()
    with _LOCK:
        _RUNTIMES[key] = _Runtime(pool, spare)
    finished = False
    try:
        yield pool
        finished = True
    finally:
        with _LOCK:
            runtime = _RUNTIMES.pop(key, None)
        workers = [*pool.slots, *([runtime.spare] if runtime and runtime.spare else [])]
        for worker in workers:  # all at once: each exit then overlaps the others'
            worker.ask_to_finish()
        for worker in workers:
            worker.close(wait=finished)


def _runtime(key: str) -> _Runtime:
    with _LOCK:
        runtime = _RUNTIMES.get(key)
    if runtime is None:
        raise InfrastructureError(f"no slots are open for campaign folder {key}")
    return runtime


def slots_for(key: str) -> SlotPool[SlotWorker]:
    """The slot pool of the running campaign `key`."""
    return _runtime(key).pool


def results_writer(key: str) -> SlotWorker | None:
    """The worker that writes the results (the first slot's), or None without local slots.

    Not leased: the results step comes after every run has returned its slot."""
    with _LOCK:
        runtime = _RUNTIMES.get(key)
    return runtime.pool.slots[0] if runtime is not None and runtime.pool.slots else None


@contextmanager
def other_process(key: str) -> Iterator[SlotWorker]:
    """A worker other than the one leased for the preflight, for the restart check's
    continuation: a second slot (idle before the pilot), else the spare, else a new one.

    The spare serves this once and is closed after it."""
    runtime = _runtime(key)
    if len(runtime.pool.slots) > 1:
        with runtime.pool.lease() as worker:
            yield worker
        return
    with _LOCK:
        spare, runtime.spare = runtime.spare, None
    worker = spare or SlotWorker(runtime.pool.slots[0].slot)
    try:
        yield worker
    finally:
        worker.close()
