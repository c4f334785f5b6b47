"""Keep credentials out of what leaves the process: the output folder and every message.

Credentials reach a campaign only through the environment (AWS_* variables, profiles, instance
roles; see `ablations.checkpoint.store.open_store`). Ways one could still leak: a URL carrying
`user:password@` or a signed query (`X-Amz-Security-Token=...`), an error message that quotes
a secret, a file that is not a plan quoted back as if it were one. `redact` masks them in any
message at the few places a message leaves the process (`ablate`'s error lines, progress and
log lines, flow and task state messages, artifacts, notifications); `redact_url` strips a URL
when the manifest is written; `find_credentials` looks for them in any file (`ablate verify`
runs it on every file).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SECRET_NAME = re.compile(
    r"SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE_KEY|SIGNING_KEY|AUTH",
    re.IGNORECASE,
)
"""Environment variable names whose values are secrets (AWS_SECRET_ACCESS_KEY, *_TOKEN,
ABLATE_SIGNING_KEY, PREFECT_API_AUTH_STRING...)."""
MIN_SECRET_LENGTH = 8
"""Shorter values (a region, "true", "1") would match ordinary text: never treated as secrets."""
USERINFO = re.compile(rb"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/@:\"'<>]+:[^\s/@\"'<>]+@")
"""`scheme://user:password@` anywhere in bytes."""
AWS_KEY_ID = re.compile(rb"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
"""The shape of a real AWS access key id (long-term AKIA..., temporary ASIA...)."""
_SECRET_QUERY = re.compile(r"sig|signature|token|secret|password|credential|key", re.IGNORECASE)
MASK = "REDACTED"
"""What stands where a secret was."""
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>`]+")
"""A URL in running text: up to the first space or quote."""
_BARE_USERINFO = re.compile(r"(?<![\w/])[A-Za-z][\w.+%~-]*:[^\s@/'\"<>`]+@(?=[\w.-])")
"""`KEY:SECRET@host` without a scheme (a bucket written `KEY:SECRET@bucket/prefix`)."""
_AWS_KEY_ID_TEXT = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,}")
"""`Authorization: Bearer <token>` (and Basic): the scheme kept, the credential masked."""
_SECRET_FIELD = re.compile(
    r"(?i)\b([\w-]*(?:secret|token|password|passwd|credential|signature|api_?key|access_?key|"
    r"signing_?key|auth_?string)[\w-]*)(\s*[=:]\s*|\s*\"\s*:\s*)(['\"]?)([^\s'\"&,;)}\]]{4,})"
)
"""`name=value` or `name: value` where the name says secret (X-Amz-Security-Token=...,
aws_secret_access_key: ..., "password": "..."): the name kept, the value masked."""


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


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` fit to leave the process: every URL without its user info and query, known
    credential shapes masked (AWS key ids, bearer tokens, `KEY:SECRET@`, `secret=value`), and
    the value of every secret-named environment variable masked wherever it appears.

    Idempotent and cheap (a few regular expressions): applied where a message leaves the
    process, not at every raise."""
    if not text:
        return text
    for value in sorted(secret_values(environ).values(), key=len, reverse=True):
        shown = value.decode(errors="replace")
        if shown in text:
            text = text.replace(shown, MASK)
    text = _URL.sub(lambda m: _redacted_url(m.group(0)), text)
    text = _BARE_USERINFO.sub(f"{MASK}@", text)
    text = _AWS_KEY_ID_TEXT.sub(MASK, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return _SECRET_FIELD.sub(_masked_field, text)


def _masked_field(match: re.Match[str]) -> str:
    name, separator, quote, value = match.groups()
    return match.group(0) if value == MASK else f"{name}{separator}{quote}{MASK}"


def _redacted_url(url: str) -> str:
    """A URL without user info, query or fragment (a signed query is a credential: all of it
    goes, not only the parameters whose names look secret)."""
    scheme, _, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    authority = authority.rpartition("@")[2]
    path, question, _ = path.partition("?")
    if not slash:
        authority, question, _ = authority.partition("?")
    path = path.partition("#")[0]
    return f"{scheme}://{authority}{slash}{path}" + (f"?{MASK}" if question else "")
