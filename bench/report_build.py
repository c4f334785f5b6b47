"""How long the report takes to build: the demo's folder, and a crafted 60-run campaign.

The demo folder (`make demo` writes `demo-out/`) is copied to a temporary folder and its
report rebuilt from the folder alone, as `ablate report DIR` does. The 60-run campaign is
written here: control + 4 variants x 12 seeds, 300 steps, an evaluation every 25 (one
seed of one variant stopped by a NaN loss at step 120), records and metrics files only.

Each build is timed in parts: the inputs (effects, looks, error analysis), the plots
(effects, curves, per-class, timeline), REPORT.md, REPORT.html, and the report artifact.

    .venv/bin/python bench/report_build.py [--demo demo-out] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from ablations.campaign.folder import REPORT_HTML
from ablations.plan.model import parse_plan, plan_hash
from ablations.plan.runs import planned_runs
from ablations.report import build_report
from ablations.report.artifact import report_artifact
from ablations.report.curves import plot_curves
from ablations.report.from_folder import report_inputs
from ablations.report.inputs import ReportRun, assemble_inputs
from ablations.run.records import RunRecord, Stop

STEPS, EVAL_EVERY, SEEDS = 300, 25, 12
PLAN: dict[str, Any] = {
    "campaign": {"id": "sixty", "question": "Which of four changes matter?", "decision": "d"},
    "workload": {"steps": STEPS, "eval_every": EVAL_EVERY},
    "control": {"params": {"width": 64, "depth": 2, "dropout": 0.1, "lr": 0.01}},
    "factors": {
        "width": {"category": "essential", "levels": [16, 128]},
        "depth": {"category": "useful", "levels": [1]},
        "dropout": {"category": "useful", "levels": [0.3]},
    },
    "seeds": list(range(SEEDS)),
    "metric": {"name": "accuracy", "threshold": 0.5, "useful_effect": 0.01},
    "pilot": {"variants": ["control"], "seeds": [0], "steps": 50},
}
OFFSET = {
    "control": 0.0,
    "width=16": -0.03,
    "width=128": 0.004,
    "depth=1": 0.0,
    "dropout=0.3": -0.002,
}


def _write(path: Path, header: str, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "\n" + "\n".join(rows) + "\n")


def write_sixty(out_dir: Path) -> list[ReportRun]:
    """plan.yaml, metrics and records of the crafted campaign; returns its runs."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "plan.yaml").write_text(yaml.safe_dump(PLAN, sort_keys=False))
    plan = parse_plan(PLAN)
    runs = []
    for i, planned in enumerate(planned_runs(plan, plan_hash(plan))):
        seed, offset = planned.seed, OFFSET[planned.variant]
        nan_at = 120 if (planned.variant, seed) == ("dropout=0.3", 3) else None
        end = nan_at or planned.steps
        losses = [2.3 / (1 + s / 20) + 0.01 * math.sin(s + seed) for s in range(1, end + 1)]
        if nan_at:
            losses[-1] = math.nan
        values = {
            s: 0.9 + 0.08 * s / STEPS + offset + 0.003 * math.sin(3 * seed)
            for s in range(EVAL_EVERY, end + 1, EVAL_EVERY)
        }
        files = {
            "steps": f"metrics/{planned.run_id}.steps.csv",
            "evals": f"metrics/{planned.run_id}.evals.csv",
        }
        _write(
            out_dir / files["steps"], "step,loss", [f"{s},{v!r}" for s, v in enumerate(losses, 1)]
        )
        _write(out_dir / files["evals"], "step,accuracy", [f"{s},{v!r}" for s, v in values.items()])
        stop = Stop(rule="non_finite_loss", message="loss is nan", step=nan_at) if nan_at else None
        record = RunRecord(
            run_id=planned.run_id,
            variant=planned.variant,
            seed=seed,
            category=planned.category,
            phase=planned.phase,
            status="stopped" if stop else "accepted",
            stop=stop,
            steps_done=end,
            metrics={} if stop else {"accuracy": values[max(values)]},
            evaluations=[{"step": float(s), "accuracy": v} for s, v in values.items()],
            slot=f"cpu-{i % 2}",
            started_at=1000.0 + 20 * i,
            ended_at=1015.0 + 20 * i,
            artifacts=files,
        )
        runs.append(ReportRun(planned=planned, record=record))
    return runs


def _timed(parts: dict[str, list[float]], name: str, call: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = call()
    parts.setdefault(name, []).append(time.perf_counter() - started)
    return result


def bench(name: str, out_dir: Path, inputs_of: Callable[[], Any], repeat: int) -> None:
    parts: dict[str, list[float]] = {}
    for _ in range(repeat):
        inputs = _timed(parts, "inputs", inputs_of)
        _timed(parts, "plots + REPORT.md + REPORT.html", partial(build_report, out_dir, inputs))
        _timed(parts, "artifact", partial(report_artifact, out_dir))
        curves = partial(plot_curves, out_dir, inputs.runs, inputs.metric, out_dir / "c.png")
        _timed(parts, "(curves.png alone, again)", curves)
    total = sum(statistics.median(v) for k, v in parts.items() if not k.startswith("("))
    said = ", ".join(f"{k} {statistics.median(v):.2f} s" for k, v in parts.items())
    size = (out_dir / REPORT_HTML).stat().st_size / 1e6
    print(
        f"{name}: {len(inputs.runs)} runs, report {total:.2f} s (median of {repeat}: {said}); "
        f"REPORT.html {size:.2f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo", type=Path, default=Path("demo-out"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if (args.demo / "manifest.json").is_file():
            demo = Path(tmp) / "demo"
            shutil.copytree(args.demo, demo, ignore=shutil.ignore_patterns("checkpoints", "models"))
            bench("demo", demo, lambda: report_inputs(demo), args.repeat)
        else:
            print(f"demo: {args.demo}/manifest.json not found (run `make demo` first); skipped")
        sixty = Path(tmp) / "sixty"
        runs = write_sixty(sixty)
        plan = parse_plan(PLAN)
        bench("60 runs", sixty, lambda: assemble_inputs(sixty, plan, runs), args.repeat)


if __name__ == "__main__":
    main()
