"""`ablate probe` on CPU: every point with its peak memory, a stop at the first failure, the
probed step times in the projection, `slots_per_device: auto`, and bad input (exit 2)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ablations.budget import assess_plan
from ablations.cli import main
from ablations.plan.infrastructure import ResourcesSection
from ablations.plan.io import load_plan
from ablations.probe.sweep import ProbeResult, read
from ablations.run.records import MemoryPeak
from ablations.slots.devices import plan_slots, slots_that_fit
from ablations.workers.probe_point import ProbePoint

PHASES = {"build", "train", "evaluate", "checkpoint"}


def probe_plan(demo_data: dict[str, Any], **workload: Any) -> dict[str, Any]:
    data = demo_data
    data["workload"].update(workload)
    data["factors"] = {"width": {"category": "essential", "levels": [16]}}
    data["probe"] = {"batch_sizes": [1, 2, 4, 8], "steps": 3}
    data["resources"] = {"devices": 1}
    return data


def probe_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["probe", *args, "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


@pytest.mark.slow  # an end-to-end subprocess or worker start: make test, not make check
def test_probe_reports_every_point_with_peak_memory(
    demo_data: dict[str, Any],
    write_plan: Callable[[Any], Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = probe_plan(demo_data)
    data["workload"]["entry"] = "ablations.workloads.charlm:CharLMWorkload"
    data["workload"]["params"] = {
        "n_layer": 1,
        "n_embd": 16,
        "n_head": 2,
        "block_size": 16,
        "batch_size": 8,
        "corpus_bytes": 200_000,
        "eval_bytes": 512,
    }
    data["workload"]["expected_inputs"] = None
    data["control"] = {"params": {"dropout": 0.0}}
    data["factors"] = {"dropout": {"category": "essential", "levels": [0.1]}}
    data["metric"] = {"name": "val_loss", "direction": "minimize", "threshold": 9.0,
                      "useful_effect": 0.1}  # fmt: skip
    plan = write_plan(data)
    out = probe_json(capsys, str(plan), "--variants", "control", "--out", str(tmp_path / "p"))
    points = [ProbePoint.model_validate(p) for p in out["points"]]
    grid = {(p.group, p.batch_size) for p in points}
    assert grid == {(g, b) for g in ("seq4", "seq8", "seq16") for b in (1, 2, 4, 8)}
    for p in points:
        assert p.ok and p.variant == "control"
        assert p.inputs == 3 * p.batch_size and p.step_seconds is not None
        assert set(p.memory) == PHASES and all(m.reserved > 0 for m in p.memory.values())
    assert [p.group for p in points if p.planned] == ["seq16"]  # batch 8 on the runs' length
    assert out["memory_source"] == "process RSS (CPU)"
    assert out["largest_safe_batch"] == {"seq4": 8, "seq8": 8, "seq16": 8}
    assert out["memory_class_gb"] == 24
    written = read(tmp_path / "p" / "probe.json")
    assert written.points == points
    assert "process RSS (CPU)" in (tmp_path / "p" / "PROBE.md").read_text()


def test_probe_stops_at_the_first_out_of_memory_and_names_it(
    demo_data: dict[str, Any], write_plan: Callable[[Any], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    data = probe_plan(demo_data, entry="tests.faults.workloads:ProbeOOM")
    data["workload"]["params"]["oom_at_batch"] = 4
    data["workload"]["params"]["batch_size"] = 2
    assert main(["probe", str(write_plan(data)), "--variants", "width=16"]) == 0
    out = capsys.readouterr().out
    assert "OUT OF MEMORY in train: OutOfMemoryError" in out
    assert "stopped: width=16 / all at batch 4" in out
    assert "largest safe batch: all 2" in out
    rows = [line.split("  ") for line in out.splitlines() if line.startswith("width=16  all")]
    assert [r[2] for r in rows] == ["1", "2", "4"]  # batch 8 never tried


def _result(step_seconds: float, campaign: str = "digits-demo") -> ProbeResult:
    peak = {"train": MemoryPeak(allocated=2 * 10**9, reserved=3 * 10**9)}
    point = ProbePoint(variant="control", group="all", batch_size=64, planned=True, steps=6,
                       inputs=384, build_seconds=2.0, step_seconds=step_seconds,
                       eval_seconds=0.5, checkpoint_seconds=0.1, memory=peak)  # fmt: skip
    return ProbeResult(campaign_id=campaign, plan_hash="h", device="cuda:0", device_name="H200",
                       memory_source="cuda allocator", margin=0.2, steps=6,
                       points=[point])  # fmt: skip


def test_projection_uses_probed_step_times(
    demo_data: dict[str, Any], write_plan: Callable[[Any], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    plan_path = write_plan(demo_data)
    plan = load_plan(plan_path)
    base = assess_plan(plan)
    probed = assess_plan(plan, probe=_result(0.5))
    assert (base.source, probed.source) == ("plan estimate", "probe")
    assert probed.projection is not None and probed.projection.estimate.step_seconds == 0.5
    assert probed.busy_hours > base.busy_hours
    # found beside the plan by `ablate plan` and `ablate budget`
    (plan_path.parent / "probe.json").write_text(_result(0.5).model_dump_json())
    assert main(["budget", str(plan_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == "probe"
    assert main(["plan", str(plan_path)]) == 0
    assert "projected from the probed step times" in capsys.readouterr().out
    assert _result(0.5).memory_class() == 24  # 3 GB x 1.2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not an `ablate probe` probe.json"),
        ('{"campaign_id": "x"}', "is not an `ablate probe` probe.json"),
        (_result(0.1, campaign="other").model_dump_json(), "is of campaign 'other'"),
    ],
)
def test_bad_probe_input_exits_2(
    demo_data: dict[str, Any],
    write_plan: Callable[[Any], Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    message: str,
) -> None:
    plan = write_plan(demo_data)
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    for command in ("budget", "plan"):
        assert main([command, str(plan), "--probe", str(bad)]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert main(["budget", str(plan), "--probe", str(tmp_path / "missing.json")]) == 2
    assert "No such file" in capsys.readouterr().err


def test_unknown_probe_variant_exits_2(
    demo_data: dict[str, Any], write_plan: Callable[[Any], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["probe", str(write_plan(demo_data)), "--variants", "nope"]) == 2
    assert "--variants: unknown ['nope']" in capsys.readouterr().err


def test_slots_per_device_auto() -> None:
    gb = 10**9
    assert slots_that_fit(141 * gb, 10 * gb, 0.2, cap=4) == 4  # capped by the plan
    assert slots_that_fit(141 * gb, 30 * gb, 0.2, cap=8) == 3  # 141 / (30.6 x 1.2)
    assert slots_that_fit(24 * gb, 30 * gb, 0.2, cap=4) == 1  # never 0
    auto = ResourcesSection(devices=2, slots_per_device="auto")
    assert len(plan_slots(auto, probe_peak=gb)) == 2  # CPU: slots follow the cores
    assert len(plan_slots(ResourcesSection(devices=2, slots_per_device=2))) == 4
