"""One exception hierarchy for the whole project: callers catch `AblationError`."""

from __future__ import annotations

from dataclasses import dataclass


class AblationError(Exception):
    """Base of every error this project raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: where (dotted path), what, and the offending value."""

    path: str
    message: str
    value: object = None
    show_value: bool = True

    def __str__(self) -> str:
        shown = f" (got {self.value!r})" if self.show_value else ""
        where = self.path or "<plan>"
        return f"{where}: {self.message}{shown}"


class PlanError(AblationError):
    """The plan is invalid. Holds every problem found, so the user fixes them in one pass."""

    def __init__(self, problems: list[Problem], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        head = f"{source}: " if source else ""
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{head}invalid plan, {len(problems)} problem(s):\n{lines}")


class CampaignConflictError(AblationError):
    """A campaign id is already registered with a different plan hash."""


class StoreError(AblationError):
    """Checkpoint or artifact storage is unreachable, corrupt or refused."""


class WorkloadError(AblationError):
    """The user's workload could not be imported or does not follow the protocol."""
