"""The training driver: one run spec, run to completion or to a registered stop.

    record = execute(spec)          # execute(spec, hook) checkpoints and resumes

In order: seed every RNG, build the workload on the device (refused when its data digest is not
the plan's registered `data_sha256`), check the input report (truncation), run the restart
check if one is given, resume from a checkpoint, then train step by step, evaluating every
`eval_every` steps and at the last step. A pilot (`spec.until`) is the prefix of its main run:
built with the run's `steps`, it trains to `until`, commits a checkpoint there (before any
evaluation the uninterrupted run would not make, so the main run resumes bitwise from it) and
evaluates there: that evaluation is what the gate reads.

The loop never waits for the device in its hot path: losses stay there and are copied to the
host a window at a time without blocking (`losses.py`); the loop waits only where it must have
them all (an evaluation, a checkpoint, the end of a segment: `RunLoop.flush`). Whatever the run
does, the caller gets a `RunRecord`; a run that raises is `failed`, never an exception out of
`execute`.

`open_run` and `RunLoop.advance(until)` are the pieces `execute` is made of; a restart check
drives two loops with them (advance, save, advance; resume, advance) and compares the losses.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ablations.errors import (
    DataError,
    Interrupted,
    NoUsableRestart,
    WorkloadError,
)
from ablations.process.preemption import TERMINATE
from ablations.run.causes import cause_of_own_write
from ablations.run.hooks import CheckpointHook, RunHistory
from ablations.run.records import (
    CheckpointSummary,
    RunEnvironment,
    RunError,
    RunRecord,
    RunSpec,
    Stop,
    Timings,
    rejection_of,
)
from ablations.run.workload import (
    Evaluation,
    Workload,
    data_digest,
    data_digest_problem,
    load_workload,
)
from ablations.training.losses import LossReadback
from ablations.training.memory import PhaseMemory
from ablations.training.outcome import interrupted_error, run_status
from ablations.training.run_files import write_run_files
from ablations.training.stop_rules import (
    non_finite_stop,
    quality_stop,
    truncation_stop,
)

RestartCheck = Callable[[RunSpec], Stop | None]
"""Returns a `restart` stop when the run's checkpoints cannot be reloaded exactly."""


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global RNGs (`manual_seed` covers every CUDA device)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class RunLoop:
    """One run in progress: its workload, what it has recorded and how many steps are done."""

    def __init__(
        self,
        spec: RunSpec,
        workload: Workload,
        device: torch.device,
        hook: CheckpointHook | None = None,
        timings: Timings | None = None,
        memory: PhaseMemory | None = None,
    ) -> None:
        self.spec, self.workload, self.device, self.hook = spec, workload, device, hook
        self.timings = timings if timings is not None else Timings()
        self.memory = memory if memory is not None else PhaseMemory(device)
        self.history = RunHistory()
        self.step = 0
        # The last step this loop trains: a pilot's `until`, else the run's last step.
        self.end = spec.until if spec.until is not None else spec.steps
        self.last_evaluation: Evaluation | None = None
        self.evaluated_at: int | None = None
        rule = spec.stop_rules.non_finite_loss
        # Losses stay on the device and are sent to the host a window at a time, every
        # `check_every` steps (at the evaluation cadence when the rule is off), without waiting
        # for the device (`losses.py`): `.item()` per step, or even a blocking read per window,
        # empties a GPU's launch queue. A NaN is seen once its window has arrived, up to
        # `check_every - 1` steps late plus the device's lag; the stop names the exact step.
        self.losses = LossReadback()
        self.flush_every = rule.check_every if rule.enabled else spec.workload.eval_every
        self._segment_start: float | None = None
        self._window_start = 0.0
        self.interruptible = False
        """Whether a SIGTERM (`TERMINATE`) ends this loop at the next step boundary, with a
        checkpoint there: a run's loop is (`execute`); a preflight's restart check is not."""

    def prepare(self, restart_check: RestartCheck | None = None) -> Stop | None:
        """Before the first step: truncation rule, restart check, then resume (if hooked)."""
        rules = self.spec.stop_rules
        stop = truncation_stop(rules.truncation, self.workload.input_report(), self.step)
        if stop is None and rules.restart.enabled and restart_check is not None:
            started = time.perf_counter()
            stop = restart_check(self.spec)
            self.timings.checkpoint += time.perf_counter() - started
        if stop is None and self.hook is not None:
            started = time.perf_counter()
            self.step = self.hook.resume(self.workload, self.history)
            self.timings.checkpoint += time.perf_counter() - started
            stop = self._quality_at_resume()
        return stop

    def _quality_at_resume(self) -> Stop | None:
        """The quality rule on an evaluation made at the resumed step: a pilot ends without
        applying it (its last evaluation decides accepted or rejected), so its main run applies
        it as the run trained straight through would have. Any other resumed evaluation passed
        the rule before its checkpoint was saved, and passes again."""
        done = self.history.evaluations
        if not done or int(done[-1]["step"]) != self.step or self.step >= self.end:
            return None
        spec = self.spec
        return quality_stop(
            spec.stop_rules.quality,
            {k: v for k, v in done[-1].items() if k != "step"},
            metric=spec.metric.name,
            direction=spec.metric.direction,
            threshold=spec.metric.threshold,
            step=self.step,
        )

    def advance(self, until: int) -> Stop | None:
        """Train until `until` steps are done (capped at `end`); the stop if a rule fired."""
        spec, hook, workload, losses = self.spec, self.hook, self.workload, self.losses
        until = min(until, self.end)
        # Read once per step: a plain attribute a signal handler sets (no syscall, no sync).
        terminate = TERMINATE if self.interruptible else None
        eval_every, last, flush_every = spec.workload.eval_every, spec.steps, self.flush_every
        self._begin_segment()
        try:
            while self.step < until:
                step = self.step + 1
                losses.add(step, workload.train_step(step))
                self.step = step
                evaluate = step % eval_every == 0 or step == last
                save = hook is not None and (
                    hook.due(step, self.train_seconds()) or step == spec.until
                )
                stop = None
                if evaluate or save or step == until:
                    stop = self.flush()  # every loss on the host: the one wait
                elif step % flush_every == 0:
                    losses.send()
                    stop = self._receive(wait=False)
                elif losses.in_flight:
                    stop = self._receive(wait=False)
                if stop is not None:
                    return stop
                if evaluate:
                    stop = self._evaluate(step)
                    if stop is not None:
                        return stop
                if save:
                    self._save(step)
                if terminate is not None and terminate.requested:
                    return self._interrupt(step, saved=save)
        finally:
            self._end_segment()
        return None

    def _interrupt(self, step: int, *, saved: bool) -> Stop | None:
        """Asked to terminate: commit this step (unless just saved, or the plan says not to)
        and raise `Interrupted`; a rule firing on the last window's losses stops it instead."""
        stop = self.flush()
        if stop is not None:
            return stop
        section = self.spec.checkpoint
        save = self.hook is not None and section is not None and section.on_terminate
        if save and not saved:
            self._save(step)
        raise Interrupted(step, saved=save)

    def flush(self) -> Stop | None:
        """Wait for every loss (one device sync), record them and check them."""
        return self._receive(wait=True)

    def _receive(self, wait: bool) -> Stop | None:
        """Record the windows that have arrived (all of them, waiting, with `wait`) and check
        them; a non-finite loss stops the run, with every loss trained so far recorded."""
        windows = self.losses.drain() if wait else self.losses.arrived()
        if not windows:
            return None
        rule = self.spec.stop_rules.non_finite_loss
        stop: Stop | None = None
        for first, values in windows:
            self.history.losses.extend(values)
            stop = stop or non_finite_stop(rule, values, first, self.step)
        now = time.perf_counter()
        # Per-step time over what arrived, measured on arrival so a GPU's queued work counts.
        received = sum(len(values) for _, values in windows)
        self.history.step_seconds.append((now - self._window_start) / received)
        self._window_start = now
        if stop is not None and not wait:
            self._receive(wait=True)  # the steps trained since: recorded, never checked again
        return stop

    def train_seconds(self) -> float:
        """Wall seconds spent training so far (evaluation and checkpoints excluded)."""
        running = 0.0 if self._segment_start is None else time.perf_counter() - self._segment_start
        return self.timings.train + running

    def evaluate_final(self) -> None:
        """Evaluate at the last step trained when the loop did not: a resumed run with nothing
        left to train (for predictions), or a pilot ending between two evaluations."""
        done = self.history.evaluations
        self._evaluate(self.step, record=not done or done[-1]["step"] != self.step)
        self._end_segment()

    def _evaluate(self, step: int, record: bool = True) -> Stop | None:
        spec = self.spec
        self._end_segment()
        self.memory.start()
        started = time.perf_counter()
        evaluation = self.workload.evaluate()
        self.timings.evaluate += time.perf_counter() - started
        self.memory.stop("evaluate")
        metrics = {name: float(value) for name, value in evaluation.metrics.items()}
        if spec.metric.name not in metrics:
            raise WorkloadError(
                f"evaluate() returned {sorted(metrics)}, without the plan's metric "
                f"{spec.metric.name!r}"
            )
        self.last_evaluation = evaluation
        self.evaluated_at = step
        if record:
            self.history.evaluations.append({"step": float(step), **metrics})
        # The last evaluation decides accepted or rejected; the rule exists to stop runs early.
        if step < self.end:
            stop = quality_stop(
                spec.stop_rules.quality,
                metrics,
                metric=spec.metric.name,
                direction=spec.metric.direction,
                threshold=spec.metric.threshold,
                step=step,
            )
            if stop is not None:
                return stop
        self._begin_segment()
        return None

    def _save(self, step: int) -> None:
        assert self.hook is not None
        self._end_segment()
        started = time.perf_counter()
        self.hook.save(step, self.workload, self.history)
        self.timings.checkpoint += time.perf_counter() - started
        self._begin_segment()

    def _begin_segment(self) -> None:
        self.memory.start()
        self._segment_start = self._window_start = time.perf_counter()

    def _end_segment(self) -> None:
        if self._segment_start is not None:
            self.timings.train += time.perf_counter() - self._segment_start
            self._segment_start = None
            self.memory.stop("train")


