"""PyTorch Lightning as a workload: the plan's `workload.lightning`, in the slot's process.

    workload:
      lightning: {module: mypkg.model:Net, data: mypkg.data:Digits}

Per run, after `seed_everything(seed)`: `Net(**the run's parameters it takes)`, the same for
`Digits`, and one `lightning.Trainer` whose loop is Lightning's own. `AblateCallback` joins
that loop to the run's `Session`:

- each optimizer step is reported (`trainer.global_step`); its training loss (the `loss`
  `training_step` returned) is read from the device every `LOSS_SYNC_STEPS` steps (every step
  on CPU), so the GPU is not synchronised per step;
- validation runs every `eval_every` steps and at this process's last step; what
  `validation_step` logged (`trainer.callback_metrics`) is that step's evaluation. It runs on
  a fork of the random generators: the validation loader's seed (drawn from torch's global
  generator) and any random draw of `validation_step` leave training's stream as it was, so a
  pilot's extra validation at its last step changes nothing its main run then trains;
- a checkpoint asked for (tuned interval, a pilot's end, `Session.request_checkpoint`):
  `trainer.save_checkpoint`, committed to the store; a stop: `trainer.should_stop`;
- a resumed run: `trainer.fit(..., ckpt_path=<the restored checkpoint>)`;
- held-out predictions (optional, for the error analysis): when the data module has a
  `predict_dataloader`, one `trainer.predict` after the run's last step, each `predict_step`
  returning `{"input_id": ..., "label": ..., "predicted": ...}` for its batch.

`lightning` is imported here only (`pip install 'ablate[lightning]'`).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ablations.byo import load_attribute, run_environment
from ablations.byo.generators import random_state, set_random_state
from ablations.byo.session import LOSS_SYNC_STEPS, PREDICTION_COLUMNS, Session
from ablations.errors import WorkloadError
from ablations.plan.section import PLACEHOLDER, ParamValue
from ablations.plan.workload import LightningSection
from ablations.process.scratch import scratch_folder
from ablations.run.records import RunSpec

CHECKPOINT = "last.ckpt"
"""The file `trainer.save_checkpoint` writes in the folder committed to the store."""
OWNED = (
    "max_steps", "max_epochs", "val_check_interval", "check_val_every_n_epoch", "accelerator",
    "devices", "callbacks", "logger", "enable_checkpointing", "default_root_dir",
    "num_sanity_val_steps",
)  # fmt: skip
"""`Trainer` arguments ablate sets: the plan's `lightning.trainer` may not name them."""


def accepted(factory: Any, params: Mapping[str, ParamValue]) -> dict[str, ParamValue]:
    """The parameters `factory(...)` takes by name (all of them with `**kwargs`)."""
    signature = inspect.signature(factory)
    kinds = {p.kind for p in signature.parameters.values()}
    if inspect.Parameter.VAR_KEYWORD in kinds:
        return dict(params)
    return {k: v for k, v in params.items() if k in signature.parameters}


def trainer_arguments(section: LightningSection, params: Mapping[str, ParamValue]) -> dict:
    """The plan's extra `Trainer` arguments, a `"{name}"` value replaced by that parameter."""
    named = sorted(set(section.trainer) & set(OWNED))
    if named:
        raise WorkloadError(f"workload.lightning.trainer may not set {named}: ablate sets them")
    arguments: dict[str, Any] = {}
    for key, value in section.trainer.items():
        name = placeholder(value)
        arguments[key] = params[name] if name else value
    return arguments


def placeholder(value: ParamValue) -> str | None:
    """The parameter a `"{name}"` value stands for (None: a plain value)."""
    match = PLACEHOLDER.fullmatch(value) if isinstance(value, str) else None
    return match.group(1) if match else None


