"""The live slots of a running campaign: one worker per slot, leased by run tasks.

Prefect tasks receive only ids and paths, so the workers (which hold processes) live here,
keyed by the campaign's output folder, for the lifetime of the flow run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ablations.errors import AblationError
from ablations.slots import SlotPool, SlotSpec
from ablations.worker import SlotWorker

_RUNTIMES: dict[str, SlotPool[SlotWorker]] = {}
_LOCK = threading.Lock()


@contextmanager
def open_slots(key: str, slots: list[SlotSpec]) -> Iterator[SlotPool[SlotWorker]]:
    """Start a worker per slot now, and stop them all at the end.

    Workers start at once (not at their first run) so their torch import overlaps whatever
    the campaign does meanwhile. Opened again for the same key (the CLI opens the slots
    before Prefect's server starts; the flow opens them too), the open pool is reused and
    the outer opener closes it.
    """
    with _LOCK:
        existing = _RUNTIMES.get(key)
    if existing is not None:
        yield existing
        return
    pool = SlotPool([SlotWorker(slot) for slot in slots])
    for worker in pool.slots:
        worker.start()
    with _LOCK:
        _RUNTIMES[key] = pool
    try:
        yield pool
    finally:
        with _LOCK:
            _RUNTIMES.pop(key, None)
        for worker in pool.slots:
            worker.close()


def slots_for(key: str) -> SlotPool[SlotWorker]:
    """The slot pool of the running campaign `key`."""
    with _LOCK:
        pool = _RUNTIMES.get(key)
    if pool is None:
        raise AblationError(f"no slots are open for campaign folder {key}")
    return pool