def open_run(
    spec: RunSpec,
    hook: CheckpointHook | None = None,
    *,
    timings: Timings | None = None,
    memory: PhaseMemory | None = None,
) -> RunLoop:
    """Seed every RNG and build the workload on the spec's device: a loop at step 0."""
    device = torch.device(spec.device)
    timings = timings if timings is not None else Timings()
    memory = memory if memory is not None else PhaseMemory(device)
    started = time.perf_counter()
    # `PhaseMemory(device)` initialised CUDA there and made it the current card (`init_cuda`).
    memory.start()
    factory = load_workload(spec.workload.entry)
    seed_everything(spec.seed)
    workload = factory.build(spec.params, seed=spec.seed, device=device, steps=spec.steps)
    refused = data_digest_problem(workload, spec.workload.data_sha256)
    if refused is not None:  # the data check passed elsewhere: this machine has other bytes
        raise DataError(str(refused))
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # once: the copies to the device count as loading
    memory.stop("build")
    timings.load += time.perf_counter() - started
    return RunLoop(spec, workload, device, hook, timings, memory)


def execute(
    spec: RunSpec, hook: CheckpointHook | None = None, *, restart_check: RestartCheck | None = None
) -> RunRecord:
    """Run one spec to completion or stop and return its record; never raises for the run."""
    started_at = time.time()
    device = torch.device(spec.device)
    timings, memory = Timings(), PhaseMemory(device)
    loop: RunLoop | None = None
    stop: Stop | None = None
    error: RunError | None = None
    summary = CheckpointSummary()
    interrupted: Interrupted | None = None
    try:
        loop = open_run(spec, hook, timings=timings, memory=memory)
        loop.interruptible = True
        stop = loop.prepare(restart_check)
        if stop is None:
            stop = loop.advance(loop.end)
        if stop is None and loop.evaluated_at != loop.step:
            loop.evaluate_final()
    except NoUsableRestart as exc:
        stop = Stop(rule="restart", step=exc.step, message=exc.message)
    except Interrupted as exc:
        interrupted = exc
    except Exception as exc:  # a bug or out of memory fails this run, never the caller
        error = _error(exc)
        _record_pending(loop)
    if hook is not None:
        closing = time.perf_counter()
        try:
            summary = hook.close()
        except Exception as exc:  # the store's, not the workload's
            error = error or RunError.of(exc, cause=cause_of_own_write(exc))
        timings.checkpoint += time.perf_counter() - closing
    if interrupted is not None:  # after close: the save at its step is committed, or not
        error = error or interrupted_error(interrupted, summary)
    history = loop.history if loop is not None else RunHistory()
    metrics = dict(history.evaluations[-1]) if history.evaluations else {}
    metrics.pop("step", None)
    artifacts: dict[str, str] = {}
    # An interrupted run is not finished: its rerun exports (and the grace period is short).
    if spec.out_dir is not None and loop is not None and interrupted is None:
        exporting = time.perf_counter()
        # Only an accepted run's weights are a result worth keeping beside the report.
        keep_model = run_status(spec, stop, error, metrics) == "accepted"
        try:
            last = loop.last_evaluation
            artifacts = write_run_files(
                Path(spec.out_dir),
                spec.run_id,
                loop.history,
                last.predictions if last else None,
                loop.workload.model if keep_model else None,
            )
        except Exception as exc:  # a full disk is the machine's; bad predictions the workload's
            error = error or RunError.of(exc, cause=cause_of_own_write(exc))
        timings.export += time.perf_counter() - exporting
    record = RunRecord(
        run_id=spec.run_id,
        variant=spec.variant,
        seed=spec.seed,
        category=spec.category,
        phase=spec.phase,
        status=run_status(spec, stop, error, metrics),
        stop=stop,
        error=error,
        rejection=None if stop or error else rejection_of(spec, metrics, loop.step if loop else 0),
        steps_done=loop.step if loop is not None else 0,
        metrics=metrics,
        evaluations=history.evaluations,
        timings=timings,
        step_seconds=statistics.median(history.step_seconds) if history.step_seconds else None,
        memory=memory.peaks,
        device=_device_of(loop) if loop is not None else str(device),
        environment=_environment(device, loop.workload if loop is not None else None),
        started_at=started_at,
        ended_at=time.time(),
        checkpoint=summary,
        artifacts=artifacts,
    )
    del loop  # the workload's tensors; give a card's cache back before the slot's next run
    if device.type == "cuda" and torch.cuda.is_available():
        torch.cuda.empty_cache()
    return record


def _error(exc: BaseException) -> RunError:
    return RunError.of(exc)


def _record_pending(loop: RunLoop | None) -> None:
    """Keep the losses of a failed run's last window when the device can still give them."""
    if loop is None:
        return
    try:
        loop.flush()
    except Exception:  # after a CUDA fault nothing can be read back; the error says why
        loop.losses.discard()


def _environment(device: torch.device, workload: Workload | None = None) -> RunEnvironment:
    cuda = device.type == "cuda" and torch.cuda.is_available()
    data = data_digest(workload)  # optional: see ablations.run.workload
    return RunEnvironment(
        torch=torch.__version__,
        cuda=torch.version.cuda,
        device_name=torch.cuda.get_device_name(device) if cuda else device.type,
        data_sha256=data,
    )


def _device_of(loop: RunLoop) -> str:
    """The device the model's parameters are on (what the run really used)."""
    parameter = next(iter(loop.workload.model.parameters()), None)
    return str(parameter.device if parameter is not None else loop.device)
