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
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ablations.errors import Problem

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
HF_TOKEN = re.compile(rb"\bhf_[A-Za-z0-9]{30,}\b")
"""The shape of a Hugging Face access token (`hf_` and 34 letters or digits)."""
_TOKEN_TEXT = re.compile(r"\b(?:hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{36,})\b")
"""Tokens recognizable by their prefix alone: Hugging Face's `hf_...`, GitHub's `ghp_...`."""
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{8,})")
"""`Authorization: Bearer <token>` (and Basic): the scheme kept, the credential masked (a
word that only follows the scheme, "basic authentication", is not a credential)."""
_SECRET_FIELD = re.compile(
    r"(?i)\b([\w-]*(?:secret|token|password|passwd|credential|signature|api_?key|access_?key|"
    r"signing_?key|auth_?string)[\w-]*)(['\"]?)(\s*[=:]\s*)(['\"]?)([^\s'\"&,;)}\]]{4,})"
)
"""`name=value` or `name: value` where the name says secret (X-Amz-Security-Token=...,
aws_secret_access_key: ..., "password": "...", 'secret_access_key': '...'): the name kept, the
value masked."""
_EXCEPTION_NAME = re.compile(r"(?i)(error|exception|warning)$")
"""`NoCredentialsError: Unable to locate credentials` names an exception, not a field."""
_SECRET_LOOKING = re.compile(r"[0-9_./+=~-]|.[A-Z]")
"""A value with a digit, a symbol or a capital past its first letter looks generated; a plain
word ("unknown", "Unable", "expired") reads as prose and stays."""
LONG_SECRET = 20
"""A value this long is masked even when it reads as one word: no field holds such prose."""


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
    if HF_TOKEN.search(data):
        found.append("a Hugging Face token")
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
    text = _TOKEN_TEXT.sub(MASK, text)
    text = _BEARER.sub(_masked_bearer, text)
    return _SECRET_FIELD.sub(_masked_field, text)


_ESCAPES = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|.)"  # CSI, OSC, ESC x
    r"|[\x00-\x08\x0b-\x1f\x7f\x9b]"
)
"""Terminal escapes (colours, cursor moves, a title set by `ESC ]`) and control characters
but newline and tab: a record's text is shown in terminals and the UI, and read by tools."""


def without_escapes(text: str) -> str:
    """`text` without terminal escape sequences or control characters (newlines and tabs
    kept): a library's coloured error, a program's progress bar, quoted into a record."""
    return _ESCAPES.sub("", text)


def looks_secret(value: str) -> bool:
    """Whether an unquoted value after a secret-named field reads as a credential, not a word."""
    return len(value) >= LONG_SECRET or _SECRET_LOOKING.search(value) is not None


def _masked_bearer(match: re.Match[str]) -> str:
    scheme, space, value = match.groups()
    return f"{scheme}{space}{MASK}" if looks_secret(value) else match.group(0)


def _masked_field(match: re.Match[str]) -> str:
    name, closing, separator, quote, value = match.groups()
    if value == MASK or _EXCEPTION_NAME.search(name):
        return match.group(0)
    # `token=x`, `"password": "x"`: a field's value whatever it reads as; `name: word`: prose
    structured = "=" in separator or bool(closing or quote)
    if not structured and not looks_secret(value):
        return match.group(0)
    return f"{name}{closing}{separator}{quote}{MASK}"


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


CREDENTIAL_FIELDS = frozenset(
    {
        "password", "passwd", "secret", "secret_key", "secret_access_key",
        "aws_secret_access_key", "access_key_id", "aws_access_key_id", "session_token",
        "aws_session_token", "security_token", "token", "access_token", "auth_token",
        "api_key", "apikey", "hf_token", "private_key", "client_secret", "account_key",
        "sas_token", "credentials",
    }
)  # fmt: skip
"""Mapping keys that name a credential (compared lowercased, `-` read as `_`)."""
_PRESIGNED = re.compile(
    r"(?i)[?&;](x-amz-signature|x-amz-security-token|x-amz-credential|x-goog-signature|"
    r"x-goog-credential|sig)="
)
"""A presigned (S3, GCS) or shared-access (Azure `sig=`) URL's query: the URL is the key."""
_ENVIRONMENT_ONLY = (
    "the plan is copied into the output folder: give credentials through the environment "
    "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, a profile or an instance role)"
)


def credential_problems(data: Any) -> list[Problem]:
    """Where a plan's parsed YAML holds a credential: a field named like one, a presigned
    URL's signature or token, an AWS key id or a Hugging Face token. Each problem names the
    field and never the value. Shared (aliased) parts are looked at once."""
    problems: list[Problem] = []
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict | list):
            if id(value) in seen:
                continue
            seen.add(id(value))
        if isinstance(value, dict):
            for key, item in value.items():
                child = f"{path}.{key}" if path else str(key)
                if str(key).lower().replace("-", "_") in CREDENTIAL_FIELDS:
                    problems.append(
                        Problem(child, f"a credential field: {_ENVIRONMENT_ONLY}", show_value=False)
                    )
                else:
                    stack.append((child, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, str) and (what := _credential_in(value)):
            problems.append(Problem(path, f"holds {what}: {_ENVIRONMENT_ONLY}", show_value=False))
    return sorted(problems, key=lambda p: p.path)


def _credential_in(text: str) -> str | None:
    """What credential `text` holds, named without quoting it, or None."""
    if (presigned := _PRESIGNED.search(text)) is not None:
        return f"a presigned URL's credentials ({presigned.group(1)})"
    if _AWS_KEY_ID_TEXT.search(text):
        return "an AWS access key id"
    if _TOKEN_TEXT.search(text):
        return "an access token"
    return None
