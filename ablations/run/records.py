"""Small records that cross process and task boundaries: what to run and what happened.

They hold ids, numbers and short strings only (never tensors or frames), so they pickle to a
slot's worker process, serialize into Prefect results and land in `manifest.json` as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
    model_validator,
)
from typing_extensions import Self

from ablations.plan.experiment import MetricSection
from ablations.plan.infrastructure import CheckpointSection
from ablations.plan.model import Plan
from ablations.plan.rules import StopRules
from ablations.plan.section import Category, ParamValue
from ablations.plan.variants import Phase
from ablations.plan.workload import WorkloadSection
from ablations.run.causes import FailureCause, cause_of
from ablations.security.credentials import redact, without_escapes

RunStatus = Literal["accepted", "rejected", "stopped", "failed", "trimmed"]
"""accepted; rejected (completed, its final metric missed the threshold: see `rejection`);
stopped (a stop rule fired); failed (crashed, not a rule); trimmed (dropped at the gate)."""

StopRuleKind = Literal["non_finite_loss", "quality", "truncation", "restart"]


class Record(BaseModel):
    """Base of the records: unknown fields refused so a typo never passes silently."""

    model_config = ConfigDict(extra="forbid")


class Stop(Record):
    """Why a stop rule ended a run."""

    rule: StopRuleKind
    message: str
    step: int
    value: float | None = None


class Rejection(Record):
    """Why a completed run was not accepted: its final metric against the threshold."""

    metric: str
    value: float | None
    """The final value; None when the workload did not report the metric."""
    threshold: float
    direction: Literal["maximize", "minimize"] = "maximize"
    step: int
    """The step of the final evaluation."""

    @property
    def message(self) -> str:
        """E.g. `accuracy 0.8489 < threshold 0.85 at step 300`."""
        if self.value is None:
            return f"{self.metric} was not reported at step {self.step}"
        from ablations.text.units import metric

        short = "<" if self.direction == "maximize" else ">"
        value = f"{self.metric} {metric(self.value)}"
        return f"{value} {short} threshold {self.threshold:g} at step {self.step}"


def rejection_of(spec: RunSpec, metrics: dict[str, float], step: int) -> Rejection | None:
    """The rejection of a completed run whose final metric misses the threshold, else None."""
    metric = spec.metric
    value = metrics.get(metric.name)
    if value is not None and metric.meets_threshold(value):
        return None
    return Rejection(
        metric=metric.name,
        value=value,
        threshold=metric.threshold,
        direction=metric.direction,
        step=step,
    )


INTERRUPTED = "Interrupted"
"""The error type of a run stopped by a SIGTERM (`ablations.process.preemption`): an infrastructure
cause, resumed by a rerun from the checkpoint it committed at its step."""
LOST_WORKER_ERRORS = ("WorkerCrashed", "WorkerLost")
"""Error types of runs that never reported back: their records predate `cause`."""


class RunError(Record):
    """A run that raised: the error type and message (not a stop)."""

    type: str
    message: str
    cause: FailureCause = "workload"
    """Who failed: the workload, or the infrastructure it ran on (retried by a rerun)."""

    @field_validator("message")
    @classmethod
    def _nothing_secret(cls, message: str) -> str:
        # an exception's text (a store's, the user's code's) reaches the record, the manifest,
        # the report, the task's state message and the UI's tables: redacted once, here
        return redact(without_escapes(message))

    @model_validator(mode="before")
    @classmethod
    def _cause_of_older_records(cls, data: Any) -> Any:
        lost = isinstance(data, dict) and data.get("type") in LOST_WORKER_ERRORS
        if lost and "cause" not in data:
            return {**data, "cause": "infrastructure"}
        return data

    @classmethod
    def of(cls, exc: BaseException, *, cause: FailureCause | None = None) -> RunError:
        """The error of a run that raised `exc`; its cause classified where it arose
        (`ablations.run.causes.cause_of`) unless the caller knows it."""
        return cls(
            type=type(exc).__name__,
            message=str(exc) or repr(exc),
            cause=cause if cause is not None else cause_of(exc),
        )

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


class Timings(Record):
    """Wall seconds per part of a run."""

    load: float = 0.0
    train: float = 0.0
    evaluate: float = 0.0
    checkpoint: float = 0.0
    export: float = 0.0

    @property
    def total(self) -> float:
        return self.load + self.train + self.evaluate + self.checkpoint + self.export


class MemoryPeak(Record):
    """Peak memory of one phase (build, train, evaluate), in bytes."""

    allocated: int = 0
    """Device allocated bytes on a GPU; process RSS on CPU."""
    reserved: int = 0
    """Device reserved bytes (allocator cache) on a GPU; equal to `allocated` on CPU."""


class CheckpointSummary(Record):
    """What the run's checkpointing did."""

    uri: str | None = None
    """URI of the last committed checkpoint."""
    saves: int = 0
    failures: int = 0
    """Saves that could not be committed after retries."""
    last_error: str | None = None
    cost_seconds: float | None = None
    """Measured cost C of one checkpoint (stall plus time to commit)."""
    interval_steps: int | None = None
    interval_seconds: float | None = None
    """The interval tau in use, in steps and seconds."""
    expected_overhead: float | None = None
    """C/tau + tau/(2M): the expected fraction of time lost to saving and to interruptions."""
    resumed_from_step: int | None = None
    pilot_step: int = 0
    """The step its pilot trained to (a main run continuing a pilot), else 0: resuming exactly
    there is the plan, resuming later is a recovery."""
    note: str | None = None
    """Why the run did not resume where it was planned to (its pilot's last step)."""

    @field_validator("last_error", "note")
    @classmethod
    def _nothing_secret(cls, text: str | None) -> str | None:
        # a store's error text (see RunError)
        return None if text is None else redact(without_escapes(text))


