"""bench/gpu_size.py's logic without a card: the plans it writes, the figures it reads from a
campaign's completion records and the card's samples, and its verdict on `auto`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ablations.plan.model import parse_plan, plan_hash
from ablations.plan.runs import planned_runs
from tests.bench.scripts import load

size = load("gpu_size")
MIB = 2**20


@pytest.mark.parametrize("cpu", [True, False])
@pytest.mark.parametrize("slots", [1, 2, 4])
def test_the_plans_are_valid_and_differ_only_in_their_slots(cpu: bool, slots: int) -> None:
    plan = parse_plan(size.size_plan(slots, cpu, 40))
    runs = planned_runs(plan, plan_hash(plan))
    assert [r.phase for r in runs].count("main") == 8 and [r.phase for r in runs].count(
        "pilot"
    ) == 1
    if cpu:
        assert plan.resources.devices == slots
    else:
        assert (plan.resources.devices, plan.resources.slots_per_device) == ("auto", slots)
        assert plan.workload.params["precision"] == "bf16"
    other = parse_plan(size.size_plan(slots % 4 + 1, cpu, 40))
    assert plan.workload == other.workload and plan.factors == other.factors


def record(
    run: str, phase: str, start: float, end: float, peak: int, **extra: Any
) -> dict[str, Any]:
    return {
        "run_id": run, "phase": phase, "status": "accepted", "started_at": start,
        "ended_at": end, "steps_done": 40, "step_seconds": 0.05, "slot": "cuda:0#0",
        "memory": {"train": {"allocated": peak // 2, "reserved": peak}},
        "checkpoint": {"resumed_from_step": extra.get("resumed")},
    }  # fmt: skip


def test_figures_come_from_the_main_phase_and_the_samples_within_it(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    rows = [
        record("control-s0-pilot", "pilot", 0.0, 5.0, 900 * MIB),  # before the main phase
        record("control-s0", "main", 10.0, 14.0, 1000 * MIB, resumed=10),
        record("dropout-s0", "main", 10.0, 16.0, 1200 * MIB),
        record("dropout-s1", "main", 14.0, 20.0, 1100 * MIB),
    ]
    for row in rows:
        (records / f"{row['run_id']}.json").write_text(json.dumps(row))
    samples = [(3.0, 5.0, 1), (11.0, 80.0, 5 * MIB), (19.0, 90.0, 7 * MIB), (25.0, 1.0, 9 * MIB)]
    figures = size.campaign_figures(tmp_path, samples, tokens_per_step=1000)
    assert figures["main_runs"] == 3 and figures["runs"] == 4
    assert figures["main_span_s"] == 10.0
    assert figures["runs_per_hour"] == pytest.approx(3 / 10 * 3600)
    assert figures["tokens_per_s"] == pytest.approx((30 + 40 + 40) * 1000 / 10)
    assert figures["peak_reserved_per_run"] == 1200 * MIB
    assert figures["gpu_util_mean"] == pytest.approx(85.0)  # the two samples inside 10..20 s
    assert figures["card_used_max"] == 7 * MIB
    assert figures["statuses"] == {"accepted": 4}


@pytest.mark.parametrize(
    ("rates", "auto", "said"),
    [
        ({1: 100.0, 2: 150.0, 4: 140.0}, 2, "auto picks 2: the fastest"),
        ({1: 100.0, 2: 150.0, 4: 140.0}, 4, "auto picks 4, NOT the fastest (7% fewer runs/h)"),
        ({1: 100.0, 2: 150.0}, 3, "auto picks 3, which was not measured"),
        ({}, 1, "no campaign finished"),
    ],
)
def test_the_verdict_on_auto(rates: dict[int, float], auto: int, said: str) -> None:
    results = {k: {"runs_per_hour": r} for k, r in rates.items()}
    assert said in size.verdict(results, auto)


def test_the_table_compares_each_peak_with_the_probe() -> None:
    results = {1: {"wall_s": 60.0, "statuses": {"accepted": 9}, "runs_per_hour": 720.0,
                   "peak_reserved_per_run": 1500 * MIB, "gpu_util_mean": 97.5},
               2: {"wall_s": 90.0, "capped": True, "statuses": {}}}  # fmt: skip
    lines = size.table(results, predicted=1000 * MIB)
    assert len(lines) == 4
    assert lines[2].startswith("| 1 | 60 | 9 accepted | 720 |")
    assert "| 1500 | 1.50x |" in lines[2] and "98%" in lines[2]
    assert "(capped)" in lines[3] and "| - |" in lines[3]


def test_without_a_card_nothing_is_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(size.shutil, "which", lambda name: None)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # import fails
    with size.Sampler(period=0.01) as sampler:
        pass
    assert sampler.source == "none" and sampler.samples == []
