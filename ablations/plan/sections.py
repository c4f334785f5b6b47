"""The sections of an ablation plan, each a small frozen model documented field by field.

`ablations.plan.model.Plan` assembles them. Every field's docstring becomes its description in the
JSON schema (`ablate schema`), so editors can complete and explain a plan as it is written.
"""

from __future__ import annotations

import math
import os
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

ParamValue = int | float | bool | str
"""A workload parameter: YAML scalars only, so a plan stays a plain, hashable document."""

Category = Literal["essential", "useful", "exploratory"]
"""How much a variant matters to the decision; trimming drops the lowest first."""

Verdict = Literal[
    "better",
    "not worse",
    "worse",
    "equivalent",
    "inconclusive",
    "fails threshold",
    "diverges",
    "input truncated",
    "not run",
    "failed",
]
"""What a campaign concluded about one variant (see `ablations.analysis.verdicts`). Defined
here, beside the plan, because `next_decisions` keys are verdicts; analysis re-exports it."""

DecisionRule = Literal["superiority", "non_inferiority", "equivalence"]
"""The question the effects answer: usefully better, not usefully worse, or interchangeable."""

PositiveInt = Annotated[int, Field(gt=0)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]

_CAMPAIGN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_ENTRY_POINT = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", re.ASCII)
COMMAND_ENTRY = "ablations.byo.command:CommandWorkload"
"""The workload entry a plan's `workload.command` stands for (any program, see ablations.byo)."""
LIGHTNING_ENTRY = "ablations.byo.lightning:LightningWorkload"
"""The workload entry a plan's `workload.lightning` stands for."""
HF_TRAINER_ENTRY = "ablations.byo.hf:TrainerWorkload"
"""The workload entry a plan's `workload.hf_trainer` stands for."""
ADAPTER_ENTRIES = {
    "command": COMMAND_ENTRY,
    "lightning": LIGHTNING_ENTRY,
    "hf_trainer": HF_TRAINER_ENTRY,
}
"""Each `workload` field naming a framework's own loop, and the adapter entry it stands for."""
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""`{name}` in a command argument: replaced by the run's parameter `name`."""
_DEVICE = re.compile(r"cpu(:[0-9]+)?|cuda:[0-9]+")
"""Patterns are matched with `fullmatch`: `$` would accept a trailing newline."""
STORE_SCHEMES = ("file", "memory", "s3")
_NO_CREDENTIALS = (
    "must not embed credentials (user:secret@); the plan is copied into the output folder. "
    "Give S3 keys through the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
)


class Section(BaseModel):
    """Base of every plan section: unknown keys are refused and values are frozen."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, validate_default=True
    )


def same_value(a: ParamValue, b: ParamValue) -> bool:
    """Equality that keeps `True` and `1` apart (YAML users mean different things by them)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def shown(value: ParamValue) -> str:
    """A parameter value as variant names write it (`true`, `0.3`): the variant's identity,
    so two levels shown alike are one level."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _finite_params(params: dict[str, ParamValue]) -> dict[str, ParamValue]:
    bad = [k for k, v in params.items() if isinstance(v, float) and not math.isfinite(v)]
    if bad:
        raise ValueError(f"{bad[0]}: must be a finite number (got {params[bad[0]]})")
    return params


class CampaignSection(Section):
    """What the campaign is for."""

    id: str
    """Campaign id: letters, digits, `.`, `_`, `-` (max 64). Used in folder and store paths."""
    question: str = Field(min_length=1)
    """The question the campaign answers, in one sentence."""
    decision: str = Field(min_length=1)
    """The decision the answer feeds (what you will do differently depending on the result)."""
    hypothesis: str | None = None
    """What you expect the campaign to show, written before it runs (kept in the report)."""
    next_decisions: dict[Verdict, str] = {}
    """Verdict -> what you will do when a variant gets it (e.g. `worse: keep the control`);
    the default for every factor, which may override entries with its own `next_decisions`."""

    @field_validator("id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        if not _CAMPAIGN_ID.fullmatch(value) or ".." in value:
            raise ValueError(
                "must be 1-64 characters of letters, digits, '.', '_' or '-', starting with a "
                "letter or digit and without '..', so it cannot escape the output folder"
            )
        return value


class LightningSection(Section):
    """A `LightningModule` and its `LightningDataModule`, each built from the run's parameters."""

    module: str
    """Import path `module:Class` of the `LightningModule`; built with the run's parameters
    its `__init__` accepts (all of them when it takes `**kwargs`)."""
    data: str
    """Import path `module:Class` of the `LightningDataModule`; built the same way."""
    trainer: dict[str, ParamValue] = {}
    """Further `lightning.Trainer` arguments, e.g. `{precision: "{precision}",
    gradient_clip_val: 1.0}`: a value `"{name}"` is the run's parameter `name`. The steps,
    evaluation interval, device, logger and checkpointing are ablate's."""

    @field_validator("module", "data")
    @classmethod
    def _entry_shape(cls, value: str) -> str:
        if not _ENTRY_POINT.fullmatch(value):
            raise ValueError("must look like 'package.module:ClassName'")
        return value


