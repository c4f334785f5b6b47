"""Every exception this project raises on purpose, in one file (as httpx's `_exceptions.py`):
the whole tree, by cause, so a caller sees what it may catch without reading the modules.

    AblationError
    ├── InputError                the user's input: a plan, a folder, a value (exit 2)
    │   ├── PlanError             the plan is invalid (every problem, gathered)
    │   ├── CrossFieldError       problems out of a plan model's validator (also a ValueError)
    │   ├── CampaignConflictError a campaign id registered with another plan hash or code
    │   ├── NotACampaignFolder    no readable manifest.json
    │   │   └── ManifestError     manifest.json there but malformed
    │   ├── FolderBusyError       another live campaign holds the output folder
    │   ├── OutsideFolder         a name that would write outside the output folder
    │   ├── GateUnanswerable      a UI gate with no Prefect server to answer it in
    │   ├── WorkloadError         the user's training code: not importable, not the protocol
    │   │   ├── MissingMetric     evaluated without the plan's metric
    │   │   ├── NoReport          a command's program silent past workload.report_timeout_seconds
    │   │   ├── WorkloadFailed    a job failed in a worker because the workload's code raised
    │   │   └── NoUsableRestart   a run that cannot be restarted exactly (a `restart` stop)
    │   ├── DataError             the data is not the data it must be
    │   ├── PredictionsError      a predictions file missing columns or other inputs
    │   ├── BudgetError           budget input that cannot be priced
    │   ├── ProbeError            a probe result unreadable or of another plan
    │   └── ReportError           a folder lacking what a report is rebuilt from
    └── InfrastructureError       the machine or a service under the work (exit 1): rerun once fixed
        ├── StoreError            the checkpoint or run-file store: unreachable, corrupt, refused
        │   ├── StoreUnreachable  no answer through the outage a run rides through
        │   ├── RefusedCheckpoint a committed checkpoint that is corrupt or unreadable
        │   ├── ForeignCheckpoint a committed checkpoint of another plan or run
        │   ├── ObjectTooLarge    an object larger than its reader allows
        │   ├── UntrustedObject   unsigned, wrongly signed or not what it should be
    │   └── ProtectedObject   a delete that would remove another writer's objects
        ├── LedgerError           the ledger cannot be opened or written
        │   └── LedgerDamaged     ledger.db's bytes are damaged: SQLite cannot read it back
        ├── WorkerLost            a slot's worker process died under a job
        ├── JobFailed             a job failed in a worker for the machine's cause
        ├── SupersededAttempt     a pool attempt that is no longer the accepted one
        ├── ApiUnreachable        the Prefect server did not answer through a bounded outage
        ├── Interrupted           a run stopped by a terminate request (caught by the driver)
        ├── CampaignInterrupted   a SIGTERM stopped the campaign; a rerun resumes it
        └── CampaignUndecided     runs failed for the machine's cause: no decision; rerun

`ablate` maps each base to its exit code in one place (`ablations.cli.ablate`), so a module
raises the class that names the cause and never `AblationError` itself. This module imports
nothing of the project. One exception class lives elsewhere: `byo/restart._Stopped`, a private
signal raised and caught inside that module (not an error; it carries a `run.records.Stop`).
"""

from __future__ import annotations

import math
import reprlib
from dataclasses import dataclass


class AblationError(Exception):
    """Base of every error this project raises on purpose."""


class InputError(AblationError):
    """What the user gave is wrong (a plan, a campaign folder, a command-line value): the
    message names it and what would be right; nothing was started. `ablate` exits 2."""


class InfrastructureError(AblationError):
    """What the work runs on failed (the checkpoint store, the ledger, a worker process, the
    disk): the input is fine and a rerun continues once it is fixed. `ablate` exits 1."""


SHOWN_VALUE_CHARS = 80
"""The most of a bad value an error repeats: enough to recognize it, never a whole file's
content pasted back (into a terminal, or a failed flow run's message in the UI)."""


