"""What a work-pool attempt leaves in the shared store, checked before the campaign uses it.

Whoever can write the campaign's store prefix can plant objects there, so everything read
back is untrusted input:

- a result is an envelope naming the spec it answers (kind, campaign, plan hash, run id,
  variant, seed, phase, attempt); one that answers another spec, does not parse, or (with
  `ABLATE_SIGNING_KEY`, `ablations.security.signing`) is unsigned or wrongly signed is refused, and
  the attempt is a failure with that reason;
- a run record must name the run it answers, and its artifacts' names are rebuilt from the
  run id (never taken from the record), so nothing lands outside the folder;
- the record carries the sha256 of every file it exports (`export_sha256`, inside the signed
  envelope): an export whose bytes differ is refused (`checked_export`), and a store read
  never follows a symbolic link (`ablations.checkpoint.store`);
- the accepted pointer names the attempt whose result is taken, and only when that attempt
  is the one that left a result (`require_sole_result`): a pointer put back to an older
  attempt (even a genuinely signed one) is refused, and the run gets a fresh attempt;
- every object is read with a size cap;
- a heartbeat keeps an attempt alive only while its checkpoints advance: a beat with no new
  committed step for `progress_timeout_s` is a lost attempt (`Liveness`).

No Prefect here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from ablations.errors import UntrustedObject, short_repr
from ablations.files.names import run_file_names
from ablations.run.records import PreflightReport, RunRecord, RunSpec
from ablations.security.signing import sign, signing_key, verify

MAX_RESULT_BYTES = 16 << 20
"""A result is a record of a few kilobytes (every evaluation included); 16 MiB is absurd."""
MAX_SMALL_BYTES = 64 << 10
"""An accepted pointer or a heartbeat: a line of JSON."""
MAX_ARTIFACT_BYTES = 8 << 30
"""One exported file (metrics, predictions, final weights), read whole into memory."""

Kind = Literal["run", "preflight"]


def artifact_names(run_id: str) -> dict[str, str]:
    """Every file a run may export, by kind, relative to the folder: rebuilt from the run id
    (as `ablations.training.run_files.write_run_files` names them), never read from a record."""
    return run_file_names(run_id)


def _identity(spec: RunSpec, kind: Kind, attempt: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "campaign_id": spec.campaign_id,
        "plan_hash": spec.plan_hash,
        "run_id": spec.run_id,
        "variant": spec.variant,
        "seed": spec.seed,
        "phase": spec.phase,
        "attempt": attempt,
    }


def seal(spec: RunSpec, kind: Kind, attempt: str, result: str) -> bytes:
    """The stored form of an attempt's result: the spec it answers, the result's JSON, and
    (with `ABLATE_SIGNING_KEY`) an HMAC over both."""
    fields = {**_identity(spec, kind, attempt), "result": result}
    return json.dumps(sign(fields, signing_key()), indent=1).encode()


def unseal(data: bytes, spec: RunSpec, kind: Kind, attempt: str, name: str) -> str:
    """The result's JSON, once the envelope answers this spec and attempt (and is signed
    when signing is on); `UntrustedObject` naming `name` and what is wrong otherwise."""
    try:
        fields = json.loads(data)
    except ValueError as exc:
        raise UntrustedObject(f"{name}: not a result envelope ({exc}): refused") from None
    if not isinstance(fields, dict) or not isinstance(fields.get("result"), str):
        raise UntrustedObject(f"{name}: not a result envelope: refused")
    verify(fields, signing_key(), name)
    wrong = [
        f"{key} {short_repr(fields.get(key))} (expected {short_repr(value)})"
        for key, value in _identity(spec, kind, attempt).items()
        if fields.get(key) != value
    ]
    if wrong:
        raise UntrustedObject(f"{name} answers another spec: {'; '.join(wrong)}: refused")
    result: str = fields["result"]
    return result


def checked_record(result: str, spec: RunSpec, name: str) -> RunRecord:
    """The run record in `result`, once it names this run and its artifacts are the files
    this run exports (`UntrustedObject` otherwise)."""
    try:
        record = RunRecord.model_validate_json(result)
    except ValidationError as exc:
        raise UntrustedObject(f"{name}: not a run record ({exc.error_count()} errors)") from None
    expected = {
        "run_id": spec.run_id,
        "variant": spec.variant,
        "seed": spec.seed,
        "phase": spec.phase,
        "category": spec.category,
    }
    wrong = [
        f"{key} {short_repr(getattr(record, key))} (expected {short_repr(value)})"
        for key, value in expected.items()
        if getattr(record, key) != value
    ]
    names = artifact_names(spec.run_id)
    wrong += [
        f"artifact {short_repr(kind)} at {short_repr(path)} "
        f"(expected {short_repr(names.get(kind))})"
        for kind, path in record.artifacts.items()
        if names.get(kind) != path
    ]
    if wrong:
        raise UntrustedObject(f"{name}: a record of another run: {'; '.join(wrong)}: refused")
    return record


def checked_export(record: RunRecord, relative: str, data: bytes, name: str) -> None:
    """`UntrustedObject` unless `data` (an export read from the store) is the file the
    result's record hashed under `relative`."""
    expected = record.export_sha256.get(relative)
    if expected is None:
        raise UntrustedObject(f"{name}: the result names no sha256 for {relative}: refused")
    got = hashlib.sha256(data).hexdigest()
    if got != expected:
        raise UntrustedObject(
            f"{name}: {relative} has sha256 {got[:12]}..., the result says {expected[:12]}...: "
            "refused"
        )