class RunSpec(Record):
    """Everything a slot's worker needs to run one run, independent of Prefect: the run's own
    fields, and the plan's sections it reads, whole (`workload`, `metric`, `stop_rules`), so
    a field added to a section reaches every run without being copied. `RunSpec.of` is the
    one place a plan's sections go in."""

    run_id: str
    campaign_id: str
    plan_hash: str
    variant: str
    category: Category
    phase: Phase
    seed: int
    params: dict[str, ParamValue]
    """The run's parameters: the workload's, with its variant's levels set."""
    steps: int
    """The run's length: the workload is built with it and the last step evaluates (the
    plan's `workload.steps` is the default length; a pilot's is its main run's)."""
    workload: WorkloadSection
    """The plan's `workload`, whole: `entry` (`module:attr` of the workload), `command`,
    `lightning`, `hf_trainer` (placeholders not yet replaced), `eval_every`, `data_sha256` (the
    run fails before its first step when its workload reports other data)."""
    metric: MetricSection
    """The plan's `metric`, whole: its `name`, `direction` and `threshold` judge the run."""
    stop_rules: StopRules = StopRules()
    checkpoint: CheckpointSection | None = None
    """None: the run does not checkpoint."""
    device: str = "cpu"
    out_dir: str | None = None
    """Where the run writes its run files, metrics and predictions (None: not written)."""
    until: int | None = None
    """A pilot: train only the first `until` of the `steps` steps, commit a checkpoint at
    `until` and evaluate there (the evaluation the gate reads)."""
    checkpoint_id: str | None = None
    """The run id the checkpoints are kept under when not `run_id`: a pilot keeps its main
    run's, so that run resumes where the pilot ended."""
    resume_step: int = 0
    """The step this run expects to resume from (its pilot's last); resuming from fewer is
    noted in the record's checkpoint summary."""
    attempt: str | None = None
    """The work-pool attempt running it (its flow run id): its checkpoints go in a folder of
    their own and commit only while the campaign accepts it (None: a local slot)."""
    workdir: str | None = None
    """The folder `ablate run` started in, where a command runs and its relative paths
    resolve: on a work pool the same path on every host, not the worker's own temporary
    folder (None: the running process's own)."""

    @classmethod
    def of(
        cls,
        plan: Plan,
        plan_hash: str,
        *,
        run_id: str,
        variant: str,
        category: Category,
        phase: Phase,
        seed: int,
        params: dict[str, ParamValue],
        steps: int,
        checkpoint: CheckpointSection | None,
        out_dir: str | None = None,
        until: int | None = None,
        checkpoint_id: str | None = None,
        resume_step: int = 0,
        workdir: str | None = None,
    ) -> RunSpec:
        """The spec of one run of `plan` (registered with `plan_hash`): the plan's sections
        whole, the run's own fields as given (the device is the slot's to fill in)."""
        return cls(
            run_id=run_id,
            campaign_id=plan.campaign.id,
            plan_hash=plan_hash,
            variant=variant,
            category=category,
            phase=phase,
            seed=seed,
            params=params,
            steps=steps,
            workload=plan.workload,
            metric=plan.metric,
            stop_rules=plan.stop_rules,
            checkpoint=checkpoint,
            out_dir=out_dir,
            until=until,
            checkpoint_id=checkpoint_id,
            resume_step=resume_step,
            workdir=workdir,
        )

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's copy, refusing a name that is no field of the spec (pydantic would add
        it unchecked): `eval_every` or `threshold` live in the sections now (`with_workload`)."""
        unknown = sorted(set(update or ()) - set(type(self).model_fields))
        if unknown:
            raise TypeError(f"RunSpec has no field {', '.join(unknown)}")
        return super().model_copy(update=update, deep=deep)

    def for_restart_check(self) -> RunSpec:
        """The spec the restart check runs under: a run of its own (`restart-<run_id>`), so
        nothing of the real run is touched in the store: not its checkpoints, and on a work
        pool not the campaign's pointer to the accepted attempt beside them."""
        update = {"run_id": f"restart-{self.run_id}", "out_dir": None, "until": None}
        return self.model_copy(
            update={**update, "checkpoint_id": None, "resume_step": 0, "attempt": None}
        )

    def with_workload(self, **changes: Any) -> RunSpec:
        """This spec with fields of its `workload` section changed (`eval_every=`, `entry=`):
        a run that evaluates at other steps, a test's other workload."""
        return self.model_copy(update={"workload": self.workload.model_copy(update=changes)})


