"""Checkpoints on object storage: full state, commit record, tuned interval, exact resume.

store.py     the `Store` protocol over fsspec (file, memory, S3) and `open_store`
commit.py    step folders, the commit record written last, verified reads, retention
held.py      each commit's digest as the campaign's folder holds it, checked at resume
state.py     capture to host memory, safe (weights-only) load, exact restore
saver.py     one background save in flight, retried with backoff
outage.py    every store call of a run ridden through an outage (bounded backoff)
fence.py     which work-pool attempt of a run may commit (the campaign's pointer)
interval.py  steps | seconds | auto (Young/Daly, capped by the tolerable loss)
manager.py   `CheckpointManager`, the driver's `CheckpointHook` for one run

The names below load their module on first use: the campaign process plans intervals and
reads commit records without importing torch, which only the slot workers need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The two refusals a caller catches: from the exception tree, which imports nothing.
from ablations.errors import ForeignCheckpoint, RefusedCheckpoint

if TYPE_CHECKING:
    from ablations.checkpoint.commit import Identity
    from ablations.checkpoint.interval import IntervalPolicy, overhead, young_daly
    from ablations.checkpoint.manager import CheckpointManager
    from ablations.checkpoint.outage import OutlastingStore
    from ablations.checkpoint.saver import Retry
    from ablations.checkpoint.store import FsspecStore, Store, open_store
    from ablations.run.records import RunSpec

_HOME = {
    "CheckpointManager": "manager",
    "FsspecStore": "store",
    "Identity": "commit",
    "IntervalPolicy": "interval",
    "Retry": "saver",
    "Store": "store",
    "open_store": "store",
    "overhead": "interval",
    "young_daly": "interval",
}

__all__ = [
    "CheckpointManager",
    "ForeignCheckpoint",
    "FsspecStore",
    "Identity",
    "IntervalPolicy",
    "RefusedCheckpoint",
    "Retry",
    "Store",
    "hook_for",
    "open_store",
    "overhead",
    "young_daly",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'ablations.checkpoint' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ablations.checkpoint.{module}"), name)


def hook_for(spec: RunSpec, store: OutlastingStore | None = None) -> CheckpointManager | None:
    """The checkpoint hook of a run, or None when its plan does not checkpoint.

    Opens and probes the store: `StoreError` here means no training has started. With
    `store` (a pool host's attempt store, opened by this process and in use), that one: a
    second client and its probe (three requests) were a third of a second of each pool run."""
    from ablations.checkpoint.manager import OUTLASTED, CheckpointManager

    if spec.checkpoint is None:
        return None
    if store is None:
        return CheckpointManager(spec)
    return CheckpointManager(spec, store=store, retry=OUTLASTED)  # it rides outages too
