"""A command workload's overhead: the same script run bare and under the driver.

Bare: `python SCRIPT` with no `ABLATE_*` variables (`ablate_report` calls are no-ops). Driven:
`ablations.byo.run.execute` on a spec running the same script for the same steps (a report,
its JSON reply and the stop-rule checks per step; checkpoints off, as the bare run has none).
Trials are interleaved in pairs; the overhead is the median of the paired wall-time ratios
minus 1, plus the per-step cost in microseconds (the process start and torch import are in
both sides, so the per-step figure is the one that scales).

    .venv/bin/python bench/byo_overhead.py --steps 2000 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ablations.byo.command import HELPER_DIR, CommandWorkload
from ablations.byo.run import execute
from ablations.plan.sections import COMMAND_ENTRY
from ablations.records import RunSpec

SCRIPT = Path(__file__).parents[1] / "ablations" / "recipes" / "command" / "train.py"


def bare(steps: int) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ABLATE_")}
    env["PYTHONPATH"] = str(HELPER_DIR)
    env["OMP_NUM_THREADS"] = "1"
    started = time.perf_counter()
    # the bare script reads its step count from ablate.steps(300): pass it through a shim
    code = f"import sys, ablate_report as a; a.steps = lambda d=0: {steps}; sys.argv = ['t']; "
    code += f"exec(open({str(SCRIPT)!r}).read())"
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return time.perf_counter() - started


def driven(steps: int, out: Path) -> float:
    spec = RunSpec(
        run_id="bench", campaign_id="bench", plan_hash="0" * 16, variant="control",
        category="essential", phase="main", seed=0, params={"lr": 0.05, "width": 16},
        steps=steps, eval_every=50, workload=COMMAND_ENTRY,
        command=["python", str(SCRIPT), "--lr", "{lr}", "--width", "{width}"], metric="mse",
        direction="minimize", threshold=10.0, out_dir=str(out),
    )  # fmt: skip
    os.environ["OMP_NUM_THREADS"] = "1"
    started = time.perf_counter()
    record = execute(spec, CommandWorkload)
    seconds = time.perf_counter() - started
    assert record.status == "accepted" and record.steps_done == steps, record
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ratios, per_step = [], []
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.repeats):
            b, d = bare(args.steps), driven(args.steps, Path(out))
            ratios.append(d / b)
            per_step.append((d - b) / args.steps * 1e6)
    print(
        f"command workload, {args.steps} steps x {args.repeats}: overhead "
        f"{statistics.median(ratios) - 1:+.1%} of wall time, "
        f"{statistics.median(per_step):.0f} us per step (median of paired trials)"
    )


if __name__ == "__main__":
    main()
