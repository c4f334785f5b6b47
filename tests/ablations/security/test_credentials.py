"""No secret in any message that leaves the process: `redact` itself, then every error path of
`ablate` swept with planted secrets (a signed query, `KEY:SECRET@`, an AWS key id, a bearer
token, a secret environment variable's value, a private note given as a plan)."""

from __future__ import annotations

import argparse
import copy
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.cli import main
from ablations.cli.registry import COMMANDS
from ablations.errors import InputError, StoreError
from ablations.run.records import CheckpointSummary, RunError
from ablations.security.credentials import MASK, redact
from ablations.text.say import PROGRESS_LOG, say
from tests.conftest import DEMO_PLAN

TOKEN = "FwoGZXIvYXdzEJr0planted0token"
KEY_ID = "AKIAPLANTEDKEY000000"
SECRET = "wJalrXUtnFEMIplanted0secret"
ENV_SECRET = "env-planted-secret-value"
NOTE_SECRET = "hunter2-planted-note"
PLANTED = (TOKEN, KEY_ID, SECRET, ENV_SECRET, NOTE_SECRET)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            f"https://s3.example.com/b?X-Amz-Security-Token={TOKEN}&X-Amz-Date=1 refused",
            f"https://s3.example.com/b?{MASK} refused",
        ),
        (f"'s3://{KEY_ID}:{SECRET}@bucket/prefix'", "'s3://bucket/prefix'"),
        (f"store {KEY_ID}:{SECRET}@bucket/prefix", f"store {MASK}@bucket/prefix"),
        (f"http://user:{SECRET}@127.0.0.1:9000/x", "http://127.0.0.1:9000/x"),
        (f"key id {KEY_ID} denied", f"key id {MASK} denied"),
        (f"Authorization: Bearer {TOKEN}", f"Authorization: Bearer {MASK}"),
        (f"aws_secret_access_key = {SECRET}", f"aws_secret_access_key = {MASK}"),
        (f'{{"password": "{SECRET}"}}', f'{{"password": "{MASK}"}}'),
        # what must stay as it is: our own lines
        ("file:///data/ckpt/c/r/step-00000010", "file:///data/ckpt/c/r/step-00000010"),
        ("width=16 accuracy=0.97 at step 3: lr=0.01", "width=16 accuracy=0.97 at step 3: lr=0.01"),
        ("ABLATE_SIGNING_KEY is set: refused", "ABLATE_SIGNING_KEY is set: refused"),
        ("http://127.0.0.1:4200/api", "http://127.0.0.1:4200/api"),
        ("user@example.com wrote", "user@example.com wrote"),
    ],
)
def test_redact_masks_credential_shapes_and_keeps_the_rest(text: str, shown: str) -> None:
    assert redact(text, {}) == shown
    assert redact(shown, {}) == shown  # idempotent: applied twice on the way out is harmless


CLOUD_ERRORS = (
    # AWS (botocore, s3fs)
    "botocore.exceptions.NoCredentialsError: Unable to locate credentials",
    "botocore.exceptions.PartialCredentialsError: Partial credentials found in env, missing: "
    "aws_secret_access_key",
    "An error occurred (InvalidAccessKeyId) when calling the PutObject operation: The AWS Access "
    "Key Id you provided does not exist in our records.",
    "An error occurred (SignatureDoesNotMatch) when calling the GetObject operation: The request "
    "signature we calculated does not match the signature you provided. Check your key and "
    "signing method.",
    "An error occurred (ExpiredToken) when calling the ListObjectsV2 operation: The provided "
    "token has expired.",
    "An error occurred (InvalidClientTokenId) when calling the GetCallerIdentity operation: The "
    "security token included in the request is invalid.",
    "An error occurred (AccessDenied) when calling the PutObject operation: Access Denied",
    "botocore.exceptions.CredentialRetrievalError: Error when retrieving credentials from "
    "container-role: Error retrieving metadata: Received error when attempting to retrieve "
    "container metadata",
    "PermissionError: Forbidden: token: expired",
    # Google Cloud Storage (gcsfs, google-auth)
    "google.auth.exceptions.DefaultCredentialsError: Your default credentials were not found. "
    "To set up Application Default Credentials, see "
    "https://cloud.google.com/docs/authentication/external/set-up-adc for more information.",
    "google.auth.exceptions.RefreshError: ('invalid_grant: Invalid JWT Signature.', "
    "{'error': 'invalid_grant', 'error_description': 'Invalid JWT Signature.'})",
    "403 Forbidden: Permission 'storage.objects.get' denied on resource (or it may not exist).",
    "google.auth.exceptions.TransportError: Failed to retrieve http://metadata.google.internal/"
    "computeMetadata/v1/instance/service-accounts/default/token from the Google Compute Engine "
    "metadata service.",
    # Azure (adlfs, azure-identity)
    "azure.identity.CredentialUnavailableError: EnvironmentCredential authentication "
    "unavailable. Environment variables are not fully configured.",
    "azure.core.exceptions.ClientAuthenticationError: Server failed to authenticate the request. "
    "Make sure the value of Authorization header is formed correctly including the signature. "
    "ErrorCode:AuthenticationFailed",
    "AuthorizationPermissionMismatch: This request is not authorized to perform this operation "
    "using this permission.",
    "Basic authentication failed: the account key: unknown key",
    "ValueError: unknown key 'secret' in the credentials: expected account_name",
)


