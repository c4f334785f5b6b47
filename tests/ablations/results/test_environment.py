"""The manifest's environment: torch, CUDA and devices as the runs' processes saw them."""

from __future__ import annotations

from ablations.results.write import environment
from ablations.run.records import RunEnvironment, RunRecord


def _record(run_id: str, env: RunEnvironment | None) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        variant="control",
        seed=0,
        category="essential",
        phase="main",
        status="accepted",
        environment=env,
    )


def test_devices_and_cuda_come_from_the_runs() -> None:
    h200 = RunEnvironment(torch="2.13.0", cuda="12.8", device_name="NVIDIA H200")
    cpu = RunEnvironment(torch="2.13.0", cuda="12.8", device_name="cpu")
    env = environment([_record("a", h200), _record("b", cpu), _record("c", h200)])
    assert env.torch == "2.13.0" and env.cuda == "12.8"
    assert env.devices == ["NVIDIA H200", "cpu"]
    assert env.prefect and env.python


def test_without_run_environments_the_installed_torch_is_named() -> None:
    env = environment([_record("a", None)])
    assert env.torch and env.cuda is None and env.devices == ["cpu"]
