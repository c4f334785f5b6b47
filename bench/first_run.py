"""The first campaign on a fresh Prefect home versus the second one on the same home.

    .venv/bin/python bench/first_run.py [--plan ablations/recipes/demo.yaml] [--cold]

Runs `ablate run PLAN` (a subprocess, as a user runs it) twice with one new, empty
PREFECT_HOME, each into a new folder, and times each from launch to exit. The first pays for
the temporary server's database: a copy of this user's migrated template when it exists
(flows/server_database.py), Prefect's migrations otherwise. `--cold` also starts from an
empty cache (XDG_CACHE_HOME), so the first run builds the template: the very first campaign
of a user who never ran `make venv`.

Prints one line; goal (issue 15): the first run at most 5 s slower than the second.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_SECONDS = 5.0


def _run(plan: Path, out: Path, env: dict[str, str]) -> float:
    command = [sys.executable, "-m", "ablations.cli", "run", str(plan), "--out", str(out)]
    started = time.perf_counter()
    result = subprocess.run(
        command, cwd=out.parent, env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"ablate run failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, default=ROOT / "ablations/recipes/demo.yaml")
    parser.add_argument("--cold", action="store_true", help="no template either")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="first-run-"))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(scratch / "prefect-home")
    if args.cold:
        env["XDG_CACHE_HOME"] = str(scratch / "cache")
    first = _run(args.plan.resolve(), scratch / "first", env)
    second = _run(args.plan.resolve(), scratch / "second", env)
    verdict = "ok" if first - second <= GOAL_SECONDS else "over the goal"
    print(
        f"first run on a fresh PREFECT_HOME{' and cache' if args.cold else ''}: {first:.1f} s; "
        f"second: {second:.1f} s; difference {first - second:+.1f} s "
        f"(goal <= {GOAL_SECONDS:.0f} s: {verdict})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
