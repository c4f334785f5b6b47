"""One registered campaign, loaded once per process: its plan, registration and runs.

    campaign = Campaign.load(Path("DIR"))     # plan.yaml parsed here, and only here
    campaign.plan, campaign.registration      # as registered (`out_dir`: where DIR is now)
    campaign.run(run_id), campaign.phase("pilot")
    campaign.gate(), campaign.looks(), campaign.records()   # read from DIR when asked

What registration froze never changes, so it is read once: the flow loads the campaign right
after registering it and hands it to every step and task; a process of its own (a slot's
worker writing the results, `ablate report`) loads its own. What the campaign writes as it
goes (the preflight report, the completion records, the gate, the looks) is read from the
folder whenever asked, through `campaign.folder`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ablations.analysis.looks import Looks
from ablations.campaign.folder import CampaignFolder, Registration
from ablations.errors import InputError
from ablations.files.names import REGISTRATION
from ablations.plan.model import Plan
from ablations.plan.runs import planned_runs
from ablations.plan.variants import Phase, PlannedRun
from ablations.run.records import PreflightReport, RunRecord

if TYPE_CHECKING:
    from ablations.budget import Projection
    from ablations.campaign.gate import GateDecision


class Campaign:
    """A registered campaign as one process holds it: the registered plan and registration,
    and every planned run (in registration order, and by id), made once; the folder's state
    files read when asked.

    Not a dataclass on purpose: Prefect walks a dataclass's (or a pydantic model's) fields
    when a task receives one, which here would be every planned run for every task. A plain
    object is passed through as it is. Its attributes are read-only."""

    __slots__ = ("_by_id", "_folder", "_phases", "_plan", "_registration", "_runs")

    def __init__(
        self, folder: CampaignFolder, plan: Plan, registration: Registration, runs: list[PlannedRun]
    ) -> None:
        self._folder = folder
        self._plan = plan
        self._registration = registration
        self._runs = tuple(runs)
        self._by_id = {run.run_id: run for run in self._runs}
        phases: dict[str, list[PlannedRun]] = {"pilot": [], "main": []}
        for run in self._runs:
            phases[run.phase].append(run)
        self._phases = {name: tuple(runs) for name, runs in phases.items()}

    @classmethod
    def load(cls, out_dir: Path) -> Campaign:
        """The campaign registered in `out_dir`: its registration (naming the folder where it
        is now, moved or not), its plan parsed from plan.yaml, and the runs it defines.
        `FileNotFoundError` without plan.yaml; `InputError` when the folder holds no
        registration (or plan.yaml is not a valid plan)."""
        out_dir = Path(out_dir)
        folder = CampaignFolder(out_dir)
        plan = folder.plan()
        known = folder.registration()
        if known is None:
            raise InputError(f"{out_dir} holds no registered campaign ({REGISTRATION})")
        registration = known.model_copy(update={"out_dir": str(out_dir.resolve())})
        return cls(folder, plan, registration, planned_runs(plan, registration.plan_hash))

    def __repr__(self) -> str:
        return f"Campaign({self._registration.campaign_id!r}, {self._folder!r})"

    # -- frozen at registration ------------------------------------------------------------------

    @property
    def folder(self) -> CampaignFolder:
        """The output folder: every state file is read and written through it."""
        return self._folder

    @property
    def out_dir(self) -> Path:
        """The output folder's path."""
        return self._folder.out_dir

    @property
    def plan(self) -> Plan:
        """The registered plan."""
        return self._plan

    @property
    def registration(self) -> Registration:
        """The registration; its `out_dir` is where the folder is now."""
        return self._registration

    @property
    def runs(self) -> tuple[PlannedRun, ...]:
        """Every registered run: the pilot's first, then the main phase's."""
        return self._runs

    def run(self, run_id: str) -> PlannedRun:
        """The registered run of this id; `InputError` when the plan defines none."""
        run = self._by_id.get(run_id)
        if run is None:
            raise InputError(f"run {run_id!r} is not registered in {self.out_dir}")
        return run

    def phase(self, name: Phase) -> list[PlannedRun]:
        """The registered runs of one phase, in registration order."""
        return list(self._phases[name])

    # -- written as the campaign goes: read from the folder when asked ---------------------------

    def records(self) -> dict[str, RunRecord]:
        """Every completion record in the folder, by run id (a lost run's included)."""
        return self._folder.records()

    def finished(self, run_id: str) -> RunRecord | None:
        """The run's completion record once it has finished, else None. A run whose worker or
        host was lost (`RunRecord.lost`) has not finished: a rerun retries it."""
        record = self._folder.record(run_id)
        return None if record is None or record.lost else record

    def preflight(self) -> PreflightReport | None:
        """preflight.json: the last preflight's report, or None before the first."""
        return self._folder.preflight()

    def projection(self) -> Projection | None:
        """projection.json, or None before the projection step."""
        return self._folder.projection()

    def gate(self) -> GateDecision | None:
        """gate.json: the recorded gate decision (a `fix` included), or None."""
        return self._folder.gate()

    def looks(self) -> Looks:
        """looks.json: the looks recorded so far (none before the main phase)."""
        return self._folder.looks() or Looks()
