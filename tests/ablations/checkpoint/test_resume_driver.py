"""End to end with the driver: a run killed mid-way resumes in a new process, bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablations.checkpoint.commit import COMMIT
from ablations.run.records import RunRecord, RunSpec
from ablations.workers.jobs import run_spec
from tests.ablations.checkpoint.conftest import make_spec
from tests.ablations.checkpoint.workloads import CRASH_AT

ROOT = Path(__file__).resolve().parents[3]
RUN = (
    "import sys; from ablations.run.records import RunSpec; "
    "from ablations.workers.jobs import run_spec; "
    "print(run_spec(RunSpec.model_validate_json(sys.stdin.read())).model_dump_json())"
)


def _child(spec: RunSpec, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN],
        input=spec.model_dump_json(),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )


def _spec(tmp_path: Path, name: str) -> RunSpec:
    spec = make_spec(f"file://{tmp_path}/{name}-ckpt", interval={"steps": 10})
    crashing = spec.with_workload(
        entry="tests.ablations.checkpoint.workloads:CrashingDigits",
        eval_every=15,  # evaluations inside the resumed stretch, not on save steps
    )
    return crashing.model_copy(update={"out_dir": str(tmp_path / name)})


@pytest.mark.slow  # fault injection: a worker process killed mid-run
def test_killed_run_resumes_in_a_new_process_bitwise_equal(tmp_path: Path) -> None:
    reference = run_spec(_spec(tmp_path, "reference"))
    assert reference.status == "accepted" and reference.checkpoint.saves == 4

    spec = _spec(tmp_path, "resumed")
    commit = tmp_path / "resumed-ckpt" / "camp" / "run-a" / "step-00000020" / COMMIT
    killed = _child(spec, {CRASH_AT: f"25:{commit}"})
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert commit.exists()

    done = _child(spec)
    assert done.returncode == 0, done.stderr[-2000:]
    resumed = RunRecord.model_validate_json(done.stdout.strip().splitlines()[-1])
    assert resumed.status == "accepted" and resumed.steps_done == 40
    assert resumed.checkpoint.resumed_from_step == 20 and resumed.checkpoint.failures == 0
    steps = "metrics/run-a.steps.csv"
    assert (tmp_path / "resumed" / steps).read_text() == (
        tmp_path / "reference" / steps
    ).read_text()
    assert resumed.metrics == reference.metrics  # float equality
    assert resumed.evaluations == reference.evaluations
    assert (tmp_path / "resumed/predictions/run-a.csv").read_bytes() == (
        tmp_path / "reference/predictions/run-a.csv"
    ).read_bytes()
