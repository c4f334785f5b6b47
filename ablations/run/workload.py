"""The workload protocol: what a user's training code implements so the driver can run it.

A workload is a class with a `build` classmethod. The driver owns the loop, the stop rules and
checkpoints; the workload owns the model, the data and one step of training::

    class MyWorkload:
        @classmethod
        def build(cls, params, *, seed, device, steps): ...   # model, optimizer, data on device
        model: torch.nn.Module
        optimizer: torch.optim.Optimizer
        scheduler = None                  # or an LRScheduler
        scaler = None                     # or a torch.amp.GradScaler
        def train_step(self, step): ...   # one step; return the loss *tensor* (no .item())
        def evaluate(self): ...           # Evaluation on the held-out set
        def state_dict(self): ...         # the workload's own state (data position), tensors ok
        def load_state_dict(self, state): ...
        def input_report(self): ...       # InputReport: seen / truncated per input group

The driver seeds Python's, NumPy's and torch's RNGs with the run's seed before `build`.
`train_step` returns the loss as a tensor, left on the device: the driver reads losses back
in batches, so a GPU is never made to wait on every step.

Optional: `splits()` returning `Splits` lets the built-in data check inspect the data;
`check_data()` returning a list of `DataProblem` replaces the built-in check (see
`ablations.preflight.data_check`; the plan's registered counts are checked either way).
`data_sha256()` returning a digest of the data read puts it in the run environment (and the
manifest); a plan registering one (`workload.data_sha256`) has every other digest refused. A
classmethod `probe_groups(params)` returning input group -> param overrides (e.g. `{"seq64":
{"seq_len": 64}}`) gives `ablate probe` its input groups; without it the probe runs one group,
`all`, with the run's own params.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ablations.errors import WorkloadError
from ablations.plan.section import ParamValue

if TYPE_CHECKING:  # annotations only: a command's run path loads neither (3 s of CPU)
    import numpy as np
    import torch


@dataclass(frozen=True)
class InputGroup:
    """How many inputs of one group (a split, a modality) the workload saw and truncated."""

    seen: int
    truncated: int = 0

    @property
    def truncated_fraction(self) -> float:
        return self.truncated / self.seen if self.seen else 0.0


@dataclass(frozen=True)
class InputReport:
    """The workload's account of its inputs, checked before the first step."""

    groups: dict[str, InputGroup]


@dataclass(frozen=True)
class Predictions:
    """Per held-out input: its id, its label and what the model predicted."""

    ids: list[int]
    labels: list[int]
    predicted: list[int]


@dataclass(frozen=True)
class Evaluation:
    """Metrics on the held-out set, plus the predictions behind them (when classifying)."""

    metrics: dict[str, float]
    predictions: Predictions | None = None


@dataclass(frozen=True)
class Split:
    """One side of the data, for the data check: ids, raw inputs (one row each) and labels."""

    ids: np.ndarray
    inputs: np.ndarray
    labels: np.ndarray


@dataclass(frozen=True)
class Splits:
    """The training and held-out sides."""

    train: Split
    heldout: Split


@dataclass(frozen=True)
class DataProblem:
    """One failed data check, by name, with the offending input ids."""

    check: str
    message: str
    ids: list[int] = field(default_factory=list)

    def __str__(self) -> str:
        shown = f" ids {self.ids[:10]}{'...' if len(self.ids) > 10 else ''}" if self.ids else ""
        return f"{self.check}: {self.message}{shown}"


def data_digest(workload: object) -> str | None:
    """The digest of the data `workload` read (its optional `data_sha256()`), or None."""
    digest = getattr(workload, "data_sha256", None)
    return str(digest()) if callable(digest) else None


def data_digest_problem(workload: object, registered: str | None) -> DataProblem | None:
    """The one-line refusal when the plan registers a data digest the workload does not have:
    same plan, same bytes, on every machine. None when nothing is registered or it matches."""
    if registered is None:
        return None
    found = data_digest(workload)
    if found == registered:
        return None
    if found is None:
        return DataProblem(
            "data_sha256",
            f"the plan registers data sha256 {registered}, but the workload reports no "
            "digest of its data (it has no data_sha256())",
        )
    return DataProblem(
        "data_sha256",
        f"the workload read data with sha256 {found}, not the {registered} the plan "
        "registers (workload.data_sha256): other bytes than the plan's",
    )


@runtime_checkable
class Workload(Protocol):
    """A built workload instance (see the module docstring)."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    scaler: Any

    def train_step(self, step: int) -> torch.Tensor: ...

    def evaluate(self) -> Evaluation: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...

    def input_report(self) -> InputReport: ...


class WorkloadFactory(Protocol):
    """The class the plan names: `build(params, seed=, device=, steps=)` returns a Workload."""

    def build(
        self, params: Mapping[str, ParamValue], *, seed: int, device: torch.device, steps: int
    ) -> Workload: ...


def load_workload(entry: str) -> WorkloadFactory:
    """Import `module:attr` and check that it has a `build` callable."""
    module_name, _, attr = entry.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise WorkloadError(f"cannot import workload {entry!r}: {exc}") from exc
    # `run_external`: code whose framework owns the loop (ablations.byo).
    if not callable(getattr(factory, "build", None)) and not callable(
        getattr(factory, "run_external", None)
    ):
        raise WorkloadError(f"workload {entry!r} has no callable `build(params, seed=, device=)`")
    return factory
