"""The second built-in workload: a small decoder-only transformer language model on bytes.

The text is the built-in corpus (`ablations.workloads.corpus`): Python source shipped with
the package, the same bytes on every machine, whole files in a fixed order until
`corpus_bytes` (2 MB by default, so a CPU run stays fast) would be exceeded. The selection's
sha256 is part of the run environment (`RunEnvironment.data_sha256`) and may be registered in
the plan (`workload.data_sha256`): the data check then refuses other bytes.

- vocabulary: the 256 byte values; metrics `val_loss` (nats per byte, minimize) and
  `bits_per_byte` (the same in bits);
- held-out split by file, fixed by the file's content digest (never the run's seed): about
  one file in ten; no file, and no identical copy of one, is on both sides (`check_data`);
- training batches: windows of `seq_len + 1` bytes cut at fixed offsets from the training files
  joined by a NUL byte, in an order a CPU generator shuffles once per epoch. The generator, the
  permutation and the cursor are the workload's state, so a checkpoint resumes mid-epoch;
- input groups by sequence length (`probe_groups`): `ablate probe` sizes the card for windows
  of a quarter, half and all of `block_size`;
- truncation: `max_file_bytes` > 0 cuts longer files (reported per split, so the driver's
  truncation rule sees held-out files that lost their ends).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ablations.plan.section import ParamLimits, ParamValue, outside_limits
from ablations.run.workload import DataProblem, Evaluation, InputGroup, InputReport
from ablations.workloads.corpus import CORPUS_BYTES, load_corpus
from ablations.workloads.epoch_order import EpochOrder

SEPARATOR = 0
"""The byte joining files in a split's stream (source files never contain NUL)."""

DEFAULTS: dict[str, ParamValue] = {
    "n_layer": 2,
    "n_embd": 64,
    "n_head": 4,
    "block_size": 64,  # the model's context, in bytes
    "seq_len": 0,  # training window length; 0: block_size (the probe's groups set it)
    "dropout": 0.0,
    "lr": 3e-3,  # AdamW
    "weight_decay": 0.0,
    "batch_size": 16,
    "precision": "fp32",  # or "bf16": autocast where the device supports it
    "corpus_bytes": CORPUS_BYTES,
    "max_file_bytes": 0,  # > 0 truncates longer files to this many bytes
    "eval_bytes": 16384,  # held-out bytes evaluated (from the start of the held-out stream)
}

PARAM_LIMITS: ParamLimits = {
    "n_layer": (1, 64),
    "n_embd": (1, 1 << 13),
    "n_head": (1, 256),
    "block_size": (1, 1 << 16),
    "seq_len": (0, 1 << 16),
    "batch_size": (1, 1 << 16),
    "corpus_bytes": (1, 1 << 30),
    "max_file_bytes": (0, 1 << 30),
    "eval_bytes": (1, 1 << 30),
}
"""The params that size something in memory, bounded before the model is built."""


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention, then an MLP."""

    def __init__(self, n_embd: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.n_head, self.dropout = n_head, dropout
        self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd)
        )
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        shape = (b, t, self.n_head, c // self.n_head)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        # Fused attention kernels' backward passes may accumulate in any order; with
        # deterministic algorithms on (bitwise resume checks) the math kernel is used.
        exact = torch.are_deterministic_algorithms_enabled() and x.is_cuda
        with sdpa_kernel(SDPBackend.MATH) if exact else nullcontext():
            attn = F.scaled_dot_product_attention(
                q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
            )
        x = x + self.drop(self.proj(attn.transpose(1, 2).reshape(b, t, c)))
        return x + self.drop(self.mlp(self.ln2(x)))


class CharLM(nn.Module):
    """Byte embeddings + learned positions, `n_layer` blocks, a tied output head."""

    def __init__(self, n_layer: int, n_embd: int, n_head: int, block_size: int, dropout: float):
        super().__init__()
        if n_embd % n_head:
            raise ValueError(f"n_embd ({n_embd}) must be divisible by n_head ({n_head})")
        self.tokens = nn.Embedding(256, n_embd)
        self.positions = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(n_embd, n_head, dropout) for _ in range(n_layer))
        self.ln = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, 256, bias=False)
        self.head.weight = self.tokens.weight
        for module in self.modules():  # GPT-2's init: small logits, a loss near ln(256) at start
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tokens(idx) + self.positions(positions))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def _stream(files: list[tuple[str, bytes]], limit: int) -> bytes:
    cut = [data[:limit] if limit > 0 else data for _, data in files]
    return bytes([SEPARATOR]).join(cut)


def bf16_supported(device: torch.device) -> bool:
    """Whether bf16 autocast runs on this device (CPU autocast supports it everywhere)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    return device.type == "cpu"


