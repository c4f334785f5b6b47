"""How well `ablate probe`'s step times predict the main phase's, per variant.

    ablate probe ablations/recipes/charlm.yaml --out P
    ablate run ablations/recipes/charlm.yaml --out C
    python bench/probe_accuracy.py --probe P/probe.json --campaign C

For each variant: the probe's planned point (the runs' own group and batch size) against the
main runs' measured step time, as the projection measures it (training seconds / steps) and as
the median warm window (`step_seconds`). Goal: within 15% (judged on training seconds / steps,
what `ablate plan` projects). Also prints the probe's own cost. Writes `--json` when given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from ablations.probe import read

GOAL = 0.15


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", type=Path, required=True)
    parser.add_argument("--campaign", type=Path, required=True)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
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


if __name__ == "__main__":
    sys.exit(main())