class AblateCallback:
    """The Lightning callback reporting to a `Session` and doing what it answers (module
    docstring). Built by `callback(session, folder, eval_every)`, which subclasses
    `lightning.pytorch.Callback` at call time so that importing this module needs no
    Lightning."""

    def __init__(self, session: Session, folder: Path, eval_every: int, sync_every: int):
        self.session, self.folder = session, folder
        self.eval_every, self.sync_every = eval_every, sync_every
        self.pending: list[tuple[int, torch.Tensor]] = []
        """(step, loss still on the device) not yet given to the session."""
        self.deferred: int | None = None
        """A step whose report waits for the validation that follows it."""
        self._parts: list[torch.Tensor] = []
        """Losses of the micro-batches of the optimizer step in progress."""
        self._training_rng: dict[str, Any] | None = None
        """The random generators as training left them, while a validation runs."""

    def state_dict(self) -> dict[str, Any]:
        """The random generators, saved in Lightning's checkpoint (Lightning keeps none): an
        epoch after a resume draws its shuffle from where the saved run stood."""
        return random_state()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        set_random_state(state)

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        trace = self.session.trace
        if trace is not None and self.session.resumed_step == trace.middle:
            self._trace_state(trainer, pl_module)  # as the resume restored it

    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.session.trace is not None:  # the restart check: which batch feeds which step
            self.session.trace.batch(trainer.global_step + 1, batch)

    def _trace_state(self, trainer: Any, pl_module: Any) -> None:
        assert self.session.trace is not None
        optimizers = [optimizer.state_dict() for optimizer in trainer.optimizers]
        self.session.trace.state(pl_module.state_dict(), optimizers)

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if isinstance(loss, torch.Tensor):
            self._parts.append(loss.detach().float())
        step = trainer.global_step
        if step <= max(self.session.step, self.deferred or 0):
            return  # a micro-batch of gradient accumulation: the step is not done
        if self.deferred is not None:  # its validation never came (no val_dataloader)
            self._report(trainer, self.deferred)
        if self._parts:
            self.pending.append((step, torch.stack(self._parts).mean()))
            self._parts = []
        if step % self.eval_every == 0 or step >= self.session.end:
            self.deferred = step  # Lightning validates now: report with its metrics
            trace = self.session.trace
            if trace is not None and step == trace.middle:
                self._trace_state(trainer, pl_module)  # as trained, before the validation
            self._training_rng = random_state()  # validation draws on a fork of them
            self.session.evaluation_starts()
            if step >= self.session.end:
                trainer.should_stop = True  # ...which Lightning does when told to stop
            return
        self._report(trainer, step)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self._training_rng is not None and not trainer.sanity_checking:
            set_random_state(self._training_rng)  # before a checkpoint saves them
            self._training_rng = None
        if trainer.sanity_checking or self.deferred is None:
            return  # e.g. the validation Lightning runs when a stop rule stopped it
        metrics = {
            name: float(value)
            for name, value in trainer.callback_metrics.items()
            if isinstance(value, (int, float)) or value.numel() == 1
        }
        self._report(trainer, self.deferred, metrics)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.deferred is not None:
            self._report(trainer, self.deferred)
        self._flush()

    def _report(self, trainer: Any, step: int, metrics: dict[str, float] | None = None) -> None:
        self.deferred = None
        reply = self.session.report(step, None, metrics)
        if reply.checkpoint or reply.stop or metrics or len(self.pending) >= self.sync_every:
            self._flush()  # a checkpoint never holds a loss the rules have not seen
        if self.session.stop is not None:
            trainer.should_stop = True
            return
        if reply.checkpoint:
            trainer.save_checkpoint(self.folder / CHECKPOINT, weights_only=False)  # whole state
            self.session.commit(step, self.folder)
        if reply.stop:
            trainer.should_stop = True

    def _flush(self) -> None:
        if not self.pending:
            return
        values = torch.stack([loss for _, loss in self.pending]).tolist()  # one sync
        self.session.late_losses(zip([step for step, _ in self.pending], values, strict=True))
        self.pending = []


def callback(session: Session, folder: Path, eval_every: int, sync_every: int) -> Any:
    """An `AblateCallback` that is a `lightning.pytorch.Callback`."""
    from lightning.pytorch import Callback

    kind = type("AblateLightningCallback", (AblateCallback, Callback), {})
    return kind(session, folder, eval_every, sync_every)


