"""A Hugging Face `Trainer` as a workload: the plan's `workload.hf_trainer`, in the slot's process.

    workload:
      hf_trainer: mypkg.finetune:make_trainer     # make_trainer(params, args) -> Trainer

Per run, after `set_seed(seed)`: `make_trainer(the run's parameters, args)`, where `args` are
the `TrainingArguments` keywords ablate owns (`owned_arguments`); the function passes them on
with its own (`TrainingArguments(**args, learning_rate=params["lr"])`). `AblateTrainerCallback`
joins the Trainer's loop to the run's `Session`:

- each optimizer step is reported (`state.global_step`) with the loss `training_step`
  returned, read from the device every `LOSS_SYNC_STEPS` steps (every step on CPU);
- evaluation runs every `eval_every` steps and at this process's last step; `on_evaluate`'s
  metrics (HF names them `eval_loss`, `eval_<your metric>`) are that step's evaluation. It
  runs on a fork of the random generators (the evaluation loader's seed is drawn from torch's
  global one): training's stream is left as it was, so a pilot's extra evaluation at its last
  step changes nothing its main run then trains;
- a checkpoint asked for: `control.should_save`, so the Trainer writes its own
  `checkpoint-N` folder (weights or adapter, optimizer, scheduler, RNG, trainer state), which
  is committed to the store; a stop: `control.should_training_stop`;
- a resumed run: `trainer.train(resume_from_checkpoint=<the restored checkpoint-N>)`;
- held-out predictions (for the error analysis), when the `eval_dataset` holds one class label
  per input (its label column a number, as for sequence classification): one
  `trainer.predict(eval_dataset)` after the run's last step, `argmax` of the logits against
  the labels, input ids being the rows' positions (a token-level or unlabelled set: none).

`transformers` is imported here only (`pip install 'ablate[hf]'`).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ablations.byo import load_attribute, run_environment
from ablations.byo.generators import random_state, set_random_state
from ablations.byo.session import LOSS_SYNC_STEPS, Session
from ablations.errors import WorkloadError
from ablations.process.scratch import scratch_folder
from ablations.run.records import RunSpec

BOOKKEEPING = {"eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "epoch"}
"""What `on_evaluate`'s metrics carry besides metrics: not kept as the step's evaluation."""


def owned_arguments(spec: RunSpec, output_dir: Path) -> dict[str, Any]:
    """The `TrainingArguments` keywords ablate sets for a run."""
    return {
        "output_dir": str(output_dir),
        "max_steps": spec.steps,  # the run's length (a pilot is stopped at its `until`)
        "seed": spec.seed,
        "eval_strategy": "steps",
        "eval_steps": spec.workload.eval_every,
        "save_strategy": "no",  # the session asks for saves (tuned interval), not a schedule
        "use_cpu": torch.device(spec.device).type == "cpu",
        "report_to": "none",
        "disable_tqdm": True,
    }


class AblateCallback:
    """The `TrainerCallback` reporting to a `Session` and doing what it answers (module
    docstring). Built by `callback(...)`, which subclasses `transformers.TrainerCallback` at
    call time so that importing this module needs no transformers."""

    def __init__(self, session: Session, eval_every: int, sync_every: int) -> None:
        self.session, self.eval_every, self.sync_every = session, eval_every, sync_every
        self.parts: list[torch.Tensor] = []
        """Losses `training_step` returned since the last optimizer step (micro-batches)."""
        self.pending: list[tuple[int, torch.Tensor]] = []
        """(step, loss still on the device) not yet given to the session."""
        self.deferred: int | None = None
        """A step whose report waits for the evaluation that follows it."""
        self.training_rng: dict[str, Any] | None = None
        """The random generators as training left them, while an evaluation runs."""

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        trace = self.session.trace
        if trace is not None and self.session.resumed_step == trace.middle:
            trace.state(kwargs["model"].state_dict(), kwargs["optimizer"].state_dict())

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step = state.global_step
        if self.parts:  # HF's training_step divides by the accumulation: the sum is the mean
            self.pending.append((step, torch.stack(self.parts).sum()))
            self.parts = []
        trace = self.session.trace
        if trace is not None and step == trace.middle:  # the restart check: as trained
            trace.state(kwargs["model"].state_dict(), kwargs["optimizer"].state_dict())
        if step % self.eval_every == 0 or step >= self.session.end:
            control.should_evaluate = True  # report with the metrics, in on_evaluate
            self.training_rng = random_state()  # the evaluation draws on a fork of them
            self.deferred = step
            self.session.evaluation_starts()
            if step >= self.session.end:
                control.should_training_stop = True
            return
        self._report(control, step)

    def on_evaluate(
        self, args: Any, state: Any, control: Any, metrics: dict[str, Any], **kwargs: Any
    ) -> None:
        if self.training_rng is not None:  # before the Trainer saves them with a checkpoint
            set_random_state(self.training_rng)
            self.training_rng = None
        if self.deferred is None:
            return  # an evaluation the user's own code ran
        values = {
            name: float(value)
            for name, value in metrics.items()
            if isinstance(value, (int, float)) and name not in BOOKKEEPING
        }
        self._report(control, self.deferred, values)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = Path(args.output_dir, f"checkpoint-{state.global_step}")
        self.session.commit(state.global_step, folder)
        shutil.rmtree(folder)  # packed into the commit: the disk holds one at a time

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.deferred is not None:
            self._report(control, self.deferred)
        self._flush()

    def _report(self, control: Any, step: int, metrics: dict[str, float] | None = None) -> None:
        self.deferred = None
        reply = self.session.report(step, None, metrics)
        if reply.checkpoint or reply.stop or metrics or len(self.pending) >= self.sync_every:
            self._flush()  # a checkpoint never holds a loss the rules have not seen
        if self.session.stop is not None:
            control.should_training_stop = True
            return
        if reply.checkpoint:
            control.should_save = True  # the Trainer writes checkpoint-N, then on_save
        if reply.stop:
            control.should_training_stop = True

    def _flush(self) -> None:
        if not self.pending:
            return
        values = torch.stack([loss for _, loss in self.pending]).tolist()  # one sync
        self.session.late_losses(zip([step for step, _ in self.pending], values, strict=True))
        self.pending = []


def callback(session: Session, eval_every: int, sync_every: int) -> Any:
    """An `AblateCallback` that is a `transformers.TrainerCallback`."""
    from transformers import TrainerCallback

    kind = type("AblateTrainerCallback", (AblateCallback, TrainerCallback), {})
    return kind(session, eval_every, sync_every)


class TrainerWorkload:
    """The entry a plan's `workload.hf_trainer` stands for (`HF_TRAINER_ENTRY`)."""

    frameworks = ("transformers", "peft", "accelerate")
    """Recorded in the run's environment (`RunEnvironment.frameworks`) when loaded."""
    resume_fixes = {
        "nondeterministic": "build everything random in make_trainer from the seed ablate "
        "set (set_seed(seed) runs before it; a generator of your own must take its seed "
        "from torch) and avoid non-deterministic kernels",
        "batches": "let the Trainer skip the trained batches: keep "
        "TrainingArguments.ignore_data_skip off, and give a train_dataset and collator that "
        "draw at random only from torch's global generator",
        "state": "keep what training depends on in the model's state_dict (a PEFT model "
        "saves only its adapter: what trains must be in it)",
        "random": "draw at random only from torch's, numpy's and Python's global generators "
        "(the Trainer saves those): a torch.Generator of your own in the model or the "
        "collator is not in its checkpoint",
    }
    """The restart check's fix for each cause it finds (`ablations.byo.restart`)."""

    @classmethod
    def preflight(cls, spec: RunSpec) -> None:
        """transformers and the function import (the campaign's preflight: a wrong name
        stops it before any run starts)."""
        cls._function(spec)

    @classmethod
    def _function(cls, spec: RunSpec) -> Any:
        if spec.workload.hf_trainer is None:
            raise WorkloadError(f"run {spec.run_id} has no workload.hf_trainer")
        try:
            import transformers  # noqa: F401
        except ImportError as exc:
            raise WorkloadError(
                f"workload.hf_trainer needs transformers: pip install 'ablate[hf]' ({exc})"
            ) from exc
        return load_attribute(spec.workload.hf_trainer)

    @classmethod
    def run_external(cls, spec: RunSpec, session: Session) -> None:
        with run_environment(spec):  # ABLATE_PHASE, ABLATE_UNTIL... for make_trainer's code
            cls._train(spec, session)

    @classmethod
    def _train(cls, spec: RunSpec, session: Session) -> None:
        from transformers import set_seed

        make_trainer = cls._function(spec)
        device = torch.device(spec.device)
        if device.type == "cuda" and torch.cuda.device_count() > 1:
            raise WorkloadError(
                "the Trainer would spread over every visible card: run it in a slot, which "
                "shows it one (CUDA_VISIBLE_DEVICES)"
            )
        with scratch_folder(f"{spec.run_id[:40]}-") as scratch:
            restored = Path(scratch, "resume")
            step = session.restore(restored)
            owned = owned_arguments(spec, Path(scratch, "output"))
            set_seed(spec.seed)  # the model the function builds is the seed's
            trainer = make_trainer(dict(spec.params), dict(owned))
            _check_arguments(trainer.args, owned, str(spec.workload.hf_trainer))
            sync = 1 if device.type == "cpu" else LOSS_SYNC_STEPS
            hook = callback(session, spec.workload.eval_every, sync)
            trainer.add_callback(hook)
            step_of = trainer.training_step

            # The Trainer syncs its own loss only when it logs; this sees each step's on the
            # device, so the non-finite rule needs no `logging_steps=1`.
            def training_step(*args: Any, **kwargs: Any) -> torch.Tensor:
                if session.trace is not None:  # the restart check: which batch, which step
                    inputs = args[1] if len(args) > 1 else kwargs.get("inputs")
                    session.trace.batch(trainer.state.global_step + 1, inputs)
                loss = step_of(*args, **kwargs)
                hook.parts.append(loss.detach().float())
                return loss

            trainer.training_step = training_step
            trainer.train(resume_from_checkpoint=str(restored) if step else None)
            if session.predictions_due:
                predict(trainer, session)


