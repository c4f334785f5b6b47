"""The LoRA recipe's `make_trainer` as a test runs it, a tiny sequence classifier (whose
held-out predictions feed the error analysis), and a function that ignores ablate's
arguments. Test knobs in the environment: `TRAINED_LOG` (a folder: append each trained step
to `<lr>-<seed>.log`) and `STEP_SLEEP` (seconds per step, so a test can kill it mid-run)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

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


class Tokens(torch.utils.data.Dataset):
    """Sequences of 8 tokens out of 16; the class is the position of the largest of the first
    three (3 classes), one label per input."""

    def __init__(self, count: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.x = torch.randint(0, 16, (count, 8), generator=generator)
        self.y = self.x[:, :3].argmax(1)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.x[index], "labels": self.y[index]}


def make_classifier(params: dict[str, Any], args: dict[str, Any]) -> Trainer:
    config = BertConfig(
        vocab_size=16, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, num_labels=3,
    )  # fmt: skip
    training = TrainingArguments(
        **args,
        learning_rate=float(params.get("lr", 0.01)),
        per_device_train_batch_size=16,
        per_device_eval_batch_size=40,  # 64 held-out rows: two batches
    )
    return Trainer(
        model=BertForSequenceClassification(config),
        args=training,
        train_dataset=Tokens(256, seed=0),
        eval_dataset=Tokens(64, seed=1),
    )
