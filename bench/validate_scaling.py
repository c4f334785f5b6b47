"""Plan validation, `ablate plan` and `ablate budget` on very large plans: linear, not quadratic.

Builds the demo plan with N seeds (validation only) and with N factors of one level each
(`ablate plan` and `ablate budget`: variants, run ids, projection), writes each as YAML (flow
style, as a generator would) and times the commands in-process, at two sizes, so the growth
factor shows whether the cost is linear (x10 size -> ~x10 time) or quadratic (~x100).

    .venv/bin/python bench/validate_scaling.py

Prints one line per case; `--check` exits 1 when 10^5 seeds take 2 s or more to validate.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from ablations.cli import main
from ablations.plan.io import load_plan

DEMO = Path(__file__).resolve().parents[1] / "ablations" / "recipes" / "demo.yaml"
SEEDS_GOAL_S = 2.0
"""10^5 seeds validate in under 2 s (issue 15)."""


def _with_seeds(base: dict[str, Any], n: int) -> dict[str, Any]:
    data = copy.deepcopy(base)
    data["seeds"] = list(range(n))
    data["pilot"] = {"seeds": [0]}
    return data


def _with_factors(base: dict[str, Any], n: int) -> dict[str, Any]:
    data = copy.deepcopy(base)
    data["control"]["params"].update({f"p{i}": 0 for i in range(n)})
    data["factors"] = {f"p{i}": {"category": "exploratory", "levels": [1]} for i in range(n)}
    data["seeds"] = [0]
    data["pilot"] = {"variants": ["control"]}
    return data


def _flow_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, default_flow_style=True, width=1 << 16)


def _timed(action: Any) -> float:
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        action()
    return time.perf_counter() - started


def main_bench() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    base = yaml.safe_load(DEMO.read_text())
    folder = Path(tempfile.mkdtemp(prefix="validate-scaling-"))
    seeds_s = 0.0
    for n in (10_000, 100_000):
        path = folder / f"seeds-{n}.yaml"
        path.write_text(
            yaml.safe_dump(_with_seeds(base, n), default_flow_style=True, width=1 << 16)
        )
        seconds = _timed(lambda p=path: load_plan(p, check_workload=False))
        seeds_s = seconds
        print(f"validate {n:>7} seeds ({path.stat().st_size} bytes): {seconds:6.2f} s")
    for n in (1_000, 10_000):
        path = folder / f"factors-{n}.yaml"
        path.write_text(
            yaml.safe_dump(_with_factors(base, n), default_flow_style=True, width=1 << 16)
        )
        for command in ("plan", "budget"):
            seconds = _timed(lambda c=command, p=path: main([c, str(p)]))
            print(f"{command:<8} {n:>7} factors ({path.stat().st_size} bytes): {seconds:6.2f} s")
    if args.check and seeds_s >= SEEDS_GOAL_S:
        print(f"FAIL: 10^5 seeds took {seeds_s:.2f} s (goal < {SEEDS_GOAL_S} s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main_bench())
