"""The layout of a run's checkpoints and the commit record that makes one exist.

    <store>/<campaign>/<run_id>/step-<NNNNNNNN>/model.pt     the model's weights
                                               state.pt     everything else
                                               COMMIT.json  written last: identity, sizes, sha256

A step folder without a readable commit record is partial (a save that died) and is never
listed or loaded. A committed one is loaded only if its identity (plan hash, run id) matches
and every object has the recorded size and sha256.

An attempt of a run on a work pool writes its step folders under an attempt folder of its
own, `<store>/<campaign>/<run_id>/attempts/<attempt>/step-<NNNNNNNN>/`, so two attempts of
one run (a lost one still alive beside its replacement) never write, prune or remove the
same objects; a resume reads the newest commit of any of them.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from ablations.checkpoint import held
from ablations.checkpoint.fence import ACCEPTED
from ablations.checkpoint.store import Store
from ablations.errors import (
    ForeignCheckpoint,
    ProtectedObject,
    RefusedCheckpoint,
    StoreError,
    UntrustedObject,
)
from ablations.security.signing import sign, signing_key, verify

COMMIT = "COMMIT.json"
MAX_COMMIT_BYTES = 1 << 20
"""A commit record is a few hundred bytes; a bigger one is not ours and is never read whole."""
ATTEMPTS = "attempts"
FORMAT = 1
_STEP_DIR = re.compile(r"^step-(\d{8})$")


@dataclass(frozen=True)
class Identity:
    """Whose checkpoint it is: checked on every load so no run resumes another's state."""

    campaign_id: str
    run_id: str
    plan_hash: str
    attempt: str | None = None
    """The work-pool attempt that writes here (None: the run's one writer, a local slot)."""

    @property
    def run_prefix(self) -> str:
        return f"{self.campaign_id}/{self.run_id}"

    @property
    def prefix(self) -> str:
        """Where this writer's step folders are."""
        if self.attempt is None:
            return self.run_prefix
        return f"{self.run_prefix}/{ATTEMPTS}/{self.attempt}"


def step_key(identity: Identity, step: int) -> str:
    return f"{identity.prefix}/step-{step:08d}"


def scan(store: Store, identity: Identity) -> tuple[list[int], list[int]]:
    """(committed steps, partial steps) of a run, each ascending. One listing call."""
    objects: dict[int, set[str]] = {}
    for key in store.keys(identity.prefix):
        parts = key[len(identity.prefix) + 1 :].split("/")
        match = _STEP_DIR.match(parts[0])
        if match and len(parts) == 2:
            objects.setdefault(int(match.group(1)), set()).add(parts[1])
    committed = sorted(step for step, names in objects.items() if COMMIT in names)
    partial = sorted(step for step, names in objects.items() if COMMIT not in names)
    return committed, partial


def committed_by_any(store: Store, identity: Identity) -> list[tuple[int, Identity]]:
    """Every committed step of the run, in its own folder or any attempt's, as (step, the
    writer's identity), ascending by step. One listing call."""
    return _committed(_step_folders(store, identity), identity)


def survey(store: Store, identity: Identity) -> tuple[list[int], list[tuple[int, Identity]]]:
    """(this writer's partial steps, ascending; every committed step of the run as
    `committed_by_any` gives them): what a resume reads first, in one listing call where
    `scan` and `committed_by_any` made two (a pool run's start waited on both)."""
    folders = _step_folders(store, identity)
    partial = sorted(
        step
        for (step, attempt), names in folders.items()
        if attempt == identity.attempt and COMMIT not in names
    )
    return partial, _committed(folders, identity)


def _step_folders(store: Store, identity: Identity) -> dict[tuple[int, str | None], set[str]]:
    """Each step folder of the run, the run's own and its attempts', by (step, attempt):
    the names of the objects in it."""
    objects: dict[tuple[int, str | None], set[str]] = {}
    for key in store.keys(identity.run_prefix):
        parts = key[len(identity.run_prefix) + 1 :].split("/")
        attempt = None
        if len(parts) == 4 and parts[0] == ATTEMPTS:
            attempt, parts = parts[1], parts[2:]
        match = _STEP_DIR.match(parts[0])
        if match and len(parts) == 2:
            objects.setdefault((int(match.group(1)), attempt), set()).add(parts[1])
    return objects


def _committed(
    folders: dict[tuple[int, str | None], set[str]], identity: Identity
) -> list[tuple[int, Identity]]:
    found = [
        (step, replace(identity, attempt=attempt))
        for (step, attempt), names in folders.items()
        if COMMIT in names
    ]
    return sorted(found, key=lambda item: (item[0], item[1].attempt or ""))


def write(store: Store, identity: Identity, step: int, payload: dict[str, bytes]) -> str:
    """Write the payload objects, then the commit record; return the checkpoint's URI."""
    return write_committed(store, identity, step, payload)[0]


