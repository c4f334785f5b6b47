"""`Session`: the campaign's side of a run whose training loop belongs to someone else.

The framework (a script, Lightning, a Hugging Face `Trainer`) runs its loop and tells the
session what happened; the session answers the two questions the campaign owns:

    reply = session.report(step, loss, metrics)   # the stop rules; "checkpoint now?" "stop?"
    reply = session.report_batch(steps, losses)    # the same, for steps a program batched
    session.commit(step, folder)                   # the folder the framework saved, committed
    step = session.restore(folder)                 # the newest commit, unpacked (0: none)
    session.request_checkpoint()                   # from outside (the slot is going away)
    session.late_losses([(step, loss), ...])       # losses read from the device in a batch
    session.set_predictions(ids, labels, predicted) # held-out predictions, for the flips

A checkpoint is the framework's own folder, packed as one tar object plus the run's history
(`run.json`), committed through the run's `CheckpointManager` (store, commit record, tuned
interval, background saver): the same layout, retention and fencing as a built-in workload's.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import logging
import operator
import shutil
import tarfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ablations.checkpoint.manager import CheckpointManager
from ablations.errors import MissingMetric, StoreError, WorkloadError
from ablations.process.preemption import TERMINATE
from ablations.run.records import CheckpointSummary, RunSpec, Stop, Timings
from ablations.run.workload import Predictions
from ablations.training.stop_rules import non_finite_stop, quality_stop

if TYPE_CHECKING:
    from ablations.byo.trace import RestartTrace

log = logging.getLogger(__name__)

LOSS_SYNC_STEPS = 16
"""On a GPU the framework adapters read losses back every this many steps (and before every
checkpoint, evaluation and stop), through `late_losses`: the non-finite rule stops a diverged
run at most this many steps late, naming the step whose loss was not finite."""
FOLDER, HISTORY = "folder.tar", "run.json"
"""The payload objects of a folder checkpoint: the framework's files, and our history."""


PREDICTION_COLUMNS = ("input_id", "label", "predicted")
"""The predictions file's columns (`ablations.analysis.flips` reads it): integers."""


def _integers(values: Iterable[object], column: str) -> list[int]:
    """`values` as ints: Python or numpy integers, integer tensors' items, integer strings."""
    if hasattr(values, "tolist"):  # a tensor or an array: its items as Python numbers
        values = values.tolist()
    out: list[int] = []
    for value in values:
        if isinstance(value, str):
            try:
                out.append(int(value))
                continue
            except ValueError:
                pass
        elif not isinstance(value, bool | float):
            try:
                out.append(operator.index(value))  # type: ignore[arg-type]
                continue
            except TypeError:
                pass
        raise WorkloadError(f"predictions: {column} {value!r} is not an integer")
    return out


def check_folder(payload: dict[str, bytes]) -> None:
    """Whether a committed folder checkpoint reads back: its history and every member
    (`StoreError` otherwise); used by `ablate verify`."""
    try:
        json.loads(payload[HISTORY])["step"]
        with tarfile.open(fileobj=io.BytesIO(payload[FOLDER])) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    handle = tar.extractfile(member)
                    assert handle is not None
                    handle.read()
    except (tarfile.TarError, ValueError, KeyError, TypeError, OSError) as exc:
        raise StoreError(f"checkpoint folder does not read back: {exc}") from exc


class Reply(NamedTuple):
    """The session's answer to one report."""

    checkpoint: bool
    """Save the training state now (into the folder the adapter gave) and `commit` it."""
    stop: bool
    """End training: a stop rule fired, or the steps this run trains are done."""


