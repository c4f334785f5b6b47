"""How fast `ablate` answers: `ablate --help` and `ablate validate PLAN`, wall time and imports.

    .venv/bin/python bench/cli_latency.py [--runs 5] [--plan ablations/recipes/demo.yaml] [--check]

Each command runs once to write its bytecode (as an installed package has it; the suite's
`PYTHONDONTWRITEBYTECODE` is cleared), then `--runs` times as a user runs it, the `ablate`
script beside this interpreter; the median wall time is reported against its goal (#44:
0.3 s and 1 s). Once more under `python -X importtime`: the modules it imported, their
import time, the heaviest top-level packages, and any of the heavy libraries (torch, numpy,
scipy, pandas, matplotlib, prefect) that must not load for these commands. The load average
is printed beside the figures: on a shared machine they scale with it. `--check` exits 1 when
a median misses its goal or a heavy library loads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "numpy", "scipy", "pandas", "matplotlib", "prefect")
"""Libraries that cost a second or more to import: `--help` and `validate` need none."""
GOALS = {"--help": 0.3, "validate": 1.0}
"""Median wall seconds each command must stay within."""


@dataclass(frozen=True)
class Imports:
    """What one `-X importtime` run imported."""

    modules: int
    seconds: float
    """The sum of the top-level imports' cumulative times."""
    by_package: dict[str, float]
    """Top-level package -> cumulative seconds of its top-level imports."""
    packages: frozenset[str]
    """Every top-level package a module was imported from, however deep the import."""

    @property
    def heavy(self) -> list[str]:
        return [name for name in HEAVY if name in self.packages]


def parse_importtime(stderr: str) -> Imports:
    """`python -X importtime`'s lines (`import time: self | cumulative | name`, nesting shown
    by two spaces per level) as counts and seconds."""
    modules, total, by_package, packages = 0, 0.0, Counter[str](), set()
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        modules += 1
        package = name.strip().split(".")[0]
        packages.add(package)
        if name.startswith("  "):
            continue  # nested: counted in its top-level import
        seconds = int(cumulative) / 1e6
        total += seconds
        by_package[package] += seconds
    return Imports(modules, total, dict(by_package), frozenset(packages))


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(ROOT)}


def _ablate() -> Path:
    script = Path(sys.executable).with_name("ablate")
    if not script.is_file():
        raise SystemExit(f"no `ablate` script beside {sys.executable}: run `make venv`")
    return script


def wall_seconds(arguments: list[str], runs: int) -> list[float]:
    """Wall seconds of `ablate ARGUMENTS`, once to write bytecode, then `runs` times."""
    command = [str(_ablate()), *arguments]
    env = _environment()
    subprocess.run(command, env=env, cwd=ROOT, capture_output=True, check=True)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, env=env, cwd=ROOT, capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return times


def imports_of(arguments: list[str]) -> Imports:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(_ablate()), *arguments],
        env=_environment(), cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return parse_importtime(done.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per command")
    parser.add_argument("--plan", type=Path, default=ROOT / "ablations/recipes/demo.yaml")
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    args = parser.parse_args()
    commands = {"--help": ["--help"], "validate": ["validate", str(args.plan)]}
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} cores, load average {load:.1f}; median of {args.runs} runs")
    missed = []
    for name, arguments in commands.items():
        times = wall_seconds(arguments, args.runs)
        median = statistics.median(times)
        imports = imports_of(arguments)
        heaviest = sorted(imports.by_package.items(), key=lambda kv: -kv[1])[:4]
        print(
            f"ablate {name:<9} {median:.3f} s (goal {GOALS[name]} s; runs "
            f"{', '.join(f'{t:.2f}' for t in times)}); {imports.modules} modules imported in "
            f"{imports.seconds:.3f} s, heaviest "
            + ", ".join(f"{package} {seconds:.3f}" for package, seconds in heaviest)
            + f"; heavy libraries: {', '.join(imports.heavy) or 'none'}"
        )
        if median > GOALS[name] or imports.heavy:
            missed.append(name)
    if missed and args.check:
        print(f"over the goal: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
