"""The same runs through Ray Tune, for `campaign_overhead.py` (run in the Ray venv, not ours).

    /tmp/ray-venv/bin/python bench/ray_tune_runs.py RUNS.json --slots N --threads T

Each run is one trial of a grid over the run list, `tune.with_resources(..., {"cpu": 1})` on a
local Ray with `num_cpus=slots`, so at most `slots` trials train at once, like the campaign's
slots. Prints one JSON line: total seconds (ray.init to the end of fit), fit seconds, trials.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bare_training, beside this file


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", type=Path)
    parser.add_argument("--slots", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    args = parser.parse_args()
    runs = json.loads(args.runs.read_text())
    threads = args.threads
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    started = time.perf_counter()
    import ray
    from ray import tune

    ray.init(num_cpus=args.slots, include_dashboard=False, log_to_driver=False)

    def trainable(config: dict[str, Any]) -> dict[str, float]:
        import torch
        from bare_training import train_bare

        torch.set_num_threads(threads)  # the campaign's slot threads, not Ray's OMP default 1
        return {"accuracy": train_bare(config["run"])}

    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        param_space={"run": tune.grid_search(runs)},
        tune_config=tune.TuneConfig(max_concurrent_trials=args.slots),
        run_config=tune.RunConfig(storage_path=str(args.runs.parent / "ray-results"), verbose=0),
    )
    fit_started = time.perf_counter()
    results = tuner.fit()
    fit_s = time.perf_counter() - fit_started
    errors = len(results.errors)
    ray.shutdown()
    print(
        json.dumps(
            {
                "total_s": time.perf_counter() - started,
                "fit_s": fit_s,
                "trials": len(results),
                "errors": errors,
                "ray": ray.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
