"""The built-in workload: a small MLP on scikit-learn's digits (8x8 images, 10 classes).

The data ships inside scikit-learn, so nothing is downloaded. The split is fixed by input id
(independent of the run's seed) so every run of a campaign is judged on the same held-out set.
"""

from __future__ import annotations

import gzip
import importlib.util
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ablations.plan.section import ParamLimits, ParamValue, outside_limits
from ablations.run.workload import Evaluation, InputGroup, InputReport, Predictions, Split, Splits
from ablations.workloads.epoch_order import EpochOrder

PIXELS = 64
HELDOUT_EVERY = 5
"""Every fifth input of each class (in a fixed shuffled order) is held out: 20%, stratified."""
SPLIT_SEED = 20240601
"""Fixed, not the run's seed: the held-out set must be the same for every paired comparison."""

DEFAULTS: dict[str, ParamValue] = {
    "width": 64,  # hidden units; digits is easy, 64 reaches ~97% in a few hundred steps
    "depth": 2,  # hidden layers
    "dropout": 0.1,
    "lr": 0.01,  # Adam; SGD needs ~10x more
    "optimizer": "adam",  # or "sgd" (momentum 0.9)
    "batch_size": 64,
    "keep_pixels": PIXELS,  # < 64 truncates every input to its first k pixels (rest zeroed)
    "weight_decay": 0.0,
}

PARAM_LIMITS: ParamLimits = {
    "width": (1, 1 << 14),  # 16 384 units: 1 GB of weights at depth 8, far past useful here
    "depth": (1, 64),
    "batch_size": (1, 1 << 16),
    "keep_pixels": (1, PIXELS),
}
"""The params that size something in memory, bounded before the model is built."""


@cache
def _digits() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train ids, held-out ids, inputs scaled to [0, 1], labels), computed once per process."""
    pixels, targets = _digits_table()
    inputs = (pixels / 16.0).astype(np.float32)
    labels = targets.astype(np.int64)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    heldout = np.zeros(len(labels), dtype=bool)
    for cls in range(10):
        members = order[labels[order] == cls]
        heldout[members[::HELDOUT_EVERY]] = True
    ids = np.arange(len(labels))
    return ids[~heldout], ids[heldout], inputs, labels


def _digits_table() -> tuple[np.ndarray, np.ndarray]:
    """(pixels, targets) of the 1797 digits: the CSV scikit-learn ships, read directly.

    This is the file `sklearn.datasets.load_digits` parses; importing `sklearn.datasets`
    costs every slot worker seconds, so it is the fallback only."""
    spec = importlib.util.find_spec("sklearn")  # locates the package without importing it
    if spec is not None and spec.origin is not None:
        path = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            with gzip.open(path, mode="rt", encoding="utf-8") as rows:
                table = np.loadtxt(rows, delimiter=",")
            return table[:, :-1], table[:, -1]
    from sklearn.datasets import load_digits

    data = load_digits()
    return data.data, data.target


def _mlp(width: int, depth: int, dropout: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    fan_in = PIXELS
    for _ in range(depth):
        layers += [nn.Linear(fan_in, width), nn.ReLU(), nn.Dropout(dropout)]
        fan_in = width
    layers.append(nn.Linear(fan_in, 10))
    return nn.Sequential(*layers)


class DigitsWorkload:
    """MLP classifier on digits. Params: see `DEFAULTS`."""

    PARAM_LIMITS = PARAM_LIMITS

    def __init__(
        self, params: Mapping[str, ParamValue], seed: int, device: torch.device, steps: int
    ):
        unknown = sorted(set(params) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"unknown digits params {unknown}; known: {sorted(DEFAULTS)}")
        p: dict[str, Any] = {**DEFAULTS, **params}
        outside = [why for k, v in p.items() if (why := outside_limits(k, v, PARAM_LIMITS))]
        if outside:
            raise ValueError(outside[0])
        self.device = device
        self.keep_pixels = int(p["keep_pixels"])
        if not 0 < self.keep_pixels <= PIXELS:
            raise ValueError(f"keep_pixels must be in 1..{PIXELS}, got {self.keep_pixels}")
        self.batch_size = int(p["batch_size"])
        train_ids, heldout_ids, inputs, labels = _digits()
        self.train_ids, self.heldout_ids = train_ids, heldout_ids
        masked = inputs.copy()
        masked[:, self.keep_pixels :] = 0.0
        # The whole data set is ~0.5 MB: keep it on the device, index batches there.
        self.x_train = torch.from_numpy(masked[train_ids]).to(device)
        self.y_train = torch.from_numpy(labels[train_ids]).to(device)
        self.x_held = torch.from_numpy(masked[heldout_ids]).to(device)
        self.y_held = torch.from_numpy(labels[heldout_ids]).to(device)

        torch.manual_seed(seed)
        self.model = _mlp(int(p["width"]), int(p["depth"]), float(p["dropout"])).to(device)
        lr, decay = float(p["lr"]), float(p["weight_decay"])
        if p["optimizer"] == "sgd":
            self.optimizer: torch.optim.Optimizer = torch.optim.SGD(
                self.model.parameters(), lr=lr, momentum=0.9, weight_decay=decay
            )
        elif p["optimizer"] == "adam":
            self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr, weight_decay=decay)
        else:
            raise ValueError(f"optimizer must be 'adam' or 'sgd', got {p['optimizer']!r}")
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=steps)
        self.scaler = None
        self.loss_fn = nn.CrossEntropyLoss()
        self.order = EpochOrder(len(self.train_ids), seed, device)  # checkpointed data position

    @classmethod
    def build(
        cls, params: Mapping[str, ParamValue], *, seed: int, device: torch.device, steps: int
    ) -> DigitsWorkload:
        return cls(params, seed, device, steps)

    def train_step(self, step: int) -> torch.Tensor:
        self.model.train()
        index = self.order.take(self.batch_size)
        loss = self.loss_fn(self.model(self.x_train[index]), self.y_train[index])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        return loss.detach()

    @torch.no_grad()
    def evaluate(self) -> Evaluation:
        self.model.eval()
        logits = self.model(self.x_held)
        predicted = logits.argmax(dim=1)
        loss = self.loss_fn(logits, self.y_held)
        accuracy = (predicted == self.y_held).float().mean()
        return Evaluation(
            metrics={"accuracy": float(accuracy.item()), "loss": float(loss.item())},
            predictions=Predictions(
                ids=self.heldout_ids.tolist(),
                labels=self.y_held.cpu().tolist(),
                predicted=predicted.cpu().tolist(),
            ),
        )

    def state_dict(self) -> dict[str, Any]:
        return self.order.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.order.load_state_dict(state)

    def input_report(self) -> InputReport:
        truncated = self.keep_pixels < PIXELS
        return InputReport(
            groups={
                "train": InputGroup(len(self.train_ids), len(self.train_ids) if truncated else 0),
                "heldout": InputGroup(
                    len(self.heldout_ids), len(self.heldout_ids) if truncated else 0
                ),
            }
        )

    def splits(self) -> Splits:
        _, _, inputs, labels = _digits()
        return Splits(
            train=Split(self.train_ids, inputs[self.train_ids], labels[self.train_ids]),
            heldout=Split(self.heldout_ids, inputs[self.heldout_ids], labels[self.heldout_ids]),
        )
