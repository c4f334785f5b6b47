"""One exception hierarchy for the whole project, by cause: callers catch `AblationError`.

    AblationError
    ├── InputError            the user's input: a plan, a folder, a command-line value (exit 2)
    │   ├── PlanError, CampaignConflictError, WorkloadError, and the modules' own
    └── InfrastructureError   the machine or a service under the work (exit 1): rerun once fixed
        └── StoreError, and the modules' own (ledger, lost worker, ...)

`ablate` maps each base to its exit code in one place (`ablations.cli.ablate`), so a module
raises the class that names the cause and never `AblationError` itself.
"""

from __future__ import annotations

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
    """`repr(value)`, cut to `SHOWN_VALUE_CHARS` with the length it had."""
    text = repr(value)
    if len(text) <= SHOWN_VALUE_CHARS:
        return text
    return f"{text[: SHOWN_VALUE_CHARS - 3]}... ({len(text)} characters)"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: where (dotted path), what, and the offending value."""

    path: str
    message: str
    value: object = None
    show_value: bool = True

    def __str__(self) -> str:
        got = f" (got {short_repr(self.value)})" if self.show_value else ""
        where = _cut(self.path, SHOWN_VALUE_CHARS) or "<plan>"
        return f"{where}: {_cut(self.message, 4 * SHOWN_VALUE_CHARS)}{got}"


def _cut(text: str, limit: int) -> str:
    """A message or path built from the input (a key, a value) kept to `limit` characters."""
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


class PlanError(InputError):
    """The plan is invalid. Holds every problem found, so the user fixes them in one pass."""

    def __init__(self, problems: list[Problem], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        head = f"{source}: " if source else ""
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{head}invalid plan, {len(problems)} problem(s):\n{lines}")


class CampaignConflictError(InputError):
    """A campaign id is already registered with a different plan hash."""


class StoreError(InfrastructureError):
    """Checkpoint or artifact storage is unreachable, corrupt or refused."""


class CampaignInterrupted(InfrastructureError):
    """A SIGTERM stopped the campaign: its running runs committed their steps and a rerun
    resumes them (`ablations.preemption`)."""


class WorkloadError(InputError):
    """The user's workload could not be imported or does not follow the protocol."""


class DataError(InputError):
    """A workload's data is not the data it must be: the built-in corpus differs from the one
    this version declares, a selection of it is unusable, or a plan registers another digest."""
