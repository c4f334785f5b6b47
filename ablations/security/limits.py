"""The caps on what one plan may ask of a machine: set by whoever runs the process, never the plan.

A plan is input, and through `ablate serve` or a work pool it is anyone's input: a few
kilobytes of YAML can declare millions of runs, or one run of 10^12 steps. So the caps come
from the process: `--max-runs` and `--max-steps` on `ablate`'s commands, or the environment
(`ABLATE_MAX_RUNS`, `ABLATE_MAX_STEPS`: how `ablate serve` hands them to its flow runs and
how a pool host is given them), else the defaults below. A plan may only lower them
(`resources.max_runs`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ablations.errors import InputError

MAX_RUNS_ENV = "ABLATE_MAX_RUNS"
MAX_STEPS_ENV = "ABLATE_MAX_STEPS"
DEFAULT_MAX_RUNS = 10_000
"""Runs (variants x seeds) a plan may declare: above a small ablation (the demo has 75),
below what a machine can build, record and train before anyone notices (a 41 000-run plan
trained 293 runs in 90 s before it was stopped)."""
DEFAULT_MAX_STEPS = 1_000_000
"""Training steps of one run: a long fine-tune, not a run that never ends."""


@dataclass(frozen=True)
class Limits:
    """What this process lets one plan ask for."""

    max_runs: int = DEFAULT_MAX_RUNS
    """The most runs a plan may declare."""
    max_steps: int = DEFAULT_MAX_STEPS
    """The most training steps of one run (`workload.steps`)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """The caps from `ABLATE_MAX_RUNS` / `ABLATE_MAX_STEPS`, else the defaults;
        `InputError` naming the variable when one is not a whole number >= 1."""
        env = os.environ if environ is None else environ
        return cls(
            max_runs=_whole(env, MAX_RUNS_ENV, DEFAULT_MAX_RUNS),
            max_steps=_whole(env, MAX_STEPS_ENV, DEFAULT_MAX_STEPS),
        )

    def install(self) -> None:
        """Make these the caps of this process and of the processes it starts (slot workers,
        a served campaign's flow runs), through the environment."""
        os.environ[MAX_RUNS_ENV] = str(self.max_runs)
        os.environ[MAX_STEPS_ENV] = str(self.max_steps)


def _whole(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"{name}: expected a whole number >= 1, got {text[:40]!r}")
    return value


def process_limits() -> Limits:
    """This process's caps (`Limits.from_env`): read where a plan is admitted."""
    return Limits.from_env()
