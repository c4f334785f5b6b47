"""The campaign flow on a real Prefect test server, with real training in slot workers."""

from __future__ import annotations

import errno
import itertools
import json
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.flows.conftest import paused_since, plan_text

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    from ablations.campaign.folder import MANIFEST
    from ablations.campaign.manifest import Manifest
    from flows.campaign import ablation_campaign

    data["checkpoint"]["store"] = f"file://{tmp_path}/ckpt"
    manifest = ablation_campaign(plan_yaml=plan_text(data), out_dir=str(tmp_path / "out"), **kwargs)
    # the flow returns the manifest the results step wrote, not a path to read back
    assert isinstance(manifest, Manifest)
    written = (tmp_path / "out" / MANIFEST).read_text()
    assert manifest.to_json() == written
    return dict(json.loads(written))


def test_two_cpu_slots_are_both_used_and_never_overlap(
    prefect_server: None, tmp_path: Path, tiny_plan: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ablations.plan import io as plan_io

    parses: list[str | None] = []
    parse = plan_io.parse_plan  # every plan text is parsed through it (`plan_from_text`)

    def counted(data: Any, source: str | None = None, **kwargs: Any) -> Any:
        parses.append(source)
        return parse(data, source, **kwargs)

    monkeypatch.setattr(plan_io, "parse_plan", counted)
    manifest = _run(tmp_path, tiny_plan)
    # A flow run from its form alone (the UI's, a work pool's) parses its plan once in its own
    # process, its name included (the results worker parses its copy in its own)
    assert parses == ["plan_yaml"]
    runs = [r for r in manifest["runs"] if r["status"] != "trimmed"]
    assert {r["slot"] for r in runs} == {"cpu#0", "cpu#1"}
    for slot in ("cpu#0", "cpu#1"):
        spans = sorted((r["started_at"], r["ended_at"]) for r in runs if r["slot"] == slot)
        assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(spans))
    assert all(r["device"] == "cpu" for r in runs)
    by_variant = {(r["variant"], r["phase"]): r["status"] for r in runs}
    assert by_variant[("keep_pixels=32", "main")] == "stopped"
    assert by_variant[("control", "main")] == "accepted"
    # Each pilot is the prefix of its main run: that run resumed where the pilot ended.
    pilots = {r["continues"]: r for r in manifest["runs"] if r["phase"] == "pilot"}
    resumed = [r for r in runs if r["run_id"] in pilots and r["status"] != "stopped"]
    assert resumed and all(r["start_step"] == 20 for r in resumed)
    assert all(r["checkpoint"]["resumed_from_step"] == 20 for r in resumed)
    assert all(pilots[r["run_id"]]["steps_done"] == 20 for r in resumed)
    csv = pd.read_csv(tmp_path / "out" / "runs.csv")
    assert len(csv) == len(manifest["runs"]) and set(csv["run_id"]) == {
        r["run_id"] for r in manifest["runs"]
    }


