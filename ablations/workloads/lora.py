"""LoRA fine-tuning with the Hugging Face `Trainer`: the `lora.yaml` recipe's `make_trainer`.

A small Llama-shaped causal language model built from a config (no download: on a real card
load your own model and tokenizer instead), LoRA adapters (peft) on its attention projections,
fine-tuned on the bytes of the built-in corpus (`ablations.workloads.corpus`: Python source
shipped with the package, the same on every machine; the 256 byte values are the vocabulary, so
no tokenizer is needed). The byte embeddings and the output head train fully
(`modules_to_save`), as a new vocabulary's must; everything else is frozen. Parameters:
`lora_rank`, `precision` (`fp32` or `bf16`), `lr`, `max_seq_len`, `batch_size`, `corpus_bytes`.
The metric is the Trainer's `eval_loss` (nats per byte).
"""

from __future__ import annotations

from typing import Any

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

from ablations.workloads.corpus import load_corpus

EVAL_WINDOWS = 32
"""Held-out windows evaluated: a fixed slice, the same for every run and level."""


class Windows(torch.utils.data.Dataset):
    """Non-overlapping windows of `length` bytes from the files joined by a NUL byte."""

    def __init__(self, files: list[tuple[str, bytes]], length: int, limit: int = 0) -> None:
        data = torch.frombuffer(bytearray(b"\0".join(data for _, data in files)), dtype=torch.uint8)
        count = len(data) // length if not limit else min(limit, len(data) // length)
        self.windows = data[: count * length].long().view(count, length)

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        window = self.windows[index]
        return {"input_ids": window, "labels": window}  # the model shifts labels itself


def make_trainer(params: dict[str, Any], args: dict[str, Any]) -> Trainer:
    """The run's Trainer: `params` are its factor levels, `args` ablate's TrainingArguments."""
    seq_len = int(params.get("max_seq_len", 64))
    corpus = load_corpus(int(params.get("corpus_bytes", 400_000)))
    config = LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
    )  # fmt: skip
    rank = int(params.get("lora_rank", 8))
    lora = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,  # the usual alpha = 2r keeps the update's scale across ranks
        target_modules=["q_proj", "v_proj"],
        modules_to_save=["embed_tokens", "lm_head"],
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(LlamaForCausalLM(config), lora)
    bf16 = params.get("precision", "fp32") == "bf16"
    training = TrainingArguments(
        **args,
        learning_rate=float(params.get("lr", 3e-3)),
        per_device_train_batch_size=int(params.get("batch_size", 8)),
        per_device_eval_batch_size=EVAL_WINDOWS,
        bf16=bf16,  # autocast; on a CPU without bf16 support torch emulates it (slower)
        lr_scheduler_type="constant",
        logging_steps=50,
    )
    return Trainer(
        model=model,
        args=training,
        train_dataset=Windows(corpus.train, seq_len),
        eval_dataset=Windows(corpus.heldout, 64, limit=EVAL_WINDOWS),  # fixed across levels
    )
