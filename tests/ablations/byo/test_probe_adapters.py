"""`ablate probe` on code that runs its own loop: each variant timed as planned through its
adapter (the session a run reports to), every phase's time and memory measured, and what the
probe could not sweep said in the output instead of a made-up largest safe batch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ablations.cli import main
from ablations.probe.sweep import ProbeResult, read, summary_lines
from ablations.run.records import MemoryPeak, RunSpec
from ablations.workers.probe_point import ProbePoint, probe_variant
from tests.ablations.byo import test_command, test_hf, test_lightning

PHASES = {"build", "train", "evaluate", "checkpoint"}


def probed(spec: RunSpec, steps: int = 4) -> ProbePoint:
    """The one point `probe_variant` gives an adapter's spec (batch sizes are not swept)."""
    points = probe_variant(spec.model_copy(update={"out_dir": None}), [1, 2, 4], steps)
    assert len(points) == 1
    point = points[0]
    assert point.ok, point.error
    assert point.planned and point.steps == steps and point.group == "all"
    assert point.build_seconds and point.step_seconds and point.checkpoint_seconds
    assert point.eval_seconds is not None
    return point


def plan_data(tmp_path: Path) -> dict[str, Any]:
    return {
        "campaign": {"id": "probe-cmd", "question": "Does the step size matter?", "decision": "d"},
        "workload": {
            "command": ["python", str(test_command.SCRIPT), "--lr", "{lr}"],
            "steps": 100,
            "eval_every": 25,
        },
        "control": {"params": {"lr": 0.05}},
        "factors": {"lr": {"category": "essential", "levels": [0.1]}},
        "seeds": [0, 1],
        "metric": {"name": "mse", "direction": "minimize", "threshold": 0.5, "useful_effect": 0.05},
        "probe": {"steps": 5, "batch_sizes": [1, 2]},
        "resources": {"devices": 1},
    }


@pytest.mark.slow  # a slot worker (torch imported) and two programs: about 15 s
def test_a_command_is_probed_as_planned_and_says_what_was_not_swept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(plan_data(tmp_path)))
    assert main(["probe", str(plan), "--out", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "not swept: workload.command runs its own loop" in out
    assert "probe.batch_sizes and input groups are ignored" in out
    assert "evaluation: the program reports after evaluating" in out
    assert "largest safe batch:" not in out
    rows = [line for line in out.splitlines() if line.startswith(("control  all", "lr=0.1  all"))]
    assert len(rows) == 2 and all("planned, through workload.command" in r for r in rows)
    result = read(tmp_path / "p" / "probe.json")
    assert result.memory_source == "program RSS (CPU)" and result.adapter == "command"
    for point in result.points:
        assert point.ok and point.planned and point.steps == 5 and point.batch_size == 0
        assert point.step_seconds and point.build_seconds and point.checkpoint_seconds
        assert point.memory["train"].reserved > 10 * 2**20  # a Python process, at least
    assert result.largest_safe_batch() == {} and result.memory_class() == 24
    assert result.estimate(load_estimate(plan)).step_seconds == pytest.approx(
        sum(p.step_seconds or 0 for p in result.points) / 2
    )  # what `ablate plan` and `ablate budget` then project from
    assert "not swept" in (tmp_path / "p" / "PROBE.md").read_text()


def load_estimate(plan: Path) -> Any:
    from ablations.plan.io import load_plan

    return load_plan(plan).budget.estimate


def test_a_command_that_fails_is_a_failed_point_naming_its_phase(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise SystemExit('no data at /nowhere')\n")
    spec = test_command.spec_for(None, tmp_path, command=["python", str(broken)], out_dir=None)
    [point] = probe_variant(spec, [1, 2], 4)
    assert not point.ok and point.error is not None and point.failed_phase == "build"
    assert "exited with 1: no data at /nowhere" in point.error.message
    assert point.adapter == "command" and point.steps == 0
    result = ProbeResult(
        campaign_id="c", plan_hash="h", device="cpu", device_name="cpu",
        memory_source="program RSS (CPU)", margin=0.2, steps=4, points=[point],
    )  # fmt: skip
    lines = summary_lines(result)
    assert "failed: control in build: WorkloadError: the command exited with 1" in lines[1]
    assert not any("larger batches" in line for line in lines)


def test_a_command_point_in_process(tmp_path: Path) -> None:
    point = probed(test_command.spec_for(None, tmp_path, params={"lr": 0.05, "batch_size": 8}))
    assert point.adapter == "command" and point.batch_size == 8 and point.inputs == 32
    assert {"build", "train", "checkpoint"} <= set(point.memory)  # the program's peaks


@pytest.mark.slow  # imports Lightning: about 10 s
def test_lightning_is_probed_through_its_callback(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    point = probed(test_lightning.spec_for(tmp_path, params={"lr": 0.05, "batch_size": 16}))
    assert point.adapter == "lightning" and point.batch_size == 16
    assert set(point.memory) == PHASES and all(m.reserved > 0 for m in point.memory.values())


@pytest.mark.slow  # imports transformers: about 15 s
def test_a_trainer_is_probed_through_its_callback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("transformers")
    spec = test_hf.spec_for(tmp_path, hf_trainer=f"{test_hf.TINY}:make_classifier", params={})
    point = probed(spec)
    assert point.adapter == "hf_trainer" and point.batch_size == 0  # no `batch_size` param
    assert set(point.memory) == PHASES
    printed = capsys.readouterr()
    assert printed.out == "" and "train_runtime" in printed.err  # stdout is `--json`'s


def test_a_command_on_a_gpu_has_no_memory_and_no_card_class() -> None:
    point = ProbePoint(
        variant="control", group="all", batch_size=0, planned=True, steps=6, step_seconds=0.1,
        adapter="command",
    )  # fmt: skip
    result = ProbeResult(
        campaign_id="c", plan_hash="h", device="cuda:0", device_name="H200",
        memory_source="not measured", margin=0.2, steps=6, points=[point],
    )  # fmt: skip
    assert result.memory_class() is None and not result.memory_measured
    lines = "\n".join(summary_lines(result))
    assert "memory not measured: a command's card memory is its own process's" in lines
    assert "a 24 GB card" not in lines
    assert json.loads(point.model_dump_json())["adapter"] == "command"


def test_a_built_in_point_keeps_its_json() -> None:
    point = ProbePoint(variant="control", group="all", batch_size=4, memory={"train": MemoryPeak()})
    assert "adapter" not in json.loads(point.model_dump_json())