class WorkloadSection(Section):
    """The training code and the parameters every run shares."""

    entry: str = "ablations.workloads.digits:DigitsWorkload"
    """Import path `module:attribute` of the workload class (see `ablations.workload`), or
    of an adapter entry for a framework's own loop (`ablations.byo`: Lightning, Trainer)."""
    command: list[str] | None = None
    """Any program instead of an entry, e.g. `[python, train.py, --lr, "{lr}"]`: `{name}`
    is replaced by the run's parameter `name`; seed, steps, device and checkpoint folder come
    in `ABLATE_*` environment variables and the program reports JSON lines on stdout (see the
    README, "Any command"). A leading `python` is the interpreter running ablate."""
    lightning: LightningSection | None = None
    """A PyTorch Lightning module and data module instead of an entry (`pip install
    'ablate[lightning]'`; see the README, "PyTorch Lightning")."""
    hf_trainer: str | None = None
    """Import path `module:function` of `make_trainer(params, args) -> transformers.Trainer`
    instead of an entry: `args` are the `TrainingArguments` keywords ablate owns (steps,
    evaluation, seed, device, output folder); pass them on with your own (`pip install
    'ablate[hf]'`; see the README, "Hugging Face Trainer")."""
    params: dict[str, ParamValue] = {}
    """Base parameters passed to every run; `control` and factor levels override them."""
    steps: PositiveInt = 300
    """Training steps of a main-phase run."""
    eval_every: PositiveInt = 50
    """Evaluate on the held-out set every this many steps (and always at the last step)."""
    expected_inputs: dict[str, PositiveInt] | None = None
    """Registered input counts per split (e.g. `{train: 1437, heldout: 360}`); checked by the
    data check when given."""
    code: list[str] | None = None
    """Your code's files and folders (relative to the folder `ablate run` starts in), hashed
    into the registration and the manifest: a rerun into a folder whose runs trained with
    other code is refused. Default: the command's script's folder, or the package of each
    module the workload names; a built-in workload is the installed package's own (its version
    is recorded). Left out of the plan hash when unset."""
    data_sha256: str | None = None
    """The sha256 of the data every run must read, as the workload reports it (its
    `data_sha256()`; charlm's: the selection of the built-in corpus its `corpus_bytes` makes).
    The data check refuses other data, and so does each run, so a registered plan means the
    same bytes on every machine. The refusal prints the digest found. Left out of the plan
    hash when unset. Not for `command`, `lightning` or `hf_trainer`: their data is their own."""

    _finite = field_validator("params")(_finite_params)

    @field_validator("data_sha256")
    @classmethod
    def _digest_shape(cls, value: str | None) -> str | None:
        if value is not None and not _SHA256.fullmatch(value):
            raise ValueError("must be a sha256: 64 lowercase hexadecimal digits")
        return value

    @model_serializer(mode="wrap")
    def _unset_left_out(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Plans registered before `code` and `data_sha256` existed keep their hash (and run
        ids): each is left out while unset."""
        data: dict[str, Any] = handler(self)
        for name in ("code", "data_sha256"):
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @property
    def named_imports(self) -> list[tuple[str, str]]:
        """Every `module:attribute` a run imports, with the plan field that names it: the
        entry and what an adapter names (each is checked before a run starts)."""
        named = [("workload.entry", self.entry)]
        if self.lightning is not None:
            named += [
                ("workload.lightning.module", self.lightning.module),
                ("workload.lightning.data", self.lightning.data),
            ]
        if self.hf_trainer is not None:
            named.append(("workload.hf_trainer", self.hf_trainer))
        return named

    @property
    def imported(self) -> list[str]:
        """Every `module:attribute` a run imports (a server's allow-list must cover each: an
        allowed adapter imports the user's modules)."""
        return [entry for _, entry in self.named_imports]

    @model_validator(mode="before")
    @classmethod
    def _adapter_entry(cls, data: Any) -> Any:
        """`command`, `lightning` or `hf_trainer` stands for its adapter's entry; naming two,
        or another entry too, is a contradiction, refused rather than one silently winning."""
        if not isinstance(data, dict):
            return data
        given = [name for name in ADAPTER_ENTRIES if data.get(name) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of {given}, not several")
        if given:
            adapter = ADAPTER_ENTRIES[given[0]]
            entry = data.get("entry", adapter)
            if entry != adapter:
                raise ValueError(f"give `entry` or `{given[0]}`, not both (entry {entry!r})")
            if data.get("data_sha256") is not None:
                raise ValueError(
                    f"data_sha256 is checked against a workload's data_sha256(); a "
                    f"`{given[0]}` run reads its own data: leave it out"
                )
            data = {**data, "entry": adapter}
        return data

    @field_validator("hf_trainer")
    @classmethod
    def _function_shape(cls, value: str | None) -> str | None:
        if value is not None and not _ENTRY_POINT.fullmatch(value):
            raise ValueError("must look like 'package.module:make_trainer'")
        return value

    @field_validator("entry")
    @classmethod
    def _entry_shape(cls, value: str) -> str:
        if not _ENTRY_POINT.fullmatch(value):
            raise ValueError("must look like 'package.module:ClassName'")
        return value

    @field_validator("command")
    @classmethod
    def _command_shape(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not value[0].strip()):
            raise ValueError("must start with the program to run, e.g. [python, train.py]")
        return value


class ControlSection(Section):
    """The reference configuration every variant is compared against."""

    params: dict[str, ParamValue] = {}
    """Parameters of the control, on top of `workload.params`. Each factor's control value
    is taken from here (or from `workload.params`)."""
    cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """The control's cost in the unit the levels' `cost` uses (see `Level.cost`)."""

    _finite = field_validator("params")(_finite_params)


class Level(Section):
    """One level of a factor."""

    value: ParamValue
    """The parameter value this level sets."""
    category: Category | None = None
    """Category of this level's variant; defaults to the factor's category."""
    cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """What this level's variant costs, in any unit shared by the plan (parameters, USD per
    run, seconds per step). Used by the non-inferiority rule to name the cheapest variant
    not usefully worse; when a candidate or the control lacks one, the median measured
    step time of the accepted main runs is used for all instead."""
    next_decisions: dict[Verdict, str] = {}
    """Verdict -> what you will do when this level gets it (e.g. `not worse: use width 16`);
    overrides the same verdict in the factor's and the campaign's `next_decisions`."""

    @field_validator("value")
    @classmethod
    def _finite_value(cls, value: ParamValue) -> ParamValue:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class Factor(Section):
    """One thing changed at a time: a parameter and the levels it takes instead of the control's."""

    levels: list[Level] = Field(min_length=1)
    """Levels to try; a bare scalar is shorthand for `{value: scalar}`."""
    category: Category | None = None
    """Category of every level that does not set its own."""
    hypothesis: str | None = None
    """What you expect changing this parameter to do, written before the campaign runs."""
    next_decisions: dict[Verdict, str] = {}
    """Verdict -> what you will do when a level of this factor gets it (e.g. `worse: keep
    width 64`), for each level the verdict is about: `{value}` stands for that level's value
    (`not worse: use width {value}`). Overrides the same verdict in
    `campaign.next_decisions`; a level's own `next_decisions` override it."""

    @field_validator("levels", mode="before")
    @classmethod
    def _scalar_levels(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [item if isinstance(item, dict) else {"value": item} for item in value]
        return value

    @model_validator(mode="after")
    def _levels_are_distinct_and_categorized(self) -> Factor:
        first: dict[str, int] = {}  # by shown value: the variant name is the identity
        for i, level in enumerate(self.levels):
            other = self.levels[first.setdefault(shown(level.value), i)].value
            if first[shown(level.value)] != i:
                same = "duplicate level" if same_value(other, level.value) else "levels"
                raise ValueError(
                    f"{same} {other!r} and {level.value!r} name the same variant "
                    f"(={shown(level.value)}); keep one"
                )
            if level.category is None and self.category is None:
                raise ValueError(
                    f"level {level.value!r} has no category: set the factor's `category` "
                    "or the level's own (essential, useful or exploratory)"
                )
        return self

    def category_of(self, level: Level) -> Category:
        """The level's category, falling back to the factor's."""
        category = level.category or self.category
        assert category is not None  # guaranteed by validation
        return category


class Interaction(Section):
    """A declared combination of factor levels, run as one extra variant."""

    set: dict[str, ParamValue] = Field(min_length=2)
    """Factor name -> one of its levels, for two or more factors."""
    category: Category = "exploratory"
    """Category of the interaction variant."""

    _finite = field_validator("set")(_finite_params)


class MetricSection(Section):
    """The quality metric the decision is made on."""

    name: str = "accuracy"
    """Name of the metric the workload's `evaluate` returns."""
    direction: Literal["maximize", "minimize"] = "maximize"
    """Whether larger or smaller values are better."""
    threshold: float = Field(allow_inf_nan=False)
    """Quality threshold: a run below it (after the warm-up) is stopped or rejected."""
    useful_effect: PositiveFloat
    """Smallest paired difference from the control worth acting on, in metric units."""
    decision_rule: DecisionRule = "superiority"
    """The question the paired 95% intervals answer, against the band [-useful_effect,
    +useful_effect]: `superiority` (is a variant usefully better? adopt the best one),
    `non_inferiority` (is it not usefully worse? adopt the cheapest such one, see
    `Level.cost`) or `equivalence` (is it interchangeable with the control, inside the band?)."""

    def meets_threshold(self, value: float) -> bool:
        """Whether a metric value reaches the quality threshold."""
        return meets_threshold(value, self.direction, self.threshold)


def meets_threshold(
    value: float, direction: Literal["maximize", "minimize"], threshold: float
) -> bool:
    """`MetricSection.meets_threshold` for a run spec: a non-finite value never meets it."""
    if not math.isfinite(value):
        return False
    return value >= threshold if direction == "maximize" else value <= threshold


class NonFiniteLossRule(Section):
    """Stop a run whose training loss becomes NaN or infinite."""

    enabled: bool = True
    """Whether the rule is active."""
    check_every: PositiveInt = 10
    """Steps between checks. Losses stay on the device and are copied to the host a window of
    this many steps at a time without the loop waiting for it (a GPU never synchronizes in
    the hot path); a NaN is seen once its window has arrived, a few steps later on a card."""


class QualityRule(Section):
    """Stop a run whose metric is below the threshold at an evaluation after the warm-up."""

    enabled: bool = True
    """Whether the rule is active."""
    warmup_steps: int = Field(default=100, ge=0)
    """Evaluations before this step never stop a run (early training is always poor)."""


class TruncationRule(Section):
    """Stop a run, before its first step, if an essential input is truncated."""

    enabled: bool = True
    """Whether the rule is active."""
    essential: list[str] = ["heldout"]
    """Input groups of the workload's input report that must not be truncated."""
    max_truncated_fraction: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    """Largest tolerated fraction of truncated inputs within an essential group."""


class RestartRule(Section):
    """Stop a run whose checkpoint cannot be reloaded into an identical continuation."""

    enabled: bool = True
    """Whether the restart check runs in preflight."""
    check_steps: PositiveInt = 3
    """Steps taken after a reload and compared with the uninterrupted continuation."""


class StopRules(Section):
    """Rules registered before anything runs; a stopped run is never an accepted result."""

    non_finite_loss: NonFiniteLossRule = NonFiniteLossRule()
    """NaN or infinite training loss."""
    quality: QualityRule = QualityRule()
    """Metric below the quality threshold after the warm-up."""
    truncation: TruncationRule = TruncationRule()
    """An essential input truncated."""
    restart: RestartRule = RestartRule()
    """No usable restart from a checkpoint."""


class PilotSection(Section):
    """The short first phase that measures durations and health before the money is spent."""

    variants: list[str] | None = None
    """Variant names to pilot; default: the essential ones (always including the control)."""
    seeds: list[int] | None = None
    """Seeds for the pilot; default: the first registered seed."""
    steps: PositiveInt | None = None
    """Steps of a pilot run; default: a quarter of `workload.steps` (at least one evaluation)."""


Trigger = Literal[
    "control_stopped", "control_failed", "control_below_threshold", "preflight_failed"
]


class GateSection(Section):
    """The decision after the pilot: continue, trim, reframe, or fix (preflight failed)."""

    mode: Literal["auto", "ui"] = "auto"
    """`auto` applies the policy below; `ui` asks in the Prefect UI and falls back to it."""
    timeout_minutes: PositiveFloat = 30.0
    """How long the UI gate waits for an answer before applying the automatic decision."""
    reframe_on: list[Trigger] = ["control_stopped", "control_failed", "control_below_threshold"]
    """Pilot outcomes that mean the question itself must be revised. A failed preflight is a
    defect to fix, never a question: it always ends at `fix` (`preflight_failed` is still
    accepted, for plans written before `fix`, and changes nothing)."""
    trim_stopped: bool = True
    """Drop the main runs of variants whose pilot run was stopped by a rule (an essential
    variant only as `trim_essential` allows)."""
    trim_rejected: bool = True
    """Drop the main runs of variants whose pilot run was rejected (it completed its pilot
    steps below the quality threshold): their verdict is `fails threshold in the pilot`, and
    the gate's decision lists them. An essential variant only as `trim_essential` allows."""
    trim_essential: bool = False
    """Let `trim_stopped` and `trim_rejected` drop an essential variant too, and then only
    when every pilot seed of it was stopped or rejected and there are at least two. Off:
    essential variants are kept and the reason says so (a person at the UI gate can still
    drop them)."""
    trim_order: list[Literal["exploratory", "useful"]] = ["exploratory", "useful"]
    """Categories dropped, in order, when the projected time does not fit the window."""
    budget_margin: float = Field(default=0.15, ge=0.0, lt=1.0, allow_inf_nan=False)
    """Fraction of the remaining package window kept in reserve when projecting the fit."""


class Interval(Section):
    """How often a run checkpoints: `auto`, `{steps: N}` or `{seconds: S}`."""

    steps: PositiveInt | None = None
    """Checkpoint every N steps."""
    seconds: PositiveFloat | None = None
    """Checkpoint every S seconds of training."""

    @model_validator(mode="after")
    def _at_most_one(self) -> Interval:
        if self.steps is not None and self.seconds is not None:
            raise ValueError("give either `steps` or `seconds`, not both")
        return self

    @property
    def is_auto(self) -> bool:
        """Whether the interval is tuned from the measured checkpoint cost."""
        return self.steps is None and self.seconds is None


class CheckpointSection(Section):
    """Where and how often runs save their full training state."""

    store: str = "file://checkpoints"
    """fsspec URL of the checkpoint store: `file://PATH` (a relative PATH is inside the
    campaign's output folder), `s3://BUCKET/PREFIX` or `memory://NAME`."""
    endpoint_url: str | None = None
    """S3 endpoint for S3-compatible servers (credentials come from the environment only)."""
    interval: Interval = Interval()
    """`auto` (Young/Daly from the measured save cost), `{steps: N}` or `{seconds: S}`."""
    mtbf_hours: PositiveFloat = 4.0
    """Expected time between interruptions M (preemption, crash) used by `auto`."""
    max_loss_minutes: PositiveFloat = 10.0
    """Most training time you accept to lose to an interruption; caps the `auto` interval."""
    keep_last: PositiveInt = 2
    """Committed checkpoints kept per run; the only committed one is never deleted."""
    on_terminate: bool = True
    """On SIGTERM (a spot or rented machine reclaimed, a scheduler stopping the job) each
    running run commits a checkpoint at its current step, is recorded as interrupted and its
    process exits; a rerun resumes it from that step. Off: SIGTERM ends the processes at once
    and the work since the last interval checkpoint is lost."""
    terminate_grace_seconds: PositiveFloat = 30.0
    """Seconds after SIGTERM within which the runs commit and every process exits; past it
    they are ended without their save. 30 s is Kubernetes' default grace and GCP's spot
    notice (AWS gives 120 s): keep it below what your platform allows."""

    def in_folder(self, out_dir: str) -> CheckpointSection:
        """This section with a relative `file://` store placed inside the campaign's output
        folder: each campaign keeps its own checkpoints, and a restart finds them from any
        working directory. Absolute paths, S3 and memory stores are unchanged."""
        scheme, _, path = self.store.partition("://")
        if scheme != "file" or os.path.isabs(path):
            return self
        inside = os.path.normpath(os.path.join(out_dir, path))
        return self.model_copy(update={"store": f"file://{inside}"})

    @field_validator("interval", mode="before")
    @classmethod
    def _auto_string(cls, value: Any) -> Any:
        if value == "auto":
            return {}
        if isinstance(value, str):
            raise ValueError("must be 'auto', {steps: N} or {seconds: S}")
        return value

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint_without_credentials(cls, value: str | None) -> str | None:
        if value is not None and "@" in value.partition("://")[2].split("/")[0]:
            raise ValueError(_NO_CREDENTIALS)
        if value is not None and not re.match(r"^https?://[^/]+", value):
            raise ValueError("must be an http:// or https:// URL")
        if value is not None and ("?" in value or "#" in value):
            # a query string may hold credentials, and this URL is copied into plan.yaml,
            # the manifest and RELOAD.md
            raise ValueError("must not hold a query (?...) or fragment (#...)")
        return value

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str) -> str:
        if "@" in value.partition("://")[2].split("/")[0]:
            raise ValueError(_NO_CREDENTIALS)
        scheme, sep, rest = value.partition("://")
        if not sep or scheme not in STORE_SCHEMES:
            raise ValueError(f"must be a URL starting with one of {', '.join(STORE_SCHEMES)}://")
        if not rest.strip("/"):
            raise ValueError("needs a path, bucket or name after the scheme")
        relative = scheme == "file" and not rest.startswith("/")
        if relative and os.path.normpath(rest).split("/")[0] == "..":
            # a relative store lives inside the campaign's folder: `..` must not lead out
            raise ValueError("a relative file:// store must stay inside the folder: '..' leads out")
        if scheme == "s3" and not re.match(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/|$)", rest):
            raise ValueError("S3 bucket names are 3-63 lowercase letters, digits, '.' or '-'")
        return value


class ResourcesSection(Section):
    """The devices runs are placed on."""

    devices: Literal["auto"] | PositiveInt | list[str] = "auto"
    """`auto` (every CUDA device, else one CPU slot per physical core), a number of CPU slots,
    or a list such as `[cuda:0, cuda:1]`."""
    slots_per_device: PositiveInt | Literal["auto"] = 1
    """Runs sharing one device at once (1: never two runs on a card). `auto`: as many as the
    probe's peak memory plus `probe.margin` fits on each card (see `ablate probe`), at most
    `max_slots_per_device`; 1 without a probe result or on CPU (CPU slots follow the cores)."""
    max_slots_per_device: PositiveInt = 4
    """The most runs `slots_per_device: auto` ever places on one device."""
    # exclude: a safety cap, not the experiment: it stays out of the plan hash (and run ids)
    max_runs: PositiveInt | None = Field(default=None, exclude=True)
    """Lowers the most runs (variants x seeds) the plan may declare below the cap of the
    process that runs it (`--max-runs`, `ABLATE_MAX_RUNS`, default 10 000): a plan may only
    lower it, never raise it. A few kilobytes of YAML can declare millions of runs."""

    @field_validator("devices", mode="before")
    @classmethod
    def _device_list(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be 'auto', a number of CPU slots or a list of devices")
        if isinstance(value, str) and value != "auto":
            value = [value]
        if isinstance(value, list):
            if not value:
                raise ValueError("the device list is empty")
            bad = [d for d in value if not isinstance(d, str) or not _DEVICE.fullmatch(d)]
            if bad:
                raise ValueError(f"unknown device {bad[0]!r}: use 'cpu' or 'cuda:N'")
            if len(set(value)) != len(value):
                raise ValueError("a device is listed twice")
        return value


class ProbeSection(Section):
    """`ablate probe`: the few steps per variant, input group and batch size that size a card."""

    batch_sizes: list[PositiveInt] = Field(default=[1, 2, 4], min_length=1)
    """Batch sizes tried per input group, smallest first, stopping at the first error (the
    runs' own `batch_size` param is always tried too)."""
    steps: PositiveInt = 6
    """Training steps per point; the first warms up, the rest are timed."""
    margin: float = Field(default=0.2, ge=0.0, lt=1.0)
    """Memory kept free on a card: the peak x (1 + margin) must fit its memory class."""
    result: str | None = None
    """A `probe.json` (relative to the plan file's folder) that `ablate plan`, `ablate budget`
    and `slots_per_device: auto` use; default: `probe.json` beside the plan when it exists."""


class Cost(Section):
    """A cost besides the GPU package, as the user was charged it."""

    name: str = Field(min_length=1)
    """What it is (storage, data transfer...)."""
    usd: float = Field(ge=0, allow_inf_nan=False)
    """Amount in USD."""


class Offer(Section):
    """A rental package offer: adds to or overrides the built-in catalog."""

    gpu: str = Field(min_length=1)
    """Card name, e.g. `RTX 4090`."""
    days: PositiveInt
    """Length of the rental window in days."""
    price_usd: float = Field(ge=0, allow_inf_nan=False)
    """Price of one lot for the window, in USD."""
    cards_per_lot: PositiveInt = 1
    """Cards in one lot (a B200 lot holds two)."""


class PackageSection(Section):
    """The package that was rented."""

    gpu: str = "RTX 4090"
    """Card name; must match a catalog offer unless `price_usd` is given."""
    lots: PositiveInt = 1
    """Lots rented; each holds the offer's cards."""
    days: PositiveInt = 3
    """Rental window in days."""
    price_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Price of one lot; default: the catalog price for this card and window."""


class RunEstimate(Section):
    """Per-run time estimates used for planning until the pilot has measured them."""

    load_seconds: float = Field(default=5.0, ge=0, allow_inf_nan=False)
    """Building the workload and loading data."""
    step_seconds: float = Field(default=0.01, ge=0, allow_inf_nan=False)
    """One training step."""
    eval_seconds: float = Field(default=0.1, ge=0, allow_inf_nan=False)
    """One evaluation on the held-out set."""
    checkpoint_seconds: float = Field(default=0.5, ge=0, allow_inf_nan=False)
    """One checkpoint (stall plus commit)."""
    export_seconds: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    """Writing the run's metrics and predictions."""


class BudgetSection(Section):
    """What the campaign may spend."""

    package: PackageSection = PackageSection()
    """The rented package."""
    other_costs: list[Cost] = []
    """Other costs the user pays (storage, transfer); only what is given is counted."""
    prep_hours: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """Human preparation time inside the window that does not occupy the GPU."""
    estimate: RunEstimate = RunEstimate()
    """Time estimates used before the pilot has measured real ones."""
    offers: list[Offer] = []
    """Extra or corrected catalog offers."""