class Session:
    """One run's reports, stop rules and folder checkpoints (see the module docstring)."""

    def __init__(self, spec: RunSpec, checkpoints: CheckpointManager | None = None) -> None:
        self.spec, self.checkpoints = spec, checkpoints
        # The last step this process trains: a pilot's `until`, else the run's last step.
        self.end = spec.until if spec.until is not None else spec.steps
        self.step = 0
        self.resumed_step = 0
        self.interrupted_at: int | None = None
        """The step at which a terminate request (`ablations.process.preemption`) ended the run."""
        self.losses: list[tuple[int, float]] = []
        """(step, training loss) of every report that carried one."""
        self.evaluations: list[dict[str, float]] = []
        """`step` plus the metrics of every report that carried metrics."""
        self.step_seconds: list[float] = []
        """Wall seconds per step between consecutive reports."""
        self.stop: Stop | None = None
        self.program_pid: int | None = None
        """The process a command adapter started for the run (the probe reads its memory)."""
        self.predictions: Predictions | None = None
        """The held-out predictions the code gave (optional): `predictions/<run>.csv`, which
        the error analysis (flips) reads."""
        self.timings = Timings()
        self.trace: RestartTrace | None = None
        """Set by the restart check only: what the adapter saw (batches, the state at the
        check's middle step), to name why a resume differs (`ablations.byo.trace`)."""
        self._started = self._last_report = time.perf_counter()
        self._first_report: float | None = None
        self._paused = 0.0
        """Seconds since the first report spent committing checkpoints, not training."""
        self._requested = threading.Event()

    # -- checkpoints ----------------------------------------------------------------------

    def restore(self, folder: Path) -> int:
        """Unpack the newest committed checkpoint into `folder`; its step (0: none)."""
        if self.checkpoints is None:
            return 0
        started = time.perf_counter()

        def unpack(payload: dict[str, bytes]) -> int:
            history = json.loads(payload[HISTORY])
            shutil.rmtree(folder, ignore_errors=True)  # a refused newer one may be half out
            folder.mkdir(parents=True)
            try:
                with tarfile.open(fileobj=io.BytesIO(payload[FOLDER])) as tar:
                    tar.extractall(folder, filter="data")  # no absolute paths, links out
            except (tarfile.TarError, OSError) as exc:
                raise StoreError(f"checkpoint folder does not unpack: {exc}") from exc
            self.losses = [(int(s), float(v)) for s, v in history["losses"]]
            self.evaluations = list(history["evaluations"])
            self.step_seconds = list(history["step_seconds"])
            return int(history["step"])

        self.step = self.resumed_step = self.checkpoints.resume_with(unpack)
        self.timings.checkpoint += time.perf_counter() - started
        return self.step

    def commit(self, step: int, folder: Path) -> None:
        """Pack `folder` (the framework has finished writing it) and commit it behind."""
        if self.checkpoints is None:
            return
        started = time.perf_counter()
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode="w") as tar:
            for path in sorted(folder.rglob("*")):
                tar.add(path, arcname=str(path.relative_to(folder)), recursive=False)
        history = {
            "step": step,
            "losses": self.losses,
            "evaluations": self.evaluations,
            "step_seconds": self.step_seconds,
        }
        payload = {FOLDER: packed.getvalue(), HISTORY: json.dumps(history).encode()}
        self.checkpoints.save_payload(step, lambda: payload, started)
        seconds = time.perf_counter() - started
        self.timings.checkpoint += seconds
        self._paused += seconds
        self._last_report = time.perf_counter()  # the save is not a training step's time

    def request_checkpoint(self) -> None:
        """Ask for a checkpoint at the next report (thread-safe: e.g. a SIGTERM handler)."""
        self._requested.set()

    # -- reports --------------------------------------------------------------------------

    def report(
        self, step: int, loss: float | None = None, metrics: Mapping[str, float] | None = None
    ) -> Reply:
        """Record step `step` (its loss, its evaluation) and answer: checkpoint? stop?"""
        if step <= self.step:
            raise WorkloadError(self._backwards(step))
        self._clock(step)
        return self._take(step, loss, metrics)

    def report_batch(
        self,
        steps: list[int],
        losses: list[float | None],
        metrics: Mapping[str, float] | None = None,
    ) -> Reply:
        """Steps a program reported together (on short steps, one round trip each would cost
        more than the step), each taken as `report` takes it, `metrics` with the last; one
        answer for all. A stop rule firing at one of them ends the run at that step."""
        if not steps or len(losses) != len(steps):
            raise WorkloadError(
                f"a batch of reports needs as many losses as steps ({len(steps)} steps, "
                f"{len(losses)} losses)"
            )
        if steps[0] <= self.step:
            raise WorkloadError(self._backwards(steps[0]))
        if any(b <= a for a, b in itertools.pairwise(steps)):
            raise WorkloadError(f"steps {steps} reported together must increase")
        self._clock(steps[-1])  # one timing for the batch: its seconds over its steps
        checkpoint = stop = False
        for i, (step, loss) in enumerate(zip(steps, losses, strict=True)):
            reply = self._take(step, loss, metrics if i == len(steps) - 1 else None)
            checkpoint, stop = checkpoint or reply.checkpoint, stop or reply.stop
            if self.stop is not None:
                break  # a rule fired: its step is the run's last, the later ones are moot
        return Reply(checkpoint=checkpoint and self.stop is None, stop=stop)

    def next_due(self) -> int:
        """The next step this session must hear as it happens, not batched with later ones:
        the last step this process trains, or the next step a steps interval checkpoints."""
        due = self.end
        every = self.checkpoints.policy.every_steps if self.checkpoints is not None else None
        if every:
            due = min(due, (self.step // every + 1) * every)
        return due

    def _clock(self, step: int) -> None:
        """The time since the last report, spread over the steps up to `step`."""
        now = time.perf_counter()
        if self._first_report is None:
            self._first_report = now
            # Until the first report: the framework's imports, model and data (not steps).
            self.timings.load = now - self._started - self.timings.checkpoint
        elif step > self.step:
            self.step_seconds.append((now - self._last_report) / (step - self.step))
        self._last_report = now

    def _take(self, step: int, loss: float | None, metrics: Mapping[str, float] | None) -> Reply:
        spec = self.spec
        self.step = step
        if loss is not None:
            self._loss(step, float(loss))
        if metrics:
            values = {name: float(value) for name, value in metrics.items()}
            if spec.metric.name not in values:
                raise MissingMetric(
                    f"step {step} reported metrics {sorted(values)}, without the plan's "
                    f"metric {spec.metric.name!r}"
                )
            self.evaluations.append({"step": float(step), **values})
            # The last evaluation decides accepted or rejected; the rule stops runs early.
            if step < self.end and self.stop is None:
                self.stop = quality_stop(
                    spec.stop_rules.quality,
                    values,
                    metric=spec.metric.name,
                    direction=spec.metric.direction,
                    threshold=spec.metric.threshold,
                    step=step,
                )
        if self.stop is not None:
            return Reply(checkpoint=False, stop=True)
        if TERMINATE.requested:  # preemption: commit this step (as the plan says) and stop
            self.interrupted_at = step
            section = spec.checkpoint
            save = self.checkpoints is not None and section is not None and section.on_terminate
            return Reply(checkpoint=save, stop=True)
        done = step >= self.end
        due = self._requested.is_set() or step == spec.until
        if self.checkpoints is not None and not due:
            due = self.checkpoints.due(step, self.train_seconds())
        if due:
            self._requested.clear()
        return Reply(checkpoint=due and self.checkpoints is not None, stop=done)

    def evaluation_starts(self) -> None:
        """The framework evaluates now, before the report carrying the metrics: an adapter
        that knows says so (`ablate probe` times evaluation apart from training; a run's
        timings do not split them, so this does nothing here)."""

    def late_losses(self, losses: Iterable[tuple[int, float]]) -> bool:
        """The training losses of steps already reported without one, in step order (an
        adapter that reads the device every few steps, not every step); whether a stop rule
        has fired (the non-finite rule names the step whose loss it was)."""
        for step, loss in losses:
            self._loss(step, float(loss))
        return self.stop is not None

    def _loss(self, step: int, loss: float) -> None:
        self.losses.append((step, loss))
        stop = non_finite_stop(self.spec.stop_rules.non_finite_loss, [loss], step, step)
        if stop is not None and self.stop is None:
            message = f"training loss is {loss} at step {step} (as reported)"
            self.stop = stop.model_copy(update={"message": message})

    def _backwards(self, step: int) -> str:
        if self.resumed_step and self.step == self.resumed_step:
            return (
                f"the run was resumed from step {self.resumed_step} but the training code "
                f"reported step {step}: it did not load the restored checkpoint (a resumed "
                "run never silently starts again)"
            )
        return f"step {step} reported after step {self.step}: steps must increase"

    def train_seconds(self) -> float:
        """Wall seconds since the first report, checkpoints excluded."""
        if self._first_report is None:
            return 0.0
        return time.perf_counter() - self._first_report - self._paused

    # -- predictions ----------------------------------------------------------------------

    def set_predictions(
        self,
        ids: Iterable[object],
        labels: Iterable[object],
        predicted: Iterable[object],
        seconds: float = 0.0,
    ) -> None:
        """The run's held-out predictions: one integer input id, label and predicted class per
        input (`WorkloadError` otherwise); `seconds` it took to make them (evaluation, not
        training time)."""
        given = dict(zip(PREDICTION_COLUMNS, (ids, labels, predicted), strict=True))
        named = {name: _integers(values, name) for name, values in given.items()}
        columns = list(named.values())
        if len({len(column) for column in columns}) != 1:
            sizes = ", ".join(f"{name} {len(column)}" for name, column in named.items())
            raise WorkloadError(f"predictions have columns of different lengths ({sizes})")
        if len(set(columns[0])) != len(columns[0]):
            raise WorkloadError("predictions name an input id twice: ids must be unique")
        self.predictions = Predictions(ids=columns[0], labels=columns[1], predicted=columns[2])
        self.timings.evaluate += seconds
        self._paused += seconds

    @property
    def predictions_due(self) -> bool:
        """Whether the adapter should make held-out predictions now: the run trained to its
        last step (not a pilot, not stopped by a rule or a SIGTERM) and exports its files."""
        spec = self.spec
        ended = self.stop is not None or self.interrupted_at is not None
        return (
            spec.out_dir is not None
            and spec.until is None
            and not ended
            and (self.step >= self.end)
        )

    def read_predictions(self, path: Path) -> None:
        """The predictions file a program wrote (CSV, header `input_id,label,predicted`)."""
        with path.open(newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, [])
            if header != list(PREDICTION_COLUMNS):
                raise WorkloadError(
                    f"predictions file header is {header}, expected {list(PREDICTION_COLUMNS)}"
                )
            rows = [row for row in reader if row]
        if any(len(row) != len(PREDICTION_COLUMNS) for row in rows):
            raise WorkloadError("predictions file has a row without exactly three values")
        ids, labels, predicted = ([row[i] for row in rows] for i in range(3))
        self.set_predictions(ids, labels, predicted)

    # -- the end --------------------------------------------------------------------------

    def close(self) -> CheckpointSummary:
        """Wait for the save in flight; what checkpointing did."""
        ended = time.perf_counter()
        if self._first_report is not None:
            self.timings.train = max(0.0, ended - self._first_report - self._paused)
        if self.checkpoints is None:
            return CheckpointSummary()
        closing = time.perf_counter()
        summary = self.checkpoints.close()
        self.timings.checkpoint += time.perf_counter() - closing
        return summary
