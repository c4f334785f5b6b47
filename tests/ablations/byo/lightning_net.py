"""A tiny LightningModule and DataModule as a user writes them (regression on a fixed sine;
held-out predictions classify each row as above zero or not, through `predict_step`).

Test knobs in the environment: `TRAINED_LOG` (a folder: append each trained step to
`<lr>-<seed>.log`, so a test sees what a kill and a resume trained twice) and `STEP_SLEEP`
(seconds per step, so a test can kill the campaign mid-run); `PHASE_LOG` (a file: each step
appends what `ablate_report` tells the module, phase, until and steps)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import lightning.pytorch as pl
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ablate_report as ablate
from ablations.byo.data import ResumableLoader


class Net(pl.LightningModule):
    """`dropout` and `norm` (batch norm) are what a correct module has: a resume restores
    both. `noise` (added to the inputs) is a mistake for the restart check to find: drawn
    from a generator of the module's own, which no checkpoint holds (seeded from the run's
    seed, or with `noise_seeded: false` from the clock)."""

    def __init__(
        self,
        lr: float = 0.05,
        width: int = 16,
        dropout: float = 0.0,
        norm: bool = False,
        noise: float = 0.0,
        noise_seeded: bool = True,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(8, width),
            torch.nn.BatchNorm1d(width) if norm else torch.nn.Identity(),  # running stats
            torch.nn.Tanh(),
            torch.nn.Dropout(dropout),  # draws from the RNG: a resume must restore it
            torch.nn.Linear(width, 1),
        )
        self.noise = torch.Generator()
        if noise_seeded:
            self.noise.manual_seed(torch.initial_seed())
        else:
            self.noise.seed()  # not reproducible: two runs of one seed differ

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        log = os.environ.get("TRAINED_LOG")
        if log:
            name = f"{self.hparams.lr}-{torch.initial_seed()}.log"
            with Path(log, name).open("a") as handle:
                handle.write(f"{self.global_step + 1}\n")
        time.sleep(float(os.environ.get("STEP_SLEEP", 0)))
        phases = os.environ.get("PHASE_LOG")
        if phases:  # what the run's environment tells a module (a pilot, and how far)
            with Path(phases).open("a") as handle:
                handle.write(f"{ablate.phase()} {ablate.until()} {ablate.steps()}\n")
        if self.hparams.noise:
            x = x + self.hparams.noise * torch.randn(x.shape, generator=self.noise)
        return F.mse_loss(self.net(x).squeeze(1), y)

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("mse", F.mse_loss(self.net(x).squeeze(1), y))

    def predict_step(self, batch: list[torch.Tensor], batch_idx: int) -> dict[str, torch.Tensor]:
        """Held-out rows classified as above zero or not (for the error analysis)."""
        x, y, ids = batch
        predicted = (self.net(x).squeeze(1) > 0).long()
        return {"input_id": ids, "label": (y > 0).long(), "predicted": predicted}

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class Sine(pl.LightningDataModule):
    def __init__(self, batch_size: int = 32, resumable: bool = False) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(1234)  # the data is fixed, not the run's seed
        x = torch.randn(320, 8, generator=generator)
        y = (x @ torch.linspace(-1, 1, 8)).sin()
        self.train, self.heldout = TensorDataset(x[:256], y[:256]), TensorDataset(x[256:], y[256:])
        self.batch_size, self.resumable = batch_size, resumable

    def train_dataloader(self) -> DataLoader | ResumableLoader:
        if self.resumable:  # the project's loader, as docs/own-code.md's example uses it
            return ResumableLoader(self.train, batch_size=self.batch_size, shuffle=True)
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.heldout, batch_size=64)

    def predict_dataloader(self) -> DataLoader:
        x, y = self.heldout.tensors
        return DataLoader(TensorDataset(x, y, torch.arange(256, 320)), batch_size=40)


class Unpredicted(Sine):
    """A data module without held-out predictions (Lightning's own `predict_dataloader`)."""

    predict_dataloader = pl.LightningDataModule.predict_dataloader  # type: ignore[assignment]
