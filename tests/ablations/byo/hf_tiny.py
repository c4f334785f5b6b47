"""The LoRA recipe's `make_trainer` as a test runs it, plus a function that ignores ablate's
arguments. Test knobs in the environment: `TRAINED_LOG` (a folder: append each trained step
to `<lr>-<seed>.log`) and `STEP_SLEEP` (seconds per step, so a test can kill it mid-run)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from transformers import Trainer, TrainerCallback, TrainingArguments

from ablations.workloads import lora


class Trained(TrainerCallback):
    def __init__(self, name: str) -> None:
        self.name = name

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        log = os.environ.get("TRAINED_LOG")
        if log:
            with Path(log, self.name).open("a") as handle:
                handle.write(f"{state.global_step}\n")
        time.sleep(float(os.environ.get("STEP_SLEEP", 0)))


def make_trainer(params: dict[str, Any], args: dict[str, Any]) -> Trainer:
    trainer = lora.make_trainer({"corpus_bytes": 120_000, **params}, args)
    trainer.add_callback(Trained(f"{params['lr']}-{args['seed']}.log"))
    return trainer


def ignores_arguments(params: dict[str, Any], args: dict[str, Any]) -> Trainer:
    own = TrainingArguments(output_dir=args["output_dir"], max_steps=5, use_cpu=True)
    return Trainer(model=lora.make_trainer(params, args).model, args=own)