def require_sole_result(attempts: list[str], accepted: str, name: str) -> None:
    """`UntrustedObject` unless `accepted` is the only attempt of the run that left a result
    (`attempts`: every attempt with one). Only the accepted attempt commits, so another
    attempt's result means the pointer was moved back to it, or two attempts raced: which
    result is the run's cannot be known, and a fresh attempt decides."""
    others = sorted(set(attempts) - {accepted})
    if others:
        raise UntrustedObject(
            f"{name}: the accepted pointer names attempt {accepted}, but attempt(s) "
            f"{', '.join(others)} left a result too (a pointer moved back, or a race): refused"
        )


def checked_preflight(result: str, name: str) -> PreflightReport:
    """The preflight report in `result` (its envelope already named the spec)."""
    try:
        return PreflightReport.model_validate_json(result)
    except ValidationError as exc:
        raise UntrustedObject(
            f"{name}: not a preflight report ({exc.error_count()} errors)"
        ) from None


@dataclass
class Liveness:
    """When an attempt is lost: no new heartbeat for `heartbeat_timeout_s`, or no new
    committed checkpoint step for `progress_timeout_s` while it is running. A heartbeat says
    the host is up; only progress says the run is, so a beat that is kept going (a hung
    run, or one written by someone else) cannot keep a dead attempt alive forever."""

    heartbeat_timeout_s: float
    progress_timeout_s: float
    beat: str | None = None
    progress: int | None = None
    beat_at: float = 0.0
    progress_at: float = 0.0
    started: bool = field(default=False)

    def observe(self, now: float, running: bool, beat: str | None, progress: int | None) -> str:
        """Why the attempt is lost at `now`, or "" while it is alive (or not yet running)."""
        if not self.started or not running:
            self.started = running
            self.beat, self.progress, self.beat_at, self.progress_at = beat, progress, now, now
            return ""
        # A beat that could not be read (None: mid-write, or gone) is no news: it neither
        # counts as a fresh heartbeat nor makes the last one's host unknown.
        if beat is not None and beat != self.beat:
            self.beat, self.beat_at = beat, now
        if progress != self.progress:
            self.progress, self.progress_at = progress, now
        if now - self.beat_at > self.heartbeat_timeout_s:
            return f"no heartbeat for {self.heartbeat_timeout_s:.0f} s"
        if now - self.progress_at > self.progress_timeout_s:
            step = "no checkpoint" if self.progress is None else f"step {self.progress}"
            return (
                f"no progress for {self.progress_timeout_s:.0f} s (still at {step}, while "
                "its heartbeat went on)"
            )
        return ""