def short_repr(value: object) -> str:
    """`repr(value)` cut to `SHOWN_VALUE_CHARS`, with the size the value had. Only that much
    is built: a value read from a plan may be a megabyte string, a list of 10^5 aliased
    strings or a number of 10^4 digits, whose whole `repr` would cost gigabytes (or raise)."""
    text = _SHORT.repr(value)
    cut = len(text) > SHOWN_VALUE_CHARS
    if cut:
        text = f"{text[: SHOWN_VALUE_CHARS - 3]}..."
    if isinstance(value, str | bytes) and len(value) > _SHORT.maxstring:
        return f"{text} ({len(value)} characters)"
    if isinstance(value, list | tuple | dict | set | frozenset) and (
        cut or len(value) > _SHORT.maxlist
    ):
        return f"{text} ({len(value)} items)"
    return text


class _ShortRepr(reprlib.Repr):
    """`reprlib`'s bounded repr, with a whole number too long to print named by its size."""

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > _LONGEST_INT_BITS:
            return f"<a number of about {int(x.bit_length() * math.log10(2)) + 1} digits>"
        return super().repr_int(x, level)


_LONGEST_INT_BITS = 256
"""Past this a number's digits say nothing to a reader (and past 4300 digits `repr` raises)."""
_SHORT = _ShortRepr()
_SHORT.maxstring = SHOWN_VALUE_CHARS
_SHORT.maxother = SHOWN_VALUE_CHARS
_SHORT.maxlong = SHOWN_VALUE_CHARS
_SHORT.maxlevel = 3
for _kind in ("maxlist", "maxtuple", "maxset", "maxfrozenset", "maxdict", "maxdeque", "maxarray"):
    setattr(_SHORT, _kind, 8)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: where (dotted path; empty for the plan as a whole), what,
    and the offending value."""

    path: str
    message: str
    value: object = None
    show_value: bool = True

    def __str__(self) -> str:
        got = f" (got {short_repr(self.value)})" if self.show_value else ""
        # The plan as a whole: the message alone; the error's head names the plan's file.
        where = f"{_cut(self.path, SHOWN_VALUE_CHARS)}: " if self.path else ""
        return f"{where}{_cut(self.message, 4 * SHOWN_VALUE_CHARS)}{got}"


def _cut(text: str, limit: int) -> str:
    """A message or path built from the input (a key, a value) kept to `limit` characters."""
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


# -- the user's input (exit 2) ----------------------------------------------------------------


class PlanError(InputError):
    """The plan is invalid. Holds every problem found, so the user fixes them in one pass."""

    def __init__(self, problems: list[Problem], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        head = f"{source}: " if source else ""
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{head}invalid plan, {len(problems)} problem(s):\n{lines}")


class CrossFieldError(InputError, ValueError):
    """Carries several problems out of a model validator (pydantic keeps the exception: a
    `ValueError` is what a validator may raise; an `InputError` is its cause)."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


class CampaignConflictError(InputError):
    """A campaign id is already registered with a different plan hash."""


class NotACampaignFolder(InputError):
    """The path is not an output folder of `ablate run` (no readable manifest)."""


class ManifestError(NotACampaignFolder):
    """manifest.json is there but malformed: the message names the file and the field."""


class FolderBusyError(InputError):
    """Another live campaign holds the output folder."""


class OutsideFolder(InputError):
    """A name that would write outside the campaign's folder: refused, nothing written."""


class GateUnanswerable(InputError):
    """`--gate ui` (or the plan's `gate.mode: ui`) with no Prefect server whose UI the user
    can open: the campaign would wait out the gate's timeout for an answer nobody can give."""


class WorkloadError(InputError):
    """The user's workload could not be imported or does not follow the protocol."""


class NoReport(WorkloadError):
    """A command's program sent no report line for `workload.report_timeout_seconds` (hung,
    or waiting on its stdin for an answer it never asked for): its process group was killed
    and the run failed, a defect of the code (a rerun would hang the same way)."""


class MissingMetric(WorkloadError):
    """The training code evaluated without the plan's metric, or never by its last step: a
    defect of the code or the plan (the gate answers `fix`), not an answer to the question."""