def test_a_run_failing_on_the_disk_stops_the_runs_still_training_at_their_step(
    prefect_server: None, tmp_path: Path, tiny_plan: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record of a run that stopped at once cannot be written (a full disk): the campaign
    fails, and the two runs still training are asked to commit their step and stop, recorded
    as interrupted (a rerun resumes them), instead of training to their end for a campaign
    that already failed."""
    tiny_plan["workload"].update(steps=200_000, eval_every=1000)  # minutes, uninterrupted
    tiny_plan["pilot"]["steps"] = 1000  # a pilot reaches the first evaluation (validate)
    tiny_plan["checkpoint"]["interval"] = {"steps": 100_000}
    tiny_plan["seeds"] = [0]
    tiny_plan["resources"]["devices"] = 3  # the three main runs start together
    real_replace = os.replace

    def full_for_keep_pixels(src: str, dst: str) -> None:
        if Path(dst).parent.name == "records" and Path(dst).name.startswith("keep_pixels"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), dst)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", full_for_keep_pixels)
    with pytest.raises(OSError, match="No space left on device"):
        _run(tmp_path, tiny_plan)
    records = [json.loads(p.read_text()) for p in (tmp_path / "out" / "records").glob("*.json")]
    main = {r["variant"]: r for r in records if r["phase"] == "main"}
    assert set(main) == {"control", "width=8"}  # keep_pixels=32's record is the one lost
    for record in main.values():
        assert record["status"] == "failed" and record["error"]["type"] == "Interrupted", record
        assert record["steps_done"] < 200_000


def test_ui_gate_applies_the_answer_given_through_the_client(
    prefect_server: None, tmp_path: Path, tiny_plan: dict[str, Any]
) -> None:
    from prefect.client.orchestration import get_client

    tiny_plan["gate"] = {"mode": "ui", "timeout_minutes": 5}
    answered: list[str] = []
    began = datetime.now(timezone.utc)

    def answer() -> None:
        with get_client(sync_client=True) as client:
            for _ in range(600):
                paused = paused_since(client, began)
                if paused:
                    refused = client.resume_flow_run(
                        paused[0].id, run_input={"decision": "trim", "drop": ["not-a-run"]}
                    )
                    assert refused.status.value == "REJECT"  # not a main run: refused
                    client.resume_flow_run(
                        paused[0].id,
                        run_input={"decision": "trim", "drop": ["width=8"], "note": "settled"},
                    )
                    answered.append(str(paused[0].id))
                    return
                time.sleep(0.5)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    manifest = _run(tmp_path, tiny_plan)
    thread.join(timeout=5)
    assert answered
    gate = manifest["gate"]
    assert gate["decision"] == "trim" and gate["source"] == "ui"
    assert "settled" in gate["reason"]
    # the person's drops are re-sized: the sizing shown is that of the variants kept
    assert {v["variant"] for v in gate["sizing"]["variants"]} == {"keep_pixels=32"}
    assert "recommended_projected_hours_after_trim" in gate["numbers"]
    trimmed = {r["variant"] for r in manifest["runs"] if r["status"] == "trimmed"}
    assert trimmed == {"width=8"}
    # What the UI shows: the dropped runs by name, every main run with the trimmed ones, and
    # a live view whose counts add up after the trim.
    from prefect.artifacts import Artifact

    gate_artifact = Artifact.get("gate-decision")
    assert gate_artifact is not None and "Dropped 2 runs:" in str(gate_artifact.data)
    assert "- width=8: seeds 0, 1 (every seed)" in str(gate_artifact.data)
    final = Artifact.get("final-runs")
    assert final is not None
    rows = json.loads(str(final.data))
    assert len(rows) == 6 and [r["status"] for r in rows].count("trimmed") == 2
    assert {r["reason"] for r in rows if r["status"] == "trimmed"} == {"trimmed at the gate"}
    progress = Artifact.get("campaign-progress")
    assert progress is not None and float(str(progress.data)) == 100.0
    assert "| Runs done | 6 |" in str(progress.description)
    assert "| Not run (trimmed, or not needed by a look) | 2 |" in str(progress.description)
    # the latest learning curves are those of the look that decided, not the one before
    curves = Artifact.get("learning-curves")
    assert curves is not None and curves.description == "after look 1 of 1: every variant decided"
    assert str(curves.data).startswith("### Learning curves: after look 1 of 1: every variant")


def test_ui_gate_timeout_falls_back_to_the_policy(
    prefect_server: None, tmp_path: Path, tiny_plan: dict[str, Any]
) -> None:
    tiny_plan["gate"] = {"mode": "ui", "timeout_minutes": 0.05}
    manifest = _run(tmp_path, tiny_plan)
    assert manifest["gate"]["source"] == "timeout"
    assert manifest["gate"]["decision"] in ("continue", "trim")


def test_reframe_when_the_control_is_below_threshold(
    prefect_server: None, tmp_path: Path, tiny_plan: dict[str, Any]
) -> None:
    tiny_plan["metric"]["threshold"] = 0.999
    tiny_plan["stop_rules"]["quality"]["enabled"] = False
    manifest = _run(tmp_path, tiny_plan)
    assert manifest["gate"]["decision"] == "reframe"
    assert not [r for r in manifest["runs"] if r["phase"] == "main" and r["status"] != "pending"]
    draft = (tmp_path / "out" / "reframe-draft.yaml").read_text()
    assert "tiny-reframed" in draft
    # As the UI shows it: the flow run named after the campaign, the rejected control's task
    # state named Rejected, and the progress lines in the run's logs.
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterName,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=["tiny"])),
            sort=FlowRunSort.START_TIME_DESC,
            limit=1,
        )[0]
        task_runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id={"any_": [flow_run.id]}))
        states = {t.name: t.state for t in task_runs if t.state is not None}
        assert states["control seed 0 (pilot)"].name == "Rejected"
        assert states["control seed 0 (pilot)"].is_failed()  # red in the UI, not green
        assert "threshold" in (states["control seed 0 (pilot)"].message or "")
        for _ in range(40):  # logs arrive in background batches
            logs = client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run.id]))
            )
            if any(log.message.startswith("gate: reframe") for log in logs):
                break
            time.sleep(0.25)
    messages = [log.message for log in logs]
    assert any(m.startswith("campaign tiny") for m in messages)
    assert any(m.startswith("gate: reframe") for m in messages)
    # the run's one line, under its task run (the task page shows it)
    assert any(log.task_run_id is not None and ": rejected (" in log.message for log in logs)