class RunEnvironment(Record):
    """What the run's process ran on: the manifest's environment is gathered from these."""

    torch: str
    cuda: str | None = None
    """The CUDA version torch was built with (None: a CPU build)."""
    device_name: str
    """`torch.cuda.get_device_name` of the run's card, or `cpu`."""
    data_sha256: str | None = None
    """Digest of the data the workload read, when it reports one (`environment()`, e.g. the
    charlm corpus: a different Python's standard library shows here)."""
    frameworks: dict[str, str] = {}
    """Package -> version of the training framework the run's adapter imported (`lightning`;
    `transformers`, with `peft` and `accelerate` when loaded): a framework's own loop is part
    of the result. Empty for a built-in workload and a command, and then left out of the JSON
    (records and manifests stay as they were)."""

    @model_serializer(mode="wrap")
    def _without_empty_frameworks(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not data.get("frameworks"):
            data.pop("frameworks", None)
        return data


class RunRecord(Record):
    """What happened to one run: the small record the ledger, gate and report read."""

    run_id: str
    variant: str
    seed: int
    category: Category
    phase: Phase
    status: RunStatus
    stop: Stop | None = None
    error: RunError | None = None
    rejection: Rejection | None = None
    """Set when the status is `rejected`: the metric, its value and the threshold missed."""
    steps_done: int = 0
    metrics: dict[str, float] = {}
    """Final held-out metrics."""
    evaluations: list[dict[str, float]] = []
    """Every evaluation: `step` plus the metrics (intermediate values for the ledger)."""
    timings: Timings = Timings()
    step_seconds: float | None = None
    """Median wall seconds of one training step."""
    memory: dict[str, MemoryPeak] = {}
    """Peak memory per phase: build, train, evaluate."""
    device: str = "cpu"
    """The device seen inside the run."""
    environment: RunEnvironment | None = None
    slot: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    checkpoint: CheckpointSummary = CheckpointSummary()
    artifacts: dict[str, str] = Field(default_factory=dict)
    """Kind -> path of files the run exported (relative to the output folder)."""
    export_sha256: dict[str, str] = Field(default_factory=dict)
    """Path -> sha256 of each exported file, as the pool host that exported it put it in its
    signed result: the campaign refuses an export whose bytes differ, and `ablate verify`
    checks the folder's files against it. Empty for a run on this machine's slots (left out
    of the JSON then)."""

    @model_serializer(mode="wrap")
    def _without_empty_hashes(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not data.get("export_sha256"):
            data.pop("export_sha256", None)
        return data

    @classmethod
    def failed(cls, spec: RunSpec, error_type: str, message: str, **fields: object) -> RunRecord:
        """The record of a run that never reported back (its worker or host was lost)."""
        return cls(
            run_id=spec.run_id,
            variant=spec.variant,
            seed=spec.seed,
            category=spec.category,
            phase=spec.phase,
            status="failed",
            error=RunError(type=error_type, message=message, cause="infrastructure"),
            **fields,
        )

    @property
    def steps_trained(self) -> int:
        """Steps this attempt trained (and `timings.train` measured): the steps done less
        those it resumed past (its pilot's, or an interrupted attempt's)."""
        return max(0, self.steps_done - (self.checkpoint.resumed_from_step or 0))

    @property
    def lost(self) -> bool:
        """Failed because its worker or host was lost, not because the workload raised."""
        return (
            self.status == "failed"
            and self.error is not None
            and (self.error.cause == "infrastructure")
        )

    @property
    def interrupted(self) -> bool:
        """Stopped by a SIGTERM (preemption): lost, with a checkpoint at its last step."""
        return self.lost and self.error is not None and self.error.type == INTERRUPTED


class PreflightReport(Record):
    """The essential checks before the pilot: the data check and the restart check."""

    passed: bool
    data_problems: list[str] = []
    """Each failed data check, by name, with the offending input ids."""
    restart: Stop | None = None
    """Set when the restart check found no usable restart."""
    error: RunError | None = None
    """Set when preflight itself crashed."""
    check_id: str | None = None
    """The run id the restart check saved under: unique to this preflight attempt."""
    seconds: float = 0.0