class LightningWorkload:
    """The entry a plan's `workload.lightning` stands for (`LIGHTNING_ENTRY`)."""

    frameworks = ("lightning",)
    """Recorded in the run's environment (`RunEnvironment.frameworks`) when loaded."""
    resume_fixes = {
        "nondeterministic": "seed every random source from the run's seed (ablate calls "
        "seed_everything(seed) before building your classes; a generator made in them must "
        "take its seed from torch, e.g. torch.Generator().manual_seed(torch.initial_seed())) "
        "and avoid non-deterministic kernels",
        "batches": "return a resumable loader from train_dataloader: "
        "ablations.byo.data.ResumableLoader(dataset, batch_size=..., shuffle=True) continues "
        "mid-epoch where the checkpoint left it (a plain DataLoader restarts its epoch with a "
        "fresh shuffle)",
        "state": "keep what training depends on in the module's parameters and buffers "
        "(register_buffer), or save it in on_save_checkpoint and restore it in "
        "on_load_checkpoint",
        "random": "give a torch.Generator of your own to the module and save its "
        "get_state() in on_save_checkpoint, set_state() in on_load_checkpoint (torch's, "
        "numpy's and Python's global generators are saved by ablate's callback)",
    }
    """The restart check's fix for each cause it finds (`ablations.byo.restart`)."""

    @classmethod
    def preflight(cls, spec: RunSpec) -> None:
        """Lightning and both classes import, and every parameter is taken (the campaign's
        preflight: a wrong name stops it before any run starts)."""
        cls._classes(spec)

    @classmethod
    def _classes(cls, spec: RunSpec) -> tuple[Any, Any, dict[str, Any]]:
        """The module class, the data module class and the extra Trainer arguments."""
        section = spec.workload.lightning
        if section is None:
            raise WorkloadError(f"run {spec.run_id} has no workload.lightning")
        try:
            import lightning.pytorch  # noqa: F401
        except ImportError as exc:
            raise WorkloadError(
                f"workload.lightning needs Lightning: pip install 'ablate[lightning]' ({exc})"
            ) from exc
        module_class, data_class = load_attribute(section.module), load_attribute(section.data)
        extra = trainer_arguments(section, spec.params)
        taken = {*accepted(module_class, spec.params), *accepted(data_class, spec.params)}
        taken |= {name for v in section.trainer.values() if (name := placeholder(v))}
        unused = sorted(set(spec.params) - taken)
        if unused:
            raise WorkloadError(
                f"parameters {unused} are taken by neither {section.module} nor {section.data} "
                "nor workload.lightning.trainer"
            )
        return module_class, data_class, extra

    @classmethod
    def run_external(cls, spec: RunSpec, session: Session) -> None:
        with run_environment(spec):  # ABLATE_PHASE, ABLATE_UNTIL... for the user's classes
            cls._train(spec, session)

    @classmethod
    def _train(cls, spec: RunSpec, session: Session) -> None:
        import lightning.pytorch as pl

        module_class, data_class, extra = cls._classes(spec)
        pl.seed_everything(spec.seed, workers=True, verbose=False)
        module = module_class(**accepted(module_class, spec.params))
        data = data_class(**accepted(data_class, spec.params))
        device = torch.device(spec.device)
        accumulate = int(extra.get("accumulate_grad_batches", 1))
        with scratch_folder(f"{spec.run_id[:40]}-") as scratch:
            folder, restored = Path(scratch, "checkpoint"), Path(scratch, "resume")
            folder.mkdir()
            step = session.restore(restored)
            sync = 1 if device.type == "cpu" else LOSS_SYNC_STEPS
            trainer = pl.Trainer(
                max_steps=spec.steps,  # the run's length (a pilot is stopped at its `until`)
                max_epochs=-1,
                val_check_interval=spec.workload.eval_every * accumulate,  # in batches, not steps
                check_val_every_n_epoch=None,  # count batches across epochs
                num_sanity_val_steps=0,
                accelerator="gpu" if device.type == "cuda" else "cpu",
                devices=[device.index or 0] if device.type == "cuda" else 1,
                callbacks=[callback(session, folder, spec.workload.eval_every, sync)],
                logger=False,
                enable_checkpointing=False,  # checkpoints are the session's to ask for
                enable_progress_bar=False,
                enable_model_summary=False,
                default_root_dir=str(scratch),
                **extra,
            )
            ckpt = str(restored / CHECKPOINT) if step else None
            trainer.fit(module, datamodule=data, ckpt_path=ckpt, weights_only=True)
            if session.predictions_due:
                predict(trainer, module, data, session)


def predict(trainer: Any, module: Any, data: Any, session: Session) -> None:
    """The held-out predictions, when the data module has a `predict_dataloader`: one
    `trainer.predict` pass, each `predict_step` returning its batch's `input_id`, `label` and
    `predicted` (integer tensors or lists), given to the session."""
    import lightning.pytorch as pl

    if _method(type(data), "predict_dataloader") is _method(
        pl.LightningDataModule, "predict_dataloader"
    ):
        return  # Lightning's own, which raises: the data module gives no held-out inputs
    started = time.perf_counter()
    batches = trainer.predict(module, datamodule=data)
    columns: dict[str, list[Any]] = {name: [] for name in PREDICTION_COLUMNS}
    for output in batches or []:
        if not isinstance(output, Mapping) or not set(PREDICTION_COLUMNS) <= set(output):
            raise WorkloadError(
                f"predict_step returned {type(output).__name__}: with a predict_dataloader, it "
                "must return {'input_id': ..., 'label': ..., 'predicted': ...} for its batch "
                "(integer tensors), the held-out predictions of the error analysis"
            )
        for name in PREDICTION_COLUMNS:
            columns[name] += torch.as_tensor(output[name]).reshape(-1).tolist()
    ids, labels, predicted = (columns[name] for name in PREDICTION_COLUMNS)
    session.set_predictions(ids, labels, predicted, seconds=time.perf_counter() - started)


def _method(kind: type, name: str) -> Any:
    return inspect.getattr_static(kind, name, None)
