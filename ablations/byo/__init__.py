"""Bring your own training code: the framework owns the loop, the campaign its rules.

session.py        `Session`: reports in; "checkpoint now?" / "stop?" out; folder commits
run.py            `execute`: one run of an external workload to its `RunRecord`
command.py        any program (`workload.command`): env vars in, JSON lines out
helper/          `ablate_report.py`, the stdlib-only helper a Python script imports
lightning.py      a LightningModule and DataModule (`workload.lightning`): a Callback
hf.py             a Hugging Face Trainer (`workload.hf_trainer`): a TrainerCallback
restart.py        the preflight's restart check for them, naming the cause of an inexact resume
trace.py          what the check's runs saw (batch and state digests), for naming the cause
generators.py     the random generators as one value (checkpointed; forked around evaluation)
data.py           `ResumableLoader`: a map-style dataset's loader that resumes mid-epoch
probe.py          `ablate probe` for them

An external workload is the object a plan's `workload.entry` names when it has
`run_external(spec, session)` instead of `build`: it runs the framework's loop, reporting
to `session` and obeying its replies (see `ExternalWorkload`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from ablations.process.environment import environment_set

if TYPE_CHECKING:
    from ablations.byo.session import Session
    from ablations.plan.workload import WorkloadSection
    from ablations.run.records import RunSpec


class ExternalWorkload(Protocol):
    """Training code whose loop is its own framework's. It may also name, as `frameworks`,
    the packages whose versions its runs record (those loaded once it has run)."""

    def run_external(self, spec: RunSpec, session: Session) -> None:
        """Train `spec` to its end or until a reply says stop; raise when training fails."""
        ...


def framework_versions(factory: object) -> dict[str, str]:
    """Package -> version of each of `factory.frameworks` this process has imported (a
    package the run never loaded, e.g. `peft` for a Trainer without adapters, is left out)."""
    import importlib.metadata
    import sys

    versions: dict[str, str] = {}
    for name in getattr(factory, "frameworks", ()):
        module = sys.modules.get(name)
        if module is None:
            continue
        version = getattr(module, "__version__", None)
        if not isinstance(version, str):
            try:
                version = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                continue
        versions[name] = version
    return versions


def is_external(factory: Any) -> TypeGuard[ExternalWorkload]:
    """Whether a loaded workload entry runs its own loop (`run_external`)."""
    return callable(getattr(factory, "run_external", None))


def load_attribute(entry: str) -> Any:
    """The user's class or function `module:name` (`WorkloadError` naming it otherwise)."""
    import importlib

    from ablations.errors import WorkloadError

    module, _, name = entry.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise WorkloadError(f"cannot import {entry!r}: {exc}") from exc


def external_entry(entry: str) -> bool:
    """Whether the workload entry `module:attr` imports and runs its own loop."""
    from ablations.run.workload import load_workload

    try:
        return is_external(load_workload(entry))
    except Exception:  # an entry that does not import is reported where it is used
        return False


def run_variables(spec: RunSpec) -> dict[str, str]:
    """What the run's code may read from its environment (`ablate_report` reads them): seed,
    length, evaluation cadence, and whether this process trains a pilot and how far."""
    return {
        "ABLATE_SEED": str(spec.seed),
        "ABLATE_STEPS": str(spec.steps),  # the run's length: LR schedules see the real one
        "ABLATE_UNTIL": str(spec.until if spec.until is not None else spec.steps),
        "ABLATE_PHASE": spec.phase,
        "ABLATE_EVAL_EVERY": str(spec.workload.eval_every),
    }


@contextmanager
def run_environment(spec: RunSpec) -> Iterator[None]:
    """`run_variables(spec)` in this process's environment while a framework's run trains in
    it (a Lightning module or a `make_trainer` reads them as a command does; the worker runs
    one run at a time), as they were afterwards. `ABLATE_RUN_ID` is not among them: an
    `ablate_report.report` call in such code stays a no-op (the adapter reports)."""
    with environment_set(run_variables(spec)):
        yield


KEPT_MODEL = {
    "command": "a command's model is its program's own: its runs export their losses, "
    "evaluations and predictions, no weights",
    "lightning": "a Lightning run's model is in Lightning's checkpoints in the checkpoint "
    "store (verify checks they are committed), not a models/ file",
    "hf_trainer": "a Trainer run's model is in its checkpoint-N folders in the checkpoint "
    "store (verify checks they are committed), not a models/ file",
}
"""Where an adapter's run keeps its model, by the plan's field naming the adapter."""


def adapter_field(workload: WorkloadSection) -> str | None:
    """The plan field naming the workload's adapter (`command`, `lightning`, `hf_trainer`),
    or None for a workload class."""
    return next((name for name in KEPT_MODEL if getattr(workload, name) is not None), None)


def verify_scope(workload: WorkloadSection) -> str:
    """What `ablate verify` checks of this workload's runs, as one sentence."""
    checked = (
        "`ablate verify` re-hashes every file manifest.json lists and checks each run's "
        "checkpoints are committed"
    )
    adapter = adapter_field(workload)
    if adapter is None:
        return f"{checked}, and re-evaluates each accepted run's final model (models/) afresh."
    return f"{checked}; it re-evaluates no model: {KEPT_MODEL[adapter]}."
