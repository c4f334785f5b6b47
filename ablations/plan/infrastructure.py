"""Where and how runs run: the checkpoint store and interval, devices and slots, the probe."""

from __future__ import annotations

import os
import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from ablations.plan.section import PositiveFloat, PositiveInt, Section

_DEVICE = re.compile(r"cpu(:[0-9]+)?|cuda:[0-9]+")
"""Patterns are matched with `fullmatch`: `$` would accept a trailing newline."""

STORE_SCHEMES = ("file", "memory", "s3")

MAX_KEEP_LAST = 1000
"""Committed checkpoints kept per run: more is a full disk, not a policy."""
MAX_SLOTS = 1024
"""CPU slots, or runs on one device: each is a process with its own memory."""
MAX_PROBE_BATCH = 1 << 16
"""A probe's batch size: the probe builds a batch of it on the card."""
MAX_PROBE_STEPS = 1000
KeepLast = Annotated[int, Field(gt=0, le=MAX_KEEP_LAST)]
Slots = Annotated[int, Field(gt=0, le=MAX_SLOTS)]
ProbeBatch = Annotated[int, Field(gt=0, le=MAX_PROBE_BATCH)]
ProbeSteps = Annotated[int, Field(gt=0, le=MAX_PROBE_STEPS)]

_NO_CREDENTIALS = (
    "must not embed credentials (user:secret@); the plan is copied into the output folder. "
    "Give S3 keys through the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
)


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


def folder_store_path(store: str, out_dir: str) -> str | None:
    """Where a relative `file://` store lies inside the output folder `out_dir` (the folder's
    own store); None for an absolute path, S3 or memory (a store that may be shared)."""
    scheme, _, path = store.partition("://")
    if scheme != "file" or os.path.isabs(path):
        return None
    return os.path.normpath(os.path.join(out_dir, path))


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
    keep_last: KeepLast = 2
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
        inside = folder_store_path(self.store, out_dir)
        return self if inside is None else self.model_copy(update={"store": f"file://{inside}"})

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
        if scheme != "file" and ("?" in rest or "#" in rest):
            # a query may hold credentials (a presigned URL's), and the URL is copied into
            # plan.yaml, the manifest and RELOAD.md
            raise ValueError("must not hold a query (?...) or fragment (#...)")
        relative = scheme == "file" and not rest.startswith("/")
        if relative and os.path.normpath(rest).split("/")[0] == "..":
            # a relative store lives inside the campaign's folder: `..` must not lead out
            raise ValueError("a relative file:// store must stay inside the folder: '..' leads out")
        if scheme == "s3" and not re.match(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/|$)", rest):
            raise ValueError("S3 bucket names are 3-63 lowercase letters, digits, '.' or '-'")
        return value


class ResourcesSection(Section):
    """The devices runs are placed on."""

    devices: Literal["auto"] | Slots | list[str] = "auto"
    """`auto` (every CUDA device, else one CPU slot per physical core), a number of CPU slots,
    or a list such as `[cuda:0, cuda:1]`."""
    slots_per_device: Slots | Literal["auto"] = 1
    """Runs sharing one device at once (1: never two runs on a card). `auto`: as many as the
    probe's peak memory plus `probe.margin` fits on each card (see `ablate probe`), at most
    `max_slots_per_device`; 1 without a probe result or on CPU (CPU slots follow the cores)."""
    max_slots_per_device: Slots = 4
    """The most runs `slots_per_device: auto` ever places on one device."""
    # exclude: a safety cap, not the experiment: it stays out of the plan hash (and run ids)
    max_runs: PositiveInt | None = Field(default=None, exclude=True)
    """Lowers the most runs (variants x seeds) the plan may declare below the cap of the
    process that runs it (`--max-runs`, `ABLATE_MAX_RUNS`, default 10 000): a plan may only
    lower it, never raise it. A few kilobytes of YAML can declare millions of runs."""

    @field_validator("devices", "slots_per_device", mode="before")
    @classmethod
    def _slots_bounded(cls, value: Any) -> Any:
        # said once here: pydantic would word it once per member of the union
        if isinstance(value, int | float) and not isinstance(value, bool) and value > MAX_SLOTS:
            raise ValueError(f"at most {MAX_SLOTS} slots")
        return value

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

    batch_sizes: list[ProbeBatch] = Field(default=[1, 2, 4], min_length=1, max_length=64)
    """Batch sizes tried per input group, smallest first, stopping at the first error (the
    runs' own `batch_size` param is always tried too)."""
    steps: ProbeSteps = 6
    """Training steps per point; the first warms up, the rest are timed."""
    margin: float = Field(default=0.2, ge=0.0, lt=1.0)
    """Memory kept free on a card: the peak x (1 + margin) must fit its memory class."""
    result: str | None = None
    """A `probe.json` (relative to the plan file's folder) that `ablate plan`, `ablate budget`
    and `slots_per_device: auto` use; default: `probe.json` beside the plan when it exists."""
