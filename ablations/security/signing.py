"""Signed store objects: an HMAC over work-pool results and checkpoint commit records.

Whoever can write the campaign's store prefix (another tenant, a stale host, a mistaken
script) can write any object there. With `ABLATE_SIGNING_KEY` set in the environment of the
campaign and of every pool host (never in the store or the plan), each result and commit
record carries an HMAC-SHA256 of its fields, and one that is unsigned or wrongly signed is
refused, naming the object. Without the key nothing is signed, and results are still checked
against the spec they answer (`ablations.pool.trust`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from typing import Any

from ablations.errors import UntrustedObject

SIGNING_KEY_ENV = "ABLATE_SIGNING_KEY"
"""The environment variable holding the shared secret (any text; 32 random bytes in hex is
plenty: `python -c "import secrets; print(secrets.token_hex(32))"`)."""
SIGNATURE = "hmac"
"""The field of a signed object holding its signature."""


def signing_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The key from `ABLATE_SIGNING_KEY`, or None when signing is off (unset or empty)."""
    value = (os.environ if environ is None else environ).get(SIGNING_KEY_ENV, "")
    return value.encode() if value else None


def _digest(fields: Mapping[str, Any], key: bytes) -> str:
    body = {k: v for k, v in fields.items() if k != SIGNATURE}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()


def sign(fields: dict[str, Any], key: bytes | None) -> dict[str, Any]:
    """The fields with their signature added (unchanged when signing is off)."""
    return fields if key is None else {**fields, SIGNATURE: _digest(fields, key)}


def verify(fields: dict[str, Any], key: bytes | None, name: str) -> dict[str, Any]:
    """The fields, once their signature matches (`UntrustedObject` naming `name` when the
    key is set and the object is unsigned or signed with another key)."""
    if key is None:
        return fields
    given = fields.get(SIGNATURE)
    if not isinstance(given, str):
        raise UntrustedObject(f"{name}: not signed, and {SIGNING_KEY_ENV} is set: refused")
    if not hmac.compare_digest(given, _digest(fields, key)):
        raise UntrustedObject(
            f"{name}: its signature does not match (written without this campaign's "
            f"{SIGNING_KEY_ENV}, or altered since): refused"
        )
    return fields
