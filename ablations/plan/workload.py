"""The plan's `workload` section: the training code, its adapters and its data."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from ablations.plan.section import ParamValue, PositiveInt, Section, finite_params

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

DEFAULT_REPORT_TIMEOUT_SECONDS = 600.0
"""A command's limit when the plan sets none: ten minutes without a report is far beyond a
training step or an evaluation of a campaign sized for rented hours, and short enough that a
hung program does not idle a card for long."""
MAX_REPORT_TIMEOUT_SECONDS = 86_400.0
"""A day: a program silent longer is hung, and a larger number is a typo."""

TimeoutSeconds = Annotated[float, Field(gt=0, le=MAX_REPORT_TIMEOUT_SECONDS, allow_inf_nan=False)]


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
    """Import path `module:attribute` of the workload class (see `ablations.run.workload`), or
    of an adapter entry for a framework's own loop (`ablations.byo`: Lightning, Trainer)."""
    command: list[str] | None = None
    """Any program instead of an entry, e.g. `[python, train.py, --lr, "{lr}"]`: `{name}`
    is replaced by the run's parameter `name`; seed, steps, device and checkpoint folder come
    in `ABLATE_*` environment variables and the program reports JSON lines on stdout (see
    docs/own-code.md, "Any command"). A leading `python` is the interpreter running ablate."""
    lightning: LightningSection | None = None
    """A PyTorch Lightning module and data module instead of an entry (`pip install
    'ablate[lightning]'`; see docs/own-code.md, "PyTorch Lightning")."""
    hf_trainer: str | None = None
    """Import path `module:function` of `make_trainer(params, args) -> transformers.Trainer`
    instead of an entry: `args` are the `TrainingArguments` keywords ablate owns (steps,
    evaluation, seed, device, output folder); pass them on with your own (`pip install
    'ablate[hf]'`; see docs/own-code.md, "Hugging Face Trainer")."""
    report_timeout_seconds: TimeoutSeconds | None = None
    """For `command` only: seconds the program may go without a report line (from its start,
    between reports, and from its last report to its exit; ablate's own time answering it is
    not counted). Past it the run
    fails with "no report for N s" (a defect of the code, like any crash), its process group
    is killed and the campaign goes on; the preflight's restart check is held to it too.
    Default 600 (`DEFAULT_REPORT_TIMEOUT_SECONDS`); raise it for a program whose start or
    single step takes longer. Not part of the plan hash: raised, the same command reruns the
    same campaign (its preflight again, after a `fix`)."""
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

    _finite = field_validator("params")(finite_params)

    @field_validator("data_sha256")
    @classmethod
    def _digest_shape(cls, value: str | None) -> str | None:
        if value is not None and not _SHA256.fullmatch(value):
            raise ValueError("must be a sha256: 64 lowercase hexadecimal digits")
        return value

    @model_serializer(mode="wrap")
    def _unset_left_out(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Plans registered before `code`, `data_sha256` and `report_timeout_seconds` existed
        keep their hash (and run ids): each is left out while unset."""
        data: dict[str, Any] = handler(self)
        for name in ("code", "data_sha256", "report_timeout_seconds"):
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
        if data.get("report_timeout_seconds") is not None and data.get("command") is None:
            raise ValueError(
                "report_timeout_seconds limits a `command` program's silence; other workloads "
                "report from this process: leave it out"
            )
        return data

    @property
    def report_timeout(self) -> float:
        """Seconds a command's program may go without a report (the plan's, or the default)."""
        if self.report_timeout_seconds is None:
            return DEFAULT_REPORT_TIMEOUT_SECONDS
        return self.report_timeout_seconds

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
