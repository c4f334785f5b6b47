"""Which attempt of a run on a work pool the campaign accepts: the only one that may commit.

    <store>/<campaign>/<run_id>/accepted.json     {"attempt": "<flow run id>"}

The campaign writes the pointer before it waits on an attempt, and rewrites it when it
declares that attempt lost and submits another. An attempt reads it before each checkpoint
commit and before it leaves its result: once another attempt is accepted (this one was taken
for lost, yet is alive) it commits nothing more and says so in its log. The campaign reads
results only from the attempt it accepts, so a write that slipped in between the check and
the put is never read either: the pointer fences; the check saves the late attempt's work.

With `ABLATE_SIGNING_KEY` the pointer is signed (with the campaign and run it belongs to): one
that is unsigned, wrongly signed or copied from another run names no attempt, and so fences
every attempt until the campaign rewrites it. A signed pointer can still be replayed (put
back as an older copy of itself): the campaign takes a result only from the one attempt that
has one (`ablations.pool.trust`), so a pointer moved back to an older attempt is refused.
"""

from __future__ import annotations

import json
import re

from ablations.checkpoint.store import Store
from ablations.errors import (
    ObjectTooLarge,
    StoreError,
    SupersededAttempt,
    UntrustedObject,
)
from ablations.security.signing import sign, signing_key, verify

ACCEPTED = "accepted.json"
MAX_POINTER_BYTES = 4096
"""The pointer is one short line of JSON: a larger object is not ours and is never read."""
ATTEMPT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")
"""The ids the campaign gives attempts: an id becomes part of store keys, so `../x` never does."""


def _key(campaign_id: str, run_id: str) -> str:
    return f"{campaign_id}/{run_id}/{ACCEPTED}"


def accept(store: Store, campaign_id: str, run_id: str, attempt: str) -> None:
    """Make `attempt` the one attempt of the run whose commits count (the campaign's side);
    signed with `ABLATE_SIGNING_KEY` when it is set."""
    fields = {"attempt": attempt, "campaign_id": campaign_id, "run_id": run_id}
    store.put(_key(campaign_id, run_id), json.dumps(sign(fields, signing_key())).encode())


def accepted(store: Store, campaign_id: str, run_id: str) -> str | None:
    """The attempt the campaign accepts now, or None when it never submitted one.

    `StoreError` when the store does not answer: the caller retries rather than guess."""
    try:
        data = store.get(_key(campaign_id, run_id), limit=MAX_POINTER_BYTES)
    except ObjectTooLarge:
        return None  # not ours to trust (see below)
    except StoreError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return None
        raise
    try:
        fields = json.loads(data)
        attempt = fields["attempt"]
        key = signing_key()
        verify(fields, key, _key(campaign_id, run_id))
    except (ValueError, KeyError, TypeError, UntrustedObject):
        return None  # not ours to trust: fences every attempt until the campaign rewrites it
    if key is not None and (fields.get("campaign_id"), fields.get("run_id")) != (
        campaign_id,
        run_id,
    ):
        return None  # signed, but another run's pointer copied here
    if not isinstance(attempt, str) or not ATTEMPT_ID.fullmatch(attempt):
        return None  # the same: a key-unsafe id names no attempt the campaign submitted
    return attempt


def require_accepted(store: Store, campaign_id: str, run_id: str, attempt: str) -> None:
    """`SupersededAttempt` unless `attempt` is the accepted one (an attempt's side)."""
    holder = accepted(store, campaign_id, run_id)
    if holder is None:
        raise SupersededAttempt(
            f"attempt {attempt} of run {run_id}: the campaign accepts no attempt "
            f"({_key(campaign_id, run_id)} is missing or unreadable): nothing is committed"
        )
    if holder != attempt:
        raise SupersededAttempt(
            f"attempt {attempt} of run {run_id} was declared lost and attempt {holder} "
            "accepted instead: this attempt's writes are not committed"
        )