def labelled_per_input(trainer: Any) -> bool:
    """Whether the Trainer's `eval_dataset` has one class label per input: its first row's
    one label column holds a single number (a sequence classifier's), not a sequence."""
    dataset = trainer.eval_dataset
    names = getattr(trainer, "label_names", None) or trainer.args.label_names or ["labels"]
    if dataset is None or isinstance(dataset, Mapping) or len(names) != 1:
        return False
    try:
        first = dataset[0]
    except Exception:  # an iterable dataset, or one that cannot index: no predictions
        return False
    label = first.get(names[0]) if isinstance(first, Mapping) else None
    if isinstance(label, bool) or label is None:
        return False
    try:
        return torch.as_tensor(label).ndim == 0 and not torch.as_tensor(label).is_floating_point()
    except (TypeError, ValueError, RuntimeError):
        return False


def predict(trainer: Any, session: Session) -> None:
    """The held-out predictions of a Trainer whose `eval_dataset` is labelled per input:
    `trainer.predict`, the argmax of the logits, given to the session."""
    if not labelled_per_input(trainer):
        return
    started = time.perf_counter()
    output = trainer.predict(trainer.eval_dataset)
    logits = output.predictions
    if isinstance(logits, tuple):  # a model returning more than logits: they come first
        logits = logits[0]
    if logits is None or output.label_ids is None:  # e.g. `prediction_loss_only`
        return
    logits, labels = np.asarray(logits), np.asarray(output.label_ids)
    predicted = logits.argmax(-1) if logits.ndim == labels.ndim + 1 else logits
    if labels.ndim != 1 or predicted.shape != labels.shape:
        raise WorkloadError(
            f"trainer.predict gave predictions of shape {logits.shape} for labels of shape "
            f"{labels.shape}: expected one row of logits per labelled input"
        )
    ids = range(len(labels))  # the eval_dataset's rows, in order (its sampler is sequential)
    session.set_predictions(ids, labels, predicted, seconds=time.perf_counter() - started)


def _check_arguments(args: Any, owned: dict[str, Any], entry: str) -> None:
    """The Trainer runs with ablate's arguments (a function that built its own would train
    for the wrong number of steps or never save)."""
    for key in ("max_steps", "seed", "eval_steps", "save_strategy", "output_dir"):
        value = getattr(args, key)
        value = getattr(value, "value", value)  # an enum's string
        if value != owned[key]:
            raise WorkloadError(
                f"{entry} built a Trainer whose TrainingArguments.{key} is {value!r}, not "
                f"{owned[key]!r}: pass ablate's arguments on, TrainingArguments(**args, ...)"
            )
