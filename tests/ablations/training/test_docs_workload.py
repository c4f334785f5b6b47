"""The minimal user workload shown in docs/own-code.md runs through the driver as written.

The class below is the page's snippet, kept here so the driver can import it by its entry
(`tests.ablations.training.test_docs_workload:LinearWorkload`); the first test reads the page
and fails when the two differ, so the page cannot drift from what runs.
"""

from __future__ import annotations

import inspect
import re
import sys

import torch

from ablations import Evaluation, InputGroup, InputReport
from ablations.preflight.data_check import check_data
from ablations.training.driver import execute
from tests.ablations.training.test_driver import digits_spec
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "own-code.md"
IMPORTS = "import torch\nfrom ablations import Evaluation, InputGroup, InputReport\n"
"""The snippet's first lines: imported at the top of this file instead."""

# --- the page's snippet (docs/own-code.md, "Your own workload"), less its two imports -----


class LinearWorkload:
    scheduler = scaler = None  # no LR schedule, no mixed precision

    @classmethod
    def build(cls, params, *, seed, device, steps):
        self = cls()
        self.x = torch.randn(512, 8, device=device)  # the driver has seeded torch
        self.y = self.x @ torch.arange(8.0, device=device)
        self.model = torch.nn.Linear(8, 1).to(device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=float(params["lr"]))
        return self

    def train_step(self, step):
        loss = torch.nn.functional.mse_loss(self.model(self.x[:384]).squeeze(1), self.y[:384])
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach()  # a tensor, not .item(): the driver reads losses in batches

    @torch.no_grad()
    def evaluate(self):
        error = torch.nn.functional.mse_loss(self.model(self.x[384:]).squeeze(1), self.y[384:])
        return Evaluation({"mse": error.item()})

    def state_dict(self):
        return {}  # the data never moves: nothing to restore beyond model and optimizer

    def load_state_dict(self, state):
        pass

    def input_report(self):
        return InputReport({"train": InputGroup(384), "heldout": InputGroup(128)})

    def check_data(self):
        return []  # rows 0-383 train, 384-511 held out: disjoint by construction


# --- end of the page's snippet -------------------------------------------------------------


def page_snippet() -> str:
    """The page's Python block that defines `LinearWorkload`."""
    blocks = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(), re.MULTILINE | re.DOTALL)
    found = [block for block in blocks if "class LinearWorkload" in block]
    assert len(found) == 1, f"{PAGE.name} shows LinearWorkload {len(found)} times"
    return str(found[0])


def test_the_page_shows_the_workload_that_runs_here() -> None:
    snippet = page_snippet()
    assert snippet.startswith(IMPORTS), "the page's snippet lost its imports"
    shown = snippet.removeprefix(IMPORTS).strip()
    assert shown == inspect.getsource(sys.modules[__name__].LinearWorkload).strip()


def test_the_page_names_this_test() -> None:
    assert "tests/ablations/training/test_docs_workload.py" in PAGE.read_text()


def test_the_docs_workload_is_accepted() -> None:
    spec = digits_spec(
        entry=f"{__name__}:LinearWorkload",
        params={"lr": 0.05},
        steps=200,
        eval_every=100,
        metric="mse",
        direction="minimize",
        threshold=0.01,
        stop_rules={"quality": {"warmup_steps": 100}},
    )
    record = execute(spec)

    assert record.status == "accepted", (record.stop, record.error)
    assert record.metrics["mse"] <= 0.01
    assert [e["step"] for e in record.evaluations] == [100, 200]


def test_the_docs_workload_passes_the_data_check_with_its_counts() -> None:
    workload = LinearWorkload.build({"lr": 0.1}, seed=0, device=torch.device("cpu"), steps=1)
    assert check_data(workload, {"train": 384, "heldout": 128}) == []
    assert [p.check for p in check_data(workload, {"train": 400})] == ["counts"]
