"""The campaign as a Prefect UI user sees it: run logs, task states and the gate's Resume form,
on the real Prefect test server (tiny flows over the campaign's own helpers, no training)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any
from uuid import UUID

import pytest

from ablations.campaign.gate import GateDecision
from ablations.plan.variants import PlannedRun
from ablations.run.records import RunError, RunRecord, Stop


def _logs(flow_run_id: UUID, expected: int) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    with get_client(sync_client=True) as client:
        for _ in range(40):  # logs arrive in the background, in batches
            logs = client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
            )
            if len(logs) >= expected:
                break
            time.sleep(0.25)
    return logs


def test_progress_lines_reach_the_run_logs_and_the_terminal_once(
    prefect_server: None, capfd: pytest.CaptureFixture[str]
) -> None:
    from prefect import flow, task
    from prefect.runtime import flow_run

    from ablations.text.say import say
    from flows.run_log import run_logger

    @task(name="one-run")
    def one_run() -> None:
        pass

    @flow(name="logs-probe")
    def probe() -> tuple[str, UUID]:
        run_logger()
        say("pilot: 2 runs")
        future = one_run.submit()
        future.wait()
        # as flows/campaign.py logs a finished run: once, under its task run
        say(
            "[1/2] main r1: stopped (quality at step 20)", about={"task_run_id": future.task_run_id}
        )
        return str(flow_run.get_id()), future.task_run_id

    run_id, task_run_id = probe()
    flow_run_id = UUID(run_id)
    say("outside any run")  # no run context: the terminal only, and no warning
    logs = _logs(flow_run_id, expected=2)
    by_message = {log.message: log for log in logs}
    assert "pilot: 2 runs" in by_message
    assert by_message["pilot: 2 runs"].task_run_id is None  # the flow run's own log
    run_lines = [log for log in logs if "r1" in log.message]
    assert len(run_lines) == 1 and run_lines[0].task_run_id == task_run_id  # on the task page
    assert not any("outside" in log.message for log in logs)
    out, err = capfd.readouterr()
    assert out.count("pilot: 2 runs") == 1 and "pilot: 2 runs" not in err
    assert out.count("r1: stopped") == 1
    assert "attempted to send logs" not in err


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


def test_run_states_are_named_after_the_status_with_the_reason() -> None:
    from ablations.campaign.progress import record_rows
    from tasks.runs import run_state

    rejected = run_state(_record("rejected", metrics={"accuracy": 0.41234567}))
    assert rejected.name == "Rejected" and rejected.is_failed()  # red: not a success
    assert "accuracy=0.4123 " in rejected.message + " "
    stop = Stop(rule="non_finite_loss", message="loss is nan", step=7)
    stopped = run_state(_record("stopped", stop=stop))
    assert stopped.name == "Stopped" and "loss is nan" in (stopped.message or "")
    assert stopped.is_cancelled()  # grey: a rule ended it early, nothing crashed
    failed = run_state(_record("failed", error=RunError(type="OSError", message="disk full")))
    assert failed.name == "Failed" and failed.is_failed()
    assert failed.message == "OSError: disk full"
    accepted = run_state(_record("accepted", metrics={"accuracy": 0.9642857313156128}))
    assert accepted.name == "Completed" and accepted.message == "accepted: accuracy=0.9643"
    (row,) = record_rows(
        [_record("accepted", metrics={"accuracy": 0.9642857313156128})], "accuracy"
    )
    assert row["accuracy"] == 0.9643  # the UI's runs tables: 4 significant figures


def test_a_failed_run_state_still_hands_its_record_to_the_flow(prefect_server: None) -> None:
    from prefect import flow, task
    from prefect.states import State

    from tasks.runs import run_state

    failed = _record("failed", error=RunError(type="OSError", message="disk full"))

    @task(name="failing-run")
    def failing_run() -> State:
        return run_state(failed)

    @flow(name="failed-run-probe")
    def probe() -> tuple[str, RunRecord]:
        future = failing_run.submit()
        record = future.result(raise_on_failure=False)  # as flows/campaign.py reads it
        return future.state.name, record

    name, record = probe()
    assert name == "Failed" and record == failed


def _main_runs() -> list[PlannedRun]:
    return [
        PlannedRun(
            run_id=f"{variant}-s{seed}-abc",
            variant=variant,
            factor=None if variant == "control" else "width",
            level=None if variant == "control" else 8,
            seed=seed,
            category="essential",
            phase="main",
            steps=40,
            params={"width": 32 if variant == "control" else 8},
        )
        for variant in ("control", "width=8")
        for seed in (0, 1)
    ]


def test_the_gate_form_refuses_continue_with_drops_and_keeps_the_run_paused(
    prefect_server: None,
) -> None:
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )

    from flows.gate_ui import ask_in_ui

    recommendation = GateDecision(
        decision="continue",
        reason="the control is healthy",
        numbers={"projected_hours": 0.123456789, "slots": 2},
    )
    main = _main_runs()
    seen: dict[str, Any] = {}

    def answer_as_the_ui_does() -> None:
        with get_client(sync_client=True) as client:
            for _ in range(240):
                paused = client.read_flow_runs(
                    flow_filter=FlowFilter(name=FlowFilterName(any_=["gate-probe"])),
                    flow_run_filter=FlowRunFilter(
                        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=["PAUSED"]))
                    ),
                )
                if paused:
                    break
                time.sleep(0.25)
            run = paused[0]
            keyset = run.state.state_details.run_input_keyset
            seen["schema"] = json.loads(client.read_flow_run_input(run.id, keyset["schema"]))
            seen["description"] = json.loads(
                client.read_flow_run_input(run.id, keyset["description"])
            )
            refused = client.resume_flow_run(
                run.id, run_input={"decision": "continue", "drop": ["width=8"]}
            )
            seen["refused"] = refused
            seen["state_after"] = client.read_flow_run(run.id).state
            seen["unknown"] = client.resume_flow_run(
                run.id, run_input={"decision": "trim", "drop": ["width=16"]}
            )
            control_runs = [r.run_id for r in main if r.variant == "control"]
            seen["control"] = [
                client.resume_flow_run(run.id, run_input={"decision": "trim", "drop": [name]})
                for name in ("control", *control_runs[:1])
            ]
            seen["state_after_control"] = client.read_flow_run(run.id).state
            client.resume_flow_run(
                run.id, run_input={"decision": "trim", "drop": ["width=8"], "note": "settled"}
            )

    @flow(name="gate-probe")
    def probe() -> GateDecision:
        return ask_in_ui(recommendation, main, timeout_s=120)

    thread = threading.Thread(target=answer_as_the_ui_does, daemon=True)
    thread.start()
    decision = probe()
    thread.join(timeout=10)

    refused = seen["refused"]
    assert refused.status.value == "REJECT"
    assert "drop" in refused.details.reason and "empty" in refused.details.reason
    assert seen["state_after"].is_paused()
    assert decision.decision == "trim" and decision.source == "ui"
    assert decision.drop == [r.run_id for r in main if r.variant == "width=8"]
    properties = seen["schema"]["properties"]
    assert {"decision", "drop", "note"} <= set(properties)
    assert all(properties[name].get("description") for name in ("decision", "drop", "note"))
    assert properties["decision"]["default"] == "continue"
    assert "| projected hours | 0.1235 |" in seen["description"]
    # the names that may be dropped: every main variant but the control, their run ids, and
    # nothing else
    allowed = properties["drop"]["items"]["enum"]
    assert allowed == ["width=8", *[r.run_id for r in main if r.variant == "width=8"]]
    assert "Variants: width=8." in properties["drop"]["description"]
    assert "the control cannot be dropped" in properties["drop"]["description"]
    unknown = seen["unknown"]
    assert unknown.status.value == "REJECT" and "width=16" in unknown.details.reason
    # dropping the control (by name or run id) is refused beside the field, the run paused
    for refused in seen["control"]:
        assert refused.status.value == "REJECT" and "drop" in refused.details.reason
    assert seen["state_after_control"].is_paused()


def test_the_gate_decision_names_the_dropped_runs_and_the_figures_after_the_trim() -> None:
    from flows.gate_ui import decision_markdown

    main = _main_runs()
    dropped = [r.run_id for r in main if r.variant == "width=8"]
    decision = GateDecision(
        decision="trim",
        reason="answered in the UI: trim",
        drop=dropped,
        numbers={"projected_hours": 2.0, "projected_hours_after_trim": 1.0},
    )
    text = decision_markdown(decision, main)
    assert "Dropped 2 runs:" in text and "- width=8: seeds 0, 1 (every seed): " in text
    assert all(f"`{run_id}`" in text for run_id in dropped)
    assert "| projected hours before trim | 2 |" in text
    assert "| projected hours after trim | 1 |" in text
    assert "Dropped: no runs." in decision_markdown(decision.model_copy(update={"drop": []}), main)


def test_the_gate_answer_refuses_the_control_in_python_too() -> None:
    """What the form's schema refuses on the server (above), the model refuses for a caller
    that builds an answer itself."""
    from pydantic import ValidationError

    from flows.gate_ui import GateAnswer, gate_form

    with pytest.raises(ValidationError, match="the control cannot be dropped"):
        GateAnswer(decision="trim", drop=["control"])
    form = gate_form(GateDecision(decision="continue", reason="healthy"), _main_runs())
    with pytest.raises(ValidationError, match="drop"):
        form(decision="trim", drop=["control-s0-abc"])
    assert form(decision="trim", drop=["width=8"]).drop == ["width=8"]
