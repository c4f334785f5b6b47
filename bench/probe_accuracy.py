"""How well `ablate probe`'s step times predict the main phase's, per variant.

    ablate probe ablations/recipes/charlm.yaml --out P
    ablate run ablations/recipes/charlm.yaml --out C
    python bench/probe_accuracy.py --probe P/probe.json --campaign C

For each variant: the probe's planned point (the runs' own group and batch size) against the
main runs' measured step time, as the projection measures it (training seconds / steps) and as
the median warm window (`step_seconds`). Goal: within 15% (judged on training seconds / steps,
what `ablate plan` projects). Also prints the probe's own cost. Writes `--json` when given.

    python bench/probe_accuracy.py --direct ablations/recipes/charlm.yaml [--repeats 3]

`--direct` takes the other sources of difference away: in one process and one thread,
alternately, the probe's measurement of the control's planned point and the driver's run of
the same spec (the main phase's steps), median over the repeats.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from ablations.probe.sweep import read

GOAL = 0.15


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", type=Path)
    parser.add_argument("--campaign", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--direct", type=Path, metavar="PLAN")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.direct is not None:
        return direct(args.direct, args.repeats)
    if args.probe is None or args.campaign is None:
        parser.error("give --probe and --campaign, or --direct PLAN")
    probe = read(args.probe)
    probed = {p.variant: p.step_seconds for p in probe.points if p.ok and p.planned}
    main_runs: dict[str, list[dict[str, float]]] = {}
    for path in sorted((args.campaign / "records").glob("*.json")):
        record = json.loads(path.read_text())
        if record["phase"] == "main" and record["steps_done"] > 0:
            main_runs.setdefault(record["variant"], []).append(
                {
                    "per_step": record["timings"]["train"] / record["steps_done"],
                    "median_window": record["step_seconds"] or float("nan"),
                }
            )
    rows = []
    for variant, seconds in probed.items():
        runs = main_runs.get(variant)
        if not runs or seconds is None:
            continue
        measured = statistics.fmean(r["per_step"] for r in runs)
        window = statistics.fmean(r["median_window"] for r in runs)
        error = seconds / measured - 1
        rows.append({"variant": variant, "probe_s": seconds, "main_s": measured,
                     "main_window_s": window, "error": error})  # fmt: skip
        print(
            f"{variant}: probe {seconds * 1e3:.2f} ms/step, main {measured * 1e3:.2f} ms/step "
            f"(median window {window * 1e3:.2f}): {error:+.1%}"
        )
    if not rows:
        print("no variant has both a planned probe point and main runs")
        return 1
    worst = max(abs(r["error"]) for r in rows)
    mean = statistics.fmean(abs(r["error"]) for r in rows)
    verdict = "met" if worst <= GOAL else "NOT met"
    print(
        f"probe cost {probe.seconds:.1f} s on {probe.device} ({len(probe.points)} points); "
        f"step-time error mean {mean:.1%}, worst {worst:.1%} (goal <= {GOAL:.0%}: {verdict})"
    )
    if args.json is not None:
        summary = {"rows": rows, "probe_seconds": probe.seconds, "worst": worst, "mean": mean}
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


def direct(plan_path: Path, repeats: int) -> int:
    import torch

    from ablations.plan.io import load_plan
    from ablations.run.records import RunSpec
    from ablations.training.driver import execute
    from ablations.workers.probe_point import measure

    torch.set_num_threads(1)
    plan = load_plan(plan_path)
    spec = RunSpec.of(
        plan, "direct", run_id="direct", variant="control", category="essential",
        phase="main", seed=plan.seeds[0], params=plan.control_params,
        steps=plan.workload.steps, checkpoint=None,
    )  # fmt: skip
    measure(spec, plan.probe.steps, "warm-up")  # the corpus read, the allocator
    probed, driven = [], []
    for _ in range(repeats):
        probed.append(measure(spec, plan.probe.steps, "direct").step_seconds or float("nan"))
        record = execute(spec)
        driven.append(record.timings.train / max(1, record.steps_done))
    p, d = statistics.median(probed), statistics.median(driven)
    error = p / d - 1
    print(
        f"direct, one process, one thread: probe {p * 1e3:.2f} ms/step ({plan.probe.steps} "
        f"steps), driver {d * 1e3:.2f} ms/step ({plan.workload.steps} steps): {error:+.1%} "
        f"(median of {repeats}; goal <= {GOAL:.0%}: {'met' if abs(error) <= GOAL else 'NOT met'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
