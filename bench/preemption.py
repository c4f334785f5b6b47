"""Steps lost to a SIGTERM mid-run: checkpoint on terminate off (before) against on (after).

    .venv/bin/python bench/preemption.py [--steps 2000] [--every 500] [--signals 4]

Each run goes through a real slot worker process (`SlotWorker`), checkpointing every
`--every` steps to a `file://` store. At a step drawn between two interval checkpoints the
workload sends its own process a SIGTERM (what a reclaimed machine does), then the run is
started again on the same store. Steps lost = the steps done when the signal came less the
step the rerun resumes from. Off, the worker dies at once and the rerun resumes from the last
interval checkpoint; on, the run commits its current step first (goal: 0 lost). Prints one
summary line per mode and exits 1 when `on` lost any step.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ablations.plan.experiment import MetricSection
from ablations.plan.infrastructure import CheckpointSection, Interval
from ablations.plan.workload import WorkloadSection
from ablations.run.records import RunRecord, RunSpec
from ablations.slots.devices import SlotSpec
from ablations.workers.jobs import RunJob
from ablations.workers.worker import SlotWorker, Warmup
from ablations.workloads.digits import DigitsWorkload

AT, CLAIM = "BENCH_SIGTERM_AT", "BENCH_SIGTERM_CLAIM"


class SignalledDigits(DigitsWorkload):
    """Digits that sends its own process a SIGTERM during step `$BENCH_SIGTERM_AT`, once."""

    def train_step(self, step: int) -> Any:
        if step == int(os.environ.get(AT, "0")):
            try:
                os.close(os.open(os.environ[CLAIM], os.O_CREAT | os.O_EXCL))
            except FileExistsError:  # the rerun passes the step without a signal
                pass
            else:
                os.kill(os.getpid(), signal.SIGTERM)
        return super().train_step(step)


def spec(store: Path, steps: int, every: int, on_terminate: bool) -> RunSpec:
    section = CheckpointSection(
        store=f"file://{store}", interval=Interval(steps=every), on_terminate=on_terminate
    )
    return RunSpec(
        run_id="control-s0-bench", campaign_id="bench", plan_hash="0" * 64, variant="control",
        category="essential", phase="main", seed=0, params={"width": 32}, steps=steps,
        workload=WorkloadSection(entry="preemption:SignalledDigits", eval_every=steps),
        metric=MetricSection(name="accuracy", threshold=0.0, useful_effect=0.01),
        checkpoint=section,
    )  # fmt: skip


def lost_steps(at: int, steps: int, every: int, on_terminate: bool, folder: Path) -> int:
    """One signalled run and its rerun: the steps the rerun has to train again."""
    os.environ[AT], os.environ[CLAIM] = str(at), str(folder / "signalled")
    run = spec(folder / "store", steps, every, on_terminate)
    warmup = Warmup(on_terminate=on_terminate, terminate_grace_seconds=30.0)
    worker = SlotWorker(SlotSpec(name="cpu#0", device="cpu", cpu_threads=1), warmup)
    try:
        first = worker.do(RunJob(run))  # off: the worker dies and the job retries once, resuming
        record: RunRecord = worker.do(RunJob(run)) if first.interrupted else first
    finally:
        worker.close()
    assert record.status == "accepted", (record.status, record.error)
    resumed = record.checkpoint.resumed_from_step or 0
    return max(0, (at - 1) - resumed)  # the signal came during step `at`: `at - 1` were done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--every", type=int, default=500, help="interval checkpoint, in steps")
    parser.add_argument("--signals", type=int, default=4, help="signalled runs per mode")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    draw = random.Random(args.seed)
    # Between two interval checkpoints, never on one: what an interval alone loses.
    points = [draw.randrange(args.every + 1, args.steps) for _ in range(args.signals)]
    points = [p + 1 if p % args.every == 0 else p for p in points]
    failed = False
    for on in (False, True):
        started, lost = time.perf_counter(), []
        for at in points:
            with tempfile.TemporaryDirectory() as tmp:
                lost.append(lost_steps(at, args.steps, args.every, on, Path(tmp)))
        seconds = time.perf_counter() - started
        name = "on (after) " if on else "off (today)"
        print(
            f"checkpoint.on_terminate {name}: steps lost to SIGTERM at steps {points}: "
            f"{lost} (mean {statistics.fmean(lost):.1f}, max {max(lost)}); {seconds:.1f} s"
        )
        failed = failed or (on and max(lost) > 0)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
