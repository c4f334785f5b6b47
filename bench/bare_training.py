"""The floor the campaign benchmarks compare against: the same runs, trained in a bare loop.

Shared by `campaign_overhead.py` (in this environment) and `ray_tune_runs.py` (in the Ray
venv): a run is `{"run_id", "params", "seed", "steps", "eval_every"}`; training it builds the
built-in digits workload, calls `train_step` `steps` times and evaluates every `eval_every`
steps and at the end, as the driver does. No loss read-back, no stop rules, no checkpoints.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ablations.training.driver import seed_everything
from ablations.workloads.digits import DigitsWorkload

BareRun = dict[str, Any]


def train_bare(run: BareRun) -> float:
    """Train one run; its final held-out accuracy."""
    seed_everything(int(run["seed"]))
    workload = DigitsWorkload.build(
        run["params"], seed=int(run["seed"]), device=torch.device("cpu"), steps=int(run["steps"])
    )
    evaluation = None
    for step in range(1, int(run["steps"]) + 1):
        workload.train_step(step)
        if step % int(run["eval_every"]) == 0 or step == int(run["steps"]):
            evaluation = workload.evaluate()
    return float(evaluation.metrics["accuracy"]) if evaluation is not None else float("nan")


def train_sequentially(runs: list[BareRun], threads: int) -> float:
    """Wall seconds to train every run one after the other with `threads` torch threads."""
    torch.set_num_threads(threads)
    started = time.perf_counter()
    for run in runs:
        train_bare(run)
    return time.perf_counter() - started