class WorkloadFailed(WorkloadError):
    """A job failed in a slot's worker because the workload's own code raised."""

    def __init__(self, message: str, error_type: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        """The type of what the job raised in the worker (`Failed.error_type`)."""


class NoUsableRestart(WorkloadError):
    """Raised by a checkpoint hook or restart check: this run cannot be restarted exactly.

    The driver turns it into a `restart` stop instead of a failure, because it is the
    registered outcome of a check, not a bug; should one ever escape, its cause is the
    workload's checkpoints (an input: exit 2)."""

    def __init__(self, message: str, step: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.step = step


class DataError(InputError):
    """A workload's data is not the data it must be: the built-in corpus differs from the one
    this version declares, a selection of it is unusable, or a plan registers another digest."""


class PredictionsError(InputError):
    """A predictions file is missing columns or disagrees with the control's inputs."""


class BudgetError(InputError):
    """Budget input that cannot be priced or planned (unknown card, bad figures)."""


class ProbeError(InputError):
    """A probe result that cannot be read or does not belong to the plan (exit code 2)."""


class ReportError(InputError):
    """The output folder lacks what a report is rebuilt from."""


# -- the machine or a service (exit 1) -------------------------------------------------------


class StoreError(InfrastructureError):
    """Checkpoint or artifact storage is unreachable, corrupt or refused."""


class StoreUnreachable(StoreError):
    """The store did not answer (refused, cut or stalled connections, a server's errors)
    through the whole outage a run rides through (`ablations.checkpoint.outage`): no
    verdict on what it holds; a rerun tries again."""


class RefusedCheckpoint(StoreError):
    """A committed checkpoint that is corrupt, truncated or unreadable (the previous may do)."""


class ForeignCheckpoint(StoreError):
    """A committed checkpoint of another plan hash or run id: never loaded, never replaced."""


class ObjectTooLarge(StoreError):
    """An object larger than its reader allows (`get(key, limit)`): never read whole."""


class UntrustedObject(StoreError):
    """An object read from the store that is unsigned, wrongly signed or not what it should
    be: refused, never used."""


class ProtectedObject(StoreError):
    """A delete refused because the prefix holds another writer's objects (a pool attempt's,
    or the campaign's pointer to the accepted one): nothing was deleted."""


class LedgerError(InfrastructureError):
    """The ledger cannot be opened or written."""


class LedgerDamaged(LedgerError):
    """ledger.db's bytes are damaged (SQLite reports a corrupt page, or the file is not a
    database): nothing in it is trusted. The ledger holds nothing the completion records do
    not, so the message says to move it aside and rerun, which writes it again."""


class WorkerLost(InfrastructureError):
    """A slot's worker process died under a job (killed for memory, a CUDA fault, a signal)."""


class JobFailed(InfrastructureError):
    """A job failed in a slot's worker for the machine's cause: a store, the disk, the ledger."""

    def __init__(self, message: str, error_type: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        """The type of what the job raised in the worker (`Failed.error_type`)."""


class SupersededAttempt(InfrastructureError):
    """This attempt is no longer the one the campaign accepts: it must not commit."""


class ApiUnreachable(InfrastructureError):
    """The Prefect server a work pool's campaign talks to did not answer (refused or cut
    connections, 5xx answers) through the whole outage the campaign rides through
    (`flows/api_outage.py`): nothing is decided; a rerun goes on once the server is back."""


class Interrupted(InfrastructureError):
    """A run ended by a terminate request at `step`, its checkpoint there saved or not: the
    machine is being taken away, a cause of the infrastructure (as `CampaignInterrupted`).
    The driver catches it and records the run as interrupted; a restart check it ends
    reports it as its error, which the campaign (asked to stop) does not keep."""

    def __init__(self, step: int, *, saved: bool) -> None:
        super().__init__(f"interrupted at step {step}")
        self.step, self.saved = step, saved


class CampaignInterrupted(InfrastructureError):
    """A SIGTERM stopped the campaign: its running runs committed their steps and a rerun
    resumes them (`ablations.process.preemption`)."""


class CampaignUndecided(InfrastructureError):
    """Runs (or the preflight) failed for the infrastructure's cause after their retries: the
    campaign takes no decision on them (no gate, no look, no report) and a rerun retrains them
    once the store, the disk or the network is back. The message is the one line to show."""