@pytest.mark.parametrize("message", CLOUD_ERRORS)
def test_redact_keeps_the_words_of_common_cloud_errors(message: str) -> None:
    assert redact(message, {}) == message


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("login hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567", f"login {MASK}"),
        ("Authorization: Bearer eyJhbGciOi.eyJzdWIiOiIx.c2lnbmF0", f"Authorization: Bearer {MASK}"),
        ("GET /v1?token=abcdef&x=1", f"GET /v1?token={MASK}&x=1"),
        ("password: hunter22", f"password: {MASK}"),
        (f"{{'secret_access_key': '{SECRET}'}}", f"{{'secret_access_key': '{MASK}'}}"),
    ],
)
def test_redact_masks_tokens_by_shape_and_by_field(text: str, shown: str) -> None:
    assert redact(text, {}) == shown


def test_redact_masks_the_value_of_every_secret_named_variable() -> None:
    env = {"AWS_SECRET_ACCESS_KEY": ENV_SECRET, "AWS_REGION": "eu-west-1", "HOME": "/root"}
    assert redact(f"got {ENV_SECRET} in eu-west-1", env) == f"got {MASK} in eu-west-1"


@pytest.fixture
def planted_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", ENV_SECRET)


def _plan(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    data = copy.deepcopy(yaml.safe_load(DEMO_PLAN.read_text()))
    edit(data)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _endpoint_with_token(data: dict[str, Any]) -> None:
    data["checkpoint"]["store"] = "s3://bucket/ablate"
    data["checkpoint"]["endpoint_url"] = f"https://s3.example.com/?X-Amz-Security-Token={TOKEN}"


def _store_with_userinfo(data: dict[str, Any]) -> None:
    data["checkpoint"]["store"] = f"s3://{KEY_ID}:{SECRET}@bucket/ablate"


def _endpoint_with_userinfo(data: dict[str, Any]) -> None:
    data["checkpoint"]["store"] = "s3://bucket/ablate"
    data["checkpoint"]["endpoint_url"] = f"https://{KEY_ID}:{SECRET}@s3.example.com"


def _presigned_store(data: dict[str, Any]) -> None:
    data["checkpoint"]["store"] = (
        f"s3://bucket/ablate?X-Amz-Credential={KEY_ID}%2F20250101&X-Amz-Signature={SECRET}"
    )


def _presigned_param(data: dict[str, Any]) -> None:
    data["workload"]["params"]["data_url"] = (
        f"https://b.s3.amazonaws.com/d.npz?X-Amz-Security-Token={TOKEN}&X-Amz-Date=1"
    )


def _endpoint_mapping(data: dict[str, Any]) -> None:
    data["checkpoint"]["store"] = "s3://bucket/ablate"
    data["checkpoint"]["endpoint_url"] = {"url": "http://127.0.0.1:9", "secret_access_key": SECRET}


def _secret_as_a_level(data: dict[str, Any]) -> None:
    data["factors"]["width"]["levels"] = [{"value": {"token": ENV_SECRET}}]  # not a scalar


PLANS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "endpoint query": (lambda d: _plan(d, _endpoint_with_token), "checkpoint.endpoint_url"),
    "store userinfo": (lambda d: _plan(d, _store_with_userinfo), "checkpoint.store"),
    "endpoint userinfo": (lambda d: _plan(d, _endpoint_with_userinfo), "checkpoint.endpoint_url"),
    "env value": (lambda d: _plan(d, _secret_as_a_level), "factors.width"),
    "presigned store": (lambda d: _plan(d, _presigned_store), "checkpoint.store: holds a presign"),
    "presigned param": (
        lambda d: _plan(d, _presigned_param),
        "workload.params.data_url: holds a presigned URL's credentials (X-Amz-Security-Token)",
    ),
    "endpoint mapping": (
        lambda d: _plan(d, _endpoint_mapping),
        "checkpoint.endpoint_url.secret_access_key: a credential field",
    ),
    "private note": (
        lambda d: _write(d / "note.txt", f"Dear diary, the password is {NOTE_SECRET}.\n"),
        "not a YAML mapping (text, 50 bytes): not a plan",
    ),
    "note as mapping": (
        lambda d: _write(d / "note.yaml", f"vault: {NOTE_SECRET}\naws: {KEY_ID}\n"),
        "with none of a plan's keys",
    ),
    "note, bad YAML": (
        lambda d: _write(d / "note.md", f"# keys\npassword: {NOTE_SECRET}: x\n"),
        "not valid YAML at line 2",
    ),
}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("command", ["validate", "plan", "budget", "run"])
@pytest.mark.parametrize("planted", list(PLANS))
def test_every_plan_command_refuses_planted_secrets_without_quoting_them(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    planted_env: None,
    command: str,
    planted: str,
) -> None:
    make, named = PLANS[planted]
    path = make(tmp_path)
    argv = [command, str(path)] + (["--out", str(tmp_path / "out")] if command == "run" else [])
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert named in err  # the line still says what is wrong, and where
    assert not [s for s in PLANTED if s in out + err]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "raised",
    [
        InputError(f"endpoint https://h/?X-Amz-Security-Token={TOKEN} refused"),
        StoreError(f"cannot read s3://{KEY_ID}:{SECRET}@bucket/x: AccessDenied"),
        OSError(13, f"denied by Bearer {TOKEN}"),
        RuntimeError(f"the worker said {ENV_SECRET}"),
    ],
    ids=["input", "infrastructure", "os", "internal"],
)
def test_every_handler_of_main_redacts_its_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    planted_env: None,
    raised: Exception,
) -> None:
    def fails(args: argparse.Namespace) -> int:
        raise raised

    monkeypatch.setitem(COMMANDS, "schema", fails)
    assert main(["schema"]) in (1, 2)
    err = capsys.readouterr().err
    assert err.startswith(("error: ", "internal error: ")) and err.count("\n") == 1
    assert not [s for s in PLANTED if s in err]


def test_progress_lines_and_their_log_records_are_redacted(
    capsys: pytest.CaptureFixture[str], planted_env: None
) -> None:
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep()
    PROGRESS_LOG.addHandler(handler)
    try:
        say(f"  run failed: StoreError: cannot write s3://{KEY_ID}:{SECRET}@b/k ({ENV_SECRET})")
    finally:
        PROGRESS_LOG.removeHandler(handler)
    shown = capsys.readouterr().out + "".join(seen)
    assert "s3://b/k" in shown and not [s for s in PLANTED if s in shown]


def test_records_keep_no_secret_from_an_exception_text(planted_env: None) -> None:
    error = RunError(type="StoreError", message=f"s3://{KEY_ID}:{SECRET}@b/k?sig={TOKEN}")
    summary = CheckpointSummary(last_error=f"denied for {ENV_SECRET}", note=f"key {KEY_ID}")
    dumped = error.model_dump_json() + summary.model_dump_json()
    assert "s3://b/k" in dumped and not [s for s in PLANTED if s in dumped]
