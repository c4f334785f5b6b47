"""Keep credentials out of the output folder: redact URLs on the way in, scan files after.

Credentials reach a campaign only through the environment (AWS_* variables, profiles, instance
roles; see `ablations.checkpoint.store.open_store`). Two ways one could still leak into what
the campaign writes: a URL carrying `user:password@` (an endpoint or a store URL), and an error
message that quotes a secret. `redact_url` strips the first when the manifest is written;
`find_credentials` looks for both in any file (`ablate verify` runs it on every file).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SECRET_NAME = re.compile(
    r"SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE_KEY", re.IGNORECASE
)
"""Environment variable names whose values are secrets (AWS_SECRET_ACCESS_KEY, *_TOKEN...)."""
MIN_SECRET_LENGTH = 8
"""Shorter values (a region, "true", "1") would match ordinary text: never treated as secrets."""
USERINFO = re.compile(rb"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/@:\"'<>]+:[^\s/@\"'<>]+@")
"""`scheme://user:password@` anywhere in bytes."""
AWS_KEY_ID = re.compile(rb"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
"""The shape of a real AWS access key id (long-term AKIA..., temporary ASIA...)."""
_SECRET_QUERY = re.compile(r"sig|signature|token|secret|password|credential|key", re.IGNORECASE)


def redact_url(url: str) -> str:
    """`url` without its `user:password@` part and without secret-looking query values."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or (not parts.netloc and not parts.query):
        return url
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, "REDACTED" if _SECRET_QUERY.search(k) else v) for k, v in pairs])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def secret_values(environ: Mapping[str, str] | None = None) -> dict[str, bytes]:
    """Variable name -> value of every secret-named variable in the environment."""
    env = os.environ if environ is None else environ
    return {
        name: value.encode()
        for name, value in env.items()
        if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_LENGTH
    }


def find_credentials(data: bytes, secrets: Mapping[str, bytes]) -> list[str]:
    """What in `data` looks like a credential, described without quoting it."""
    found = [f"the value of ${name}" for name, value in sorted(secrets.items()) if value in data]
    if USERINFO.search(data):
        found.append("a URL with user:password@")
    if AWS_KEY_ID.search(data):
        found.append("an AWS access key id")
    return found
