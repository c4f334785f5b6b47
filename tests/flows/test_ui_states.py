"""Honest states in the Prefect UI, on the real test server: a stopped or rejected run is not
shown as a success, and bad input from the form ends the flow run with one line."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from ablations.run.records import RunRecord, Stop
from tests.flows.conftest import plan_text


def _record(status: str, **fields: Any) -> RunRecord:
    return RunRecord(
        run_id=f"width=8-s0-{status}",
        variant="width=8",
        seed=0,
        category="essential",
        phase="main",
        status=status,  # type: ignore[arg-type]
        **fields,
    )


def _logs(flow_run_id: UUID, at_least: int) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    with get_client(sync_client=True) as client:
        for _ in range(40):  # logs arrive in the background, in batches
            logs = client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
            )
            if len(logs) >= at_least:
                break
            time.sleep(0.25)
    return logs


@pytest.mark.slow  # an end-to-end subprocess or worker start: make test, not make check
def test_stopped_and_rejected_runs_are_not_completed_yet_the_flow_reads_them(
    prefect_server: None,
) -> None:
    from prefect import flow, task
    from prefect.client.orchestration import get_client
    from prefect.states import State

    from tasks.runs import run_state

    stopped = _record("stopped", stop=Stop(rule="non_finite_loss", message="loss is nan", step=7))
    rejected = _record("rejected", metrics={"accuracy": 0.41234567})
    accepted = _record("accepted", metrics={"accuracy": 0.97})

    @task(name="state-run")
    def one(record: RunRecord) -> State:
        return run_state(record)

    @flow(name="states-probe")
    def probe() -> list[tuple[UUID, RunRecord]]:
        futures = [one.submit(r) for r in (stopped, rejected, accepted)]
        # as flows/campaign.py reads them: the record is the data, whatever the state type
        return [(f.task_run_id, f.result(raise_on_failure=False)) for f in futures]

    state = probe(return_state=True)
    assert state.is_completed()  # a stopped run is a finding, not a failure of the campaign
    results = state.result()
    assert [record for _, record in results] == [stopped, rejected, accepted]
    with get_client(sync_client=True) as client:
        seen = [client.read_task_run(task_run_id).state for task_run_id, _ in results]
    assert [(s.type.value, s.name) for s in seen] == [
        ("CANCELLED", "Stopped"),
        ("FAILED", "Rejected"),
        ("COMPLETED", "Completed"),
    ]
    assert seen[0].message == "stopped: non_finite_loss at step 7: loss is nan"
    assert seen[1].message == "rejected: accuracy=0.4123"


def test_stopped_and_rejected_task_runs_are_found_by_their_tags(prefect_server: None) -> None:
    """The UI's state filter goes by type, so Stopped (Cancelled-type) and Rejected
    (Failed-type) runs are found by tag: the same filter the UI sends, on the real server."""
    from prefect import flow, task
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        TaskRunFilter,
        TaskRunFilterTags,
    )
    from prefect.states import State

    from tasks.runs import _tag_this_task_run, finding_tags, run_state

    stopped = _record("stopped", stop=Stop(rule="quality", message="below", step=40))
    rejected = _record("rejected", metrics={"accuracy": 0.4})
    accepted = _record("accepted", metrics={"accuracy": 0.97})

    @task(name="tagged-run", tags=["ablate"])
    def one(record: RunRecord) -> State:
        _tag_this_task_run(finding_tags(record))  # as tasks/runs.execute_run does
        return run_state(record)

    @flow(name="tags-probe")
    def probe() -> None:
        for future in [one.submit(r) for r in (stopped, rejected, accepted)]:
            future.wait()

    state = probe(return_state=True)
    flow_run = FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id]))

    def tagged(*tags: str) -> list[str]:
        with get_client(sync_client=True) as client:
            for _ in range(40):  # task runs are recorded from their events, in the background
                runs = client.read_task_runs(
                    flow_run_filter=flow_run,
                    task_run_filter=TaskRunFilter(tags=TaskRunFilterTags(all_=list(tags))),
                )
                if runs and all(r.state is not None and r.state.is_final() for r in runs):
                    break
                time.sleep(0.25)
        return sorted(str(r.state.name) for r in runs if r.state is not None)

    assert tagged("stopped") == ["Stopped"]
    assert tagged("stopped", "rule:quality") == ["Stopped"]
    assert tagged("rejected") == ["Rejected"]
    assert tagged("rule:threshold") == ["Rejected"]
    assert tagged("ablate") == ["Completed", "Rejected", "Stopped"]  # the task's own tag kept


@pytest.mark.parametrize(
    ("given", "name", "message"),
    [
        ({}, "invalid: no plan", "no plan given: fill in plan_path"),
        ({"plan_path": "/nonexistent/plan.yaml"}, "invalid: unreadable plan_path", "cannot read"),
        ({"plan_yaml": "BAD"}, "invalid plan: tiny", "metric.useful_effect"),
    ],
)
def test_bad_input_ends_the_run_with_one_line_and_an_invalid_name(
    prefect_server: None,
    tmp_path: Path,
    tiny_plan: dict[str, Any],
    given: dict[str, str],
    name: str,
    message: str,
) -> None:
    from prefect.client.orchestration import get_client

    from flows.campaign import ablation_campaign

    if given.get("plan_yaml") == "BAD":
        tiny_plan["metric"]["useful_effect"] = -1
        given = {"plan_yaml": plan_text(tiny_plan)}
    state = ablation_campaign(out_dir=str(tmp_path / "out"), **given, return_state=True)
    assert state.is_failed()
    assert message in (state.message or "") and "\n" not in (state.message or "")
    flow_run_id = state.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        assert client.read_flow_run(flow_run_id).name == name
    logs = _logs(flow_run_id, at_least=1)
    ours = [log for log in logs if log.name == "ablate.progress"]
    assert [log.message for log in ours] == [f"error: {state.message}"]
    assert not [log for log in logs if "Traceback" in log.message]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