def write_committed(
    store: Store,
    identity: Identity,
    step: int,
    payload: dict[str, bytes],
    hold: Callable[[str], None] | None = None,
) -> tuple[str, str]:
    """`write`; return (the checkpoint's URI, the digest its campaign holds: the sha256 of
    the commit record's bytes, `checkpoint/held.py`). `hold` gets that digest before the
    commit record is written: a process killed between the two then leaves a held digest
    without its commit (harmless: an uncommitted step is never resumed), never a commit its
    campaign does not hold (refused at the resume, which would retrain a whole interval)."""
    base = step_key(identity, step)
    entries = {}
    for name, data in payload.items():
        store.put(f"{base}/{name}", data)
        entries[name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    record = {
        "format": FORMAT,
        "campaign_id": identity.campaign_id,
        "run_id": identity.run_id,
        "plan_hash": identity.plan_hash,
        "step": step,
        "committed_at": time.time(),
        "objects": entries,
    }
    record = sign(record, signing_key())  # with ABLATE_SIGNING_KEY: an HMAC over the fields
    data = json.dumps(record, indent=1, sort_keys=True).encode()
    if hold is not None:
        hold(held.digest(data))
    store.put(f"{base}/{COMMIT}", data)
    return store.uri(base), held.digest(data)


def read(
    store: Store, identity: Identity, step: int, *, holds: dict[int, str] | None = None
) -> dict[str, bytes]:
    """The verified payload of a committed step (`RefusedCheckpoint`, `ForeignCheckpoint`).

    `holds`: the digests the campaign holds for the run's steps (`checkpoint/held.py`); the
    commit record must be the one held for `step`. None: the campaign holds none."""
    base = step_key(identity, step)
    where = store.uri(base)
    try:
        data = store.get(f"{base}/{COMMIT}", limit=MAX_COMMIT_BYTES)
    except StoreError as exc:
        raise RefusedCheckpoint(f"{where}: unreadable commit record: {exc}") from exc
    if holds is not None:
        _require_held(data, holds, step, where, identity.run_id)
    try:
        record = json.loads(data)
        verify(record, signing_key(), f"{where}/{COMMIT}")
        objects = dict(record["objects"])
    except UntrustedObject as exc:
        raise RefusedCheckpoint(str(exc)) from exc
    except (StoreError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RefusedCheckpoint(f"{where}: unreadable commit record: {exc}") from exc
    mine = {"run_id": identity.run_id, "plan_hash": identity.plan_hash, "step": step}
    theirs = {k: record.get(k) for k in mine}
    if theirs != mine:
        raise ForeignCheckpoint(
            f"{where} belongs to {theirs}, not to this run {mine}: refused (a checkpoint of "
            "another plan or run is never resumed; use a fresh store prefix or remove it)"
        )
    payload = {}
    for name, entry in objects.items():
        try:
            data = store.get(f"{base}/{name}", limit=int(entry["size"]))
        except (StoreError, KeyError, TypeError, ValueError) as exc:
            raise RefusedCheckpoint(f"{where}: object {name} is missing or refused: {exc}") from exc
        if len(data) != entry["size"]:
            raise RefusedCheckpoint(
                f"{where}/{name} is truncated or padded: {len(data)} bytes, commit record "
                f"says {entry['size']}"
            )
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise RefusedCheckpoint(f"{where}/{name} is corrupt: sha256 differs from its commit")
        payload[name] = data
    return payload


def _require_held(data: bytes, holds: dict[int, str], step: int, where: str, run: str) -> None:
    """`RefusedCheckpoint` unless the commit record is the one the campaign holds for `step`:
    a record rewritten in the store (a model swapped in, its sha256 updated) verifies its own
    objects, so only the campaign's digest tells it from the run's own commit."""
    expected, found = holds.get(step), held.digest(data)
    if expected == found:
        return
    why = (
        f"holds sha256 {expected[:12]}... for it, this record hashes to {found[:12]}..."
        if expected is not None
        else "holds no commit of this step"
    )
    raise RefusedCheckpoint(
        f"{where}/{COMMIT} is not a commit this campaign recorded: {held.COMMITS}/{run}.json "
        f"{why} (rewritten in the store, or committed by someone else); refused"
    )


def remove(store: Store, identity: Identity, steps: list[int]) -> None:
    """Delete step folders (their commit record first, so a half-deleted one is partial)."""
    for step in steps:
        base = step_key(identity, step)
        store.delete(f"{base}/{COMMIT}")
        store.delete(base)


def remove_writer(store: Store, identity: Identity) -> None:
    """Delete everything one writer saved (`identity.prefix`: a restart check's short runs).

    Refused (`ProtectedObject`, nothing deleted) when the prefix holds what is not the
    writer's: the campaign's pointer to a run's accepted pool attempt, or any object of
    another attempt's folder. Without this, a helper that clears a run's folder fences out
    the very attempt the campaign waits on (the external restart check once did, so no
    user's own code passed preflight on a pool)."""
    foreign = [key for key in store.keys(identity.prefix) if not _owned_by(identity, key)]
    if foreign:
        shown = ", ".join(store.uri(key) for key in sorted(foreign)[:3])
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise ProtectedObject(
            f"refusing to delete {store.uri(identity.prefix)}: it holds what is not "
            f"{identity.run_id}'s own saves to delete: {shown}{more}"
        )
    store.delete(identity.prefix)


def _owned_by(identity: Identity, key: str) -> bool:
    """Whether `key` (under the writer's prefix) is the writer's own to delete."""
    parts = key[len(identity.prefix) + 1 :].split("/")
    if parts[-1] == ACCEPTED:  # the campaign's pointer to the accepted pool attempt
        return False
    # a run's own folder (no attempt) holds every attempt's folder below it: none is its own
    return not (identity.attempt is None and parts[0] == ATTEMPTS)


def prune(store: Store, identity: Identity, keep_last: int, newest: int) -> None:
    """Keep the `keep_last` newest committed steps (always `newest`); drop partial ones."""
    committed, partial = scan(store, identity)
    # `newest` was just committed, so it is among the kept ones: the only committed
    # checkpoint is never deleted. Steps above it are never touched here.
    kept = set([s for s in committed if s <= newest][-max(1, keep_last) :])
    remove(store, identity, [s for s in committed if s not in kept and s < newest])
    remove(store, identity, [s for s in partial if s != newest])
