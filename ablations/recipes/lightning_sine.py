"""A LightningModule and a LightningDataModule as a user writes them, for
`ablations/recipes/lightning.yaml`: batch norm, dropout, AdamW under OneCycleLR, gradient
clipping (the plan's `trainer`), regression on a fixed sine, held-out predictions for the
error analysis. It needs nothing from ablate but `ResumableLoader` (a loader that resumes
mid-epoch, so the preflight's restart check passes: a plain DataLoader reshuffles)."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from ablations import ResumableLoader


class Net(pl.LightningModule):
    def __init__(
        self, lr: float = 0.01, width: int = 32, dropout: float = 0.1, norm: bool = True
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(8, width),
            torch.nn.BatchNorm1d(width) if norm else torch.nn.Identity(),
            torch.nn.ReLU(),
            torch.nn.Dropout(dropout),
            torch.nn.Linear(width, 1),
        )

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self.net(x).squeeze(1), y)

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("mse", F.mse_loss(self.net(x).squeeze(1), y))  # the plan's metric

    def predict_step(self, batch: list[torch.Tensor], batch_idx: int) -> dict[str, torch.Tensor]:
        """Held-out rows classified as above zero or not: the report's flips."""
        x, y, ids = batch
        predicted = (self.net(x).squeeze(1) > 0).long()
        return {"input_id": ids, "label": (y > 0).long(), "predicted": predicted}

    def configure_optimizers(self) -> dict[str, object]:
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        # One cycle over the whole run (ablate sets max_steps to the run's length, the pilot's
        # too), stepped every batch: a pilot resumed into its main run keeps the schedule.
        schedule = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=self.hparams.lr, total_steps=self.trainer.max_steps
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class Sine(pl.LightningDataModule):
    def __init__(self, batch_size: int = 32) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(1234)  # the data is fixed, not the run's seed
        x = torch.randn(384, 8, generator=generator)
        y = (x @ torch.linspace(-1, 1, 8)).sin()
        self.train, self.heldout = TensorDataset(x[:320], y[:320]), TensorDataset(x[320:], y[320:])
        self.batch_size = batch_size

    def train_dataloader(self) -> ResumableLoader:
        return ResumableLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.heldout, batch_size=64)

    def predict_dataloader(self) -> DataLoader:
        x, y = self.heldout.tensors
        return DataLoader(TensorDataset(x, y, torch.arange(320, 384)), batch_size=64)
