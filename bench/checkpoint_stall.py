"""Training-loop stall per checkpoint: background save vs synchronous torch.save + upload.

    .venv/bin/python bench/checkpoint_stall.py [--mb 50] [--saves 5] [--store auto|s3|file]

Starts moto's S3 server on 127.0.0.1 (`--store s3`; `auto`, the default, when moto imports,
else a local file store in a temporary folder: a machine without moto still measures the
stall), trains a small MLP with Adam whose full state is about `--mb` MB, and times (a)
`CheckpointManager.save` as the loop sees it, then waits for the commit; (b) `torch.save` of
the same state into bytes plus its upload to the same store. Goal: stall <= 0.2x synchronous.
Prints one summary line (naming the store), plus C and the `auto` interval for M = 4 h.
`--workload charlm --params JSON --device cuda:0` saves the transformer workload's state
(model, AdamW moments, data position) from the device instead of the MLP.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from typing import Any

import torch
from torch import nn

from ablations.checkpoint import CheckpointManager, open_store
from ablations.checkpoint.interval import young_daly
from ablations.plan.experiment import MetricSection
from ablations.plan.infrastructure import CheckpointSection
from ablations.plan.workload import WorkloadSection
from ablations.run.hooks import RunHistory
from ablations.run.records import RunSpec

BUCKET = "ablate-bench"


class Bench:
    """A workload-shaped MLP: weights + two Adam moments = 3 x 4 bytes per parameter."""

    def __init__(self, mb: float) -> None:
        width = int((mb * 2**20 / 12 / 4) ** 0.5)  # four width x width layers
        self.model = nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(4)])
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        self.scheduler = None
        self.scaler = None
        self.x = torch.randn(8, width)

    def train_step(self, step: int) -> torch.Tensor:
        loss = self.model(self.x).square().mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def state_dict(self) -> dict[str, int]:
        return {"cursor": 0}

    def load_state_dict(self, state: object) -> None:
        pass


@contextmanager
def s3_store() -> Iterator[CheckpointSection]:
    """A bucket on moto's S3 server on loopback, for as long as the block runs."""
    from moto.server import ThreadedMotoServer

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server._server.server_address[:2]  # port 0: the OS chose one
    endpoint = f"http://{host}:{port}"
    try:
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        yield CheckpointSection(store=f"s3://{BUCKET}/bench", endpoint_url=endpoint)
    finally:
        server.stop()


@contextmanager
def file_store() -> Iterator[CheckpointSection]:
    """A file store in a temporary folder (this machine's disk), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="ablate-stall-") as folder:
        yield CheckpointSection(store=f"file://{folder}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--saves", type=int, default=5)
    parser.add_argument("--workload", choices=["mlp", "charlm"], default="mlp")
    parser.add_argument("--params", default="{}", help="charlm params as JSON")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--store", choices=["auto", "s3", "file"], default="auto")
    args = parser.parse_args()
    kind = args.store
    if kind == "auto":
        kind = "s3" if find_spec("moto") is not None else "file"
    workload: Any = Bench(args.mb)
    if args.workload == "charlm":
        from ablations.workloads.charlm import CharLMWorkload

        device = torch.device(args.device)
        workload = CharLMWorkload.build(json.loads(args.params), seed=0, device=device, steps=10**6)
    with s3_store() if kind == "s3" else file_store() as section:
        where = "moto S3 on loopback" if kind == "s3" else "local file store"
        run(section, workload, args.saves, where)


def run(section: CheckpointSection, workload: Any, saves: int, where: str) -> None:
    spec = RunSpec(
        run_id="bench", campaign_id="bench", plan_hash="bench", variant="control",
        category="essential", phase="main", seed=0, params={}, steps=10**6,
        workload=WorkloadSection(entry="bench:NotLoaded", eval_every=10**6),  # never built
        metric=MetricSection(name="loss", threshold=0.0, useful_effect=0.01),
        checkpoint=section,
    )  # fmt: skip
    history = RunHistory()
    workload.train_step(0).item()  # Adam's moments exist from the first step
    manager = CheckpointManager(spec)
    step_seconds, stalls, costs = [], [], []
    for i in range(1, saves + 1):
        started = time.perf_counter()
        workload.train_step(i).item()  # synced: the step's time, not its launch
        step_seconds.append(time.perf_counter() - started)
        started = time.perf_counter()
        manager.save(i, workload, history)
        stalls.append(time.perf_counter() - started)
        summary = manager.wait()
        costs.append(time.perf_counter() - started)
    summary = manager.close()
    assert summary.failures == 0 and summary.saves == saves, summary
    state_bytes = sum(
        t.numel() * t.element_size()
        for t in [*workload.model.state_dict().values()]
        + [v for s in workload.optimizer.state.values() for v in s.values()]
    )
    store = open_store(section)
    sync = []
    for i in range(saves):
        started = time.perf_counter()
        buffer = io.BytesIO()
        torch.save({"model": workload.model.state_dict(), "opt": workload.optimizer.state_dict()},
                   buffer)  # fmt: skip
        store.put(f"bench/sync/{i}.pt", buffer.getvalue())
        sync.append(time.perf_counter() - started)
    stall, synchronous, cost = (statistics.median(x) for x in (stalls, sync, costs))
    step = statistics.median(step_seconds)
    tau = young_daly(cost, section.mtbf_hours * 3600, section.max_loss_minutes * 60)
    ratio = stall / synchronous
    print(
        f"state {state_bytes / 2**20:.1f} MB | stall {stall * 1e3:.1f} ms vs synchronous "
        f"{synchronous * 1e3:.1f} ms = {ratio:.3f}x (goal <= 0.2x: "
        f"{'met' if ratio <= 0.2 else 'NOT met'}) | C {cost:.3f} s | auto tau for M=4h "
        f"{tau:.1f} s = {max(1, round(tau / step))} steps of {step * 1e3:.1f} ms | "
        f"median of {saves} | store: {where}"
    )


if __name__ == "__main__":
    main()
