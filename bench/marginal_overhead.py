"""Marginal campaign overhead per extra run: a 12-run and a 48-run plan through `ablate run`.

    .venv/bin/python bench/marginal_overhead.py [--small 12] [--large 48] [--devices 1]

Both plans are the demo plan with its factors replaced by one factor of many levels (one
seed, the control alone in the pilot) and tiny steps, so training is negligible and what
grows with the run count is the campaign's own work per run: a Prefect task, a slot lease,
the spec to the worker and the record back, the checkpoint store probe and saves, the
completion record, the ledger trial and the manifest row. Each plan runs in a fresh folder
(a subprocess, ephemeral Prefect, as a user runs it); marginal = (T_large - T_small) /
(large - small). The same runs' bare training (build + steps + evaluations) is measured too
and its marginal is shown beside it. Prints one summary line; goal (issue 5): <= 0.3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bare_training import train_sequentially

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "ablations" / "recipes" / "demo.yaml"
GOAL_SECONDS = 0.3
STEPS, EVAL_EVERY, PILOT_STEPS = 4, 2, 2
"""Tiny on purpose: the figure is the campaign's cost per run, not training."""


def plan_with(runs: int, store: Path) -> dict[str, Any]:
    """The demo plan with `runs` registered runs: 1 pilot (control) + control + runs-2 levels."""
    data: dict[str, Any] = yaml.safe_load(DEMO.read_text())
    data["campaign"]["id"] = f"marginal-{runs}"
    data["workload"].update(steps=STEPS, eval_every=EVAL_EVERY)
    data["factors"] = {"width": {"category": "useful", "levels": list(range(8, 8 + runs - 2))}}
    data["seeds"] = [0]
    data["metric"]["threshold"] = 0.0  # every tiny run healthy: the gate continues
    data["pilot"] = {"variants": ["control"], "seeds": [0], "steps": PILOT_STEPS}
    data["stop_rules"]["quality"] = {"enabled": False}
    data["stop_rules"]["restart"] = {"check_steps": 1}
    data["checkpoint"]["store"] = f"file://{store}"
    return data


def timed_run(plan: Path, out: Path, devices: str) -> float:
    command = [sys.executable, "-m", "ablations.cli", "run", str(plan), "--out", str(out)]
    started = time.perf_counter()
    result = subprocess.run(
        [*command, "--devices", devices], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"ablate run failed ({result.returncode}):\n{result.stderr[-3000:]}")
    manifest = json.loads((out / "manifest.json").read_text())
    pending = [r for r in manifest["runs"] if r["status"] == "pending"]
    if pending or len(manifest["runs"]) != int(plan.stem.split("-")[1]):
        raise SystemExit(f"{plan.name}: {len(pending)} runs pending of {len(manifest['runs'])}")
    return seconds


def bare_runs(out: Path) -> list[dict[str, Any]]:
    manifest = json.loads((out / "manifest.json").read_text())
    return [
        {"params": r["params"], "seed": r["seed"], "steps": r["steps_done"], "eval_every": 2}
        for r in manifest["runs"]
        if r.get("steps_done")
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=12)
    parser.add_argument("--large", type=int, default=48)
    parser.add_argument("--devices", default="1", help="CPU slots (the demo's on 2 cores: 1)")
    args = parser.parse_args()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    seconds, bare = {}, {}
    with tempfile.TemporaryDirectory(prefix="ablate-marginal-") as scratch:
        for n in (args.small, args.large):
            plan = Path(scratch) / f"plan-{n}.yaml"
            plan.write_text(yaml.safe_dump(plan_with(n, Path(scratch) / f"ckpt-{n}")))
            out = Path(scratch) / f"out-{n}"
            seconds[n] = timed_run(plan, out, args.devices)
            bare[n] = train_sequentially(bare_runs(out), threads=max(1, os.cpu_count() or 1))
    extra = args.large - args.small
    marginal = (seconds[args.large] - seconds[args.small]) / extra
    bare_marginal = (bare[args.large] - bare[args.small]) / extra
    verdict = "met" if marginal <= GOAL_SECONDS else "NOT met"
    print(
        f"marginal overhead ({args.devices} slot(s), {STEPS} steps per run): "
        f"T{args.small} {seconds[args.small]:.1f} s, T{args.large} {seconds[args.large]:.1f} s "
        f"-> {marginal:.3f} s per extra run (goal <= {GOAL_SECONDS} s: {verdict}); of which "
        f"bare training {bare_marginal:.3f} s, campaign's own {marginal - bare_marginal:.3f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
