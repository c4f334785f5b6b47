"""Campaign wall time versus the bare sequential loop and Ray Tune, on the demo plan's runs.

    .venv/bin/python bench/campaign_overhead.py [--plan ablations/recipes/demo.yaml]
        [--devices N] [--ray-python /tmp/ray-venv/bin/python]

1. `ablate run PLAN` in a fresh folder (a subprocess, as a user runs it; ephemeral Prefect
   with this environment's PREFECT_HOME), timed from launch to exit.
2. The bare loop: every run the campaign trained, for the steps it trained (a run stopped
   before its first step trains nothing on either side), one after the other in this process
   with the slot's torch threads (`bare_training.py`).
3. Ray Tune: the same runs and steps as trials of `tune.with_resources(..., {"cpu": 1})` on
   `num_cpus=slots` (`ray_tune_runs.py`, in its own venv; ray is never our dependency).

Prints one summary line, with the pilot steps the main runs resumed from (trained once, not
again); goal (issue 5): ablate <= bare + 15 s.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bare_training import train_sequentially

ROOT = Path(__file__).resolve().parents[1]
GOAL_SECONDS = 15.0
"""Issue 5: the campaign within the bare sequential training + 15 s."""


def run_campaign(plan: Path, out: Path, devices: str | None) -> float:
    command = [sys.executable, "-m", "ablations.cli", "run", str(plan), "--out", str(out)]
    if devices:
        command += ["--devices", devices]
    started = time.perf_counter()
    # cwd is the scratch folder: the demo's relative checkpoint store lands there.
    result = subprocess.run(command, cwd=out.parent, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"ablate run failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return seconds


def reused_steps(out: Path) -> int:
    """The pilot steps the main runs resumed from instead of training them again."""
    manifest = json.loads((out / "manifest.json").read_text())
    return sum(
        (r.get("checkpoint") or {}).get("resumed_from_step") or 0
        for r in manifest["runs"]
        if r.get("steps_done")
    )


def trained_runs(out: Path) -> tuple[list[dict[str, object]], int]:
    """(the runs the campaign trained, with the steps it trained; the registered runs)."""
    manifest = json.loads((out / "manifest.json").read_text())
    plan_eval = int(_eval_every(out))
    runs = [
        {
            "run_id": r["run_id"],
            "params": r["params"],
            "seed": r["seed"],
            # a main run resumed from its pilot trained only the steps after the pilot's
            "steps": r["steps_done"] - ((r.get("checkpoint") or {}).get("resumed_from_step") or 0),
            "eval_every": plan_eval,
        }
        for r in manifest["runs"]
        if r.get("steps_done")
    ]
    runs = [r for r in runs if r["steps"]]
    return runs, len(manifest["runs"])


def _eval_every(out: Path) -> int:
    from ablations.campaign.folder import CampaignFolder

    return CampaignFolder(out).plan().workload.eval_every


def run_ray(python: Path, runs_file: Path, slots: int, threads: int) -> dict[str, float] | str:
    if not python.exists():
        return f"not run: {python} missing (python3 -m venv /tmp/ray-venv; pip install 'ray[tune]')"
    result = subprocess.run(
        [
            *(str(python), str(ROOT / "bench" / "ray_tune_runs.py"), str(runs_file)),
            *("--slots", str(slots), "--threads", str(threads)),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=runs_file.parent,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        return f"failed ({result.returncode}): {result.stderr.strip().splitlines()[-1:]}"
    figures: dict[str, float] = json.loads(lines[-1])
    if figures.get("errors"):
        return f"failed: {figures['errors']} trials errored"
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, default=ROOT / "ablations" / "recipes" / "demo.yaml")
    parser.add_argument("--devices", default=None, help="ablate run --devices (default: plan's)")
    parser.add_argument("--ray-python", type=Path, default=Path("/tmp/ray-venv/bin/python"))
    args = parser.parse_args()
    from ablations.plan.io import load_plan
    from ablations.slots.devices import plan_slots

    slots = plan_slots(load_plan(args.plan).resources, args.devices)
    threads = slots[0].cpu_threads
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    with tempfile.TemporaryDirectory(prefix="ablate-bench-") as scratch:
        out = Path(scratch) / "out"
        campaign_s = run_campaign(args.plan.resolve(), out, args.devices)
        runs, registered = trained_runs(out)
        reused = reused_steps(out)
        runs_file = Path(scratch) / "runs.json"
        runs_file.write_text(json.dumps(runs))
        bare_s = train_sequentially(runs, threads)
        ray = run_ray(args.ray_python, runs_file, len(slots), threads)
    steps = sum(int(r["steps"]) for r in runs)  # type: ignore[call-overload]
    over = campaign_s - bare_s
    verdict = "met" if over <= GOAL_SECONDS else "NOT met"
    if isinstance(ray, dict):
        ray_text = (
            f"Ray Tune {ray['total_s']:.1f} s (fit {ray['fit_s']:.1f} s, ray {ray['ray']}) = "
            f"{ray['total_s'] / bare_s:.2f}x bare; ablate/ray {campaign_s / ray['total_s']:.2f}x"
        )
    else:
        ray_text = f"Ray Tune {ray}"
    print(
        f"campaign overhead ({args.plan.name}: {registered} runs, {len(runs)} trained, {steps} "
        f"steps, {reused} pilot steps reused; {len(slots)} slot(s) x {threads} threads): "
        f"ablate run {campaign_s:.1f} s | bare sequential {bare_s:.1f} s | "
        f"ablate - bare = {over:+.1f} s = {campaign_s / bare_s:.2f}x "
        f"(goal <= +{GOAL_SECONDS:.0f} s: {verdict}) | {ray_text}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