class CharLMWorkload:
    """Decoder-only transformer on the built-in corpus's bytes. Params: see `DEFAULTS`."""

    PARAM_LIMITS = PARAM_LIMITS

    def __init__(
        self, params: Mapping[str, ParamValue], seed: int, device: torch.device, steps: int
    ) -> None:
        unknown = sorted(set(params) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"unknown charlm params {unknown}; known: {sorted(DEFAULTS)}")
        p: dict[str, Any] = {**DEFAULTS, **params}
        outside = [why for k, v in p.items() if (why := outside_limits(k, v, PARAM_LIMITS))]
        if outside:
            raise ValueError(outside[0])
        if p["precision"] not in ("fp32", "bf16"):
            raise ValueError(f"precision must be 'fp32' or 'bf16', got {p['precision']!r}")
        self.device = device
        self.block_size = int(p["block_size"])
        self.seq_len = int(p["seq_len"]) or self.block_size
        if not 0 < self.seq_len <= self.block_size:
            raise ValueError(f"seq_len must be in 1..block_size ({self.block_size})")
        self.batch_size = int(p["batch_size"])
        self.max_file_bytes = int(p["max_file_bytes"])
        self.corpus = load_corpus(int(p["corpus_bytes"]))
        self.autocast = p["precision"] == "bf16" and bf16_supported(device)
        train = _stream(self.corpus.train, self.max_file_bytes)
        held = _stream(self.corpus.heldout, self.max_file_bytes)[: int(p["eval_bytes"]) + 1]
        # The streams are a few MB of uint8: they live on the device, batches are cut there.
        self.train_data = torch.frombuffer(bytearray(train), dtype=torch.uint8).to(device)
        self.held_data = torch.frombuffer(bytearray(held), dtype=torch.uint8).to(device)
        self.starts = torch.arange(0, len(train) - self.seq_len - 1, self.seq_len, device=device)
        self.offsets = torch.arange(self.seq_len + 1, device=device)
        if len(self.starts) < self.batch_size:
            raise ValueError(f"batch_size {self.batch_size} exceeds the {len(self.starts)} windows")
        torch.manual_seed(seed)
        self.model = CharLM(
            int(p["n_layer"]), int(p["n_embd"]), int(p["n_head"]), self.block_size, p["dropout"]
        ).to(device)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=float(p["lr"]), weight_decay=float(p["weight_decay"])
        )
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=steps)
        self.scaler = None  # bf16 keeps fp32's exponent range: no loss scaling needed
        self.order = EpochOrder(len(self.starts), seed, device)  # checkpointed data position

    @classmethod
    def build(
        cls, params: Mapping[str, ParamValue], *, seed: int, device: torch.device, steps: int
    ) -> CharLMWorkload:
        return cls(params, seed, device, steps)

    @classmethod
    def probe_groups(cls, params: Mapping[str, ParamValue]) -> dict[str, dict[str, ParamValue]]:
        """Input groups by sequence length, as param overrides: a quarter, half and all of
        the context. The group the runs train on changes nothing (an empty override)."""
        block = int(params.get("block_size", DEFAULTS["block_size"]))
        trained = int(params.get("seq_len", 0)) or block
        lengths = sorted({max(1, block // 4), max(1, block // 2), block, trained})
        return {f"seq{n}": ({} if n == trained else {"seq_len": n}) for n in lengths}

    def _next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        chosen = self.order.take(self.batch_size)
        windows = self.train_data[self.starts[chosen][:, None] + self.offsets].long()
        return windows[:, :-1], windows[:, 1:]

    def _loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            logits = self.model(x)
        logits = logits.float().reshape(-1, 256)
        if torch.are_deterministic_algorithms_enabled() and logits.is_cuda:
            # nll_loss's CUDA kernels accumulate with atomics; one-hot is elementwise + sums.
            picked = F.log_softmax(logits, dim=-1) * F.one_hot(y.reshape(-1), 256)
            return -picked.sum(dim=-1).mean()
        return F.cross_entropy(logits, y.reshape(-1))

    def train_step(self, step: int) -> torch.Tensor:
        self.model.train()
        x, y = self._next_batch()
        loss = self._loss(x, y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        return loss.detach()

    @torch.no_grad()
    def evaluate(self) -> Evaluation:
        """Mean cross-entropy over the held-out stream's consecutive `block_size` windows."""
        self.model.eval()
        n = (len(self.held_data) - 1) // self.block_size
        used = n * self.block_size
        x = self.held_data[:used].long().view(n, self.block_size)
        y = self.held_data[1 : used + 1].long().view(n, self.block_size)
        total = torch.zeros((), device=self.device)
        for i in range(0, n, 64):  # bounded activation memory, whatever eval_bytes is
            total += self._loss(x[i : i + 64], y[i : i + 64]) * x[i : i + 64].numel()
        loss = float((total / used).item())
        return Evaluation(metrics={"val_loss": loss, "bits_per_byte": loss / math.log(2)})

    def state_dict(self) -> dict[str, Any]:
        return self.order.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.order.load_state_dict(state)

    def input_report(self) -> InputReport:
        """Files per split; those longer than `max_file_bytes` (when set) are truncated."""
        limit = self.max_file_bytes

        def group(files: list[tuple[str, bytes]]) -> InputGroup:
            cut = sum(1 for _, data in files if limit > 0 and len(data) > limit)
            return InputGroup(len(files), cut)

        return InputReport(
            groups={"train": group(self.corpus.train), "heldout": group(self.corpus.heldout)}
        )

    def check_data(self) -> list[DataProblem]:
        """Leakage by path or by identical content, and empty sides (ids: sorted file order)."""
        ids = {
            name: i
            for i, name in enumerate(sorted(n for n, _ in self.corpus.train + self.corpus.heldout))
        }
        problems: list[DataProblem] = []
        train_names = {name for name, _ in self.corpus.train}
        both = sorted(name for name, _ in self.corpus.heldout if name in train_names)
        if both:
            problems.append(DataProblem("leakage", "files on both sides", [ids[n] for n in both]))
        train_digests = {hashlib.sha256(data).digest() for _, data in self.corpus.train}
        copies = [n for n, d in self.corpus.heldout if hashlib.sha256(d).digest() in train_digests]
        if copies:
            problems.append(
                DataProblem(
                    "duplicates", "held-out files with a copy in training", [ids[n] for n in copies]
                )
            )
        for side, files in (("train", self.corpus.train), ("heldout", self.corpus.heldout)):
            if not files:
                problems.append(DataProblem("empty_split", f"no {side} files"))
        return problems

    def data_sha256(self) -> str:
        """The corpus digest, recorded in the run environment."""
        return self.corpus.sha256
