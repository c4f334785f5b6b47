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


CONTINUE_LINE = "continue drops nothing: choose trim to drop runs"
CONTROL_LINE = "the control cannot be dropped: every verdict is measured against it"

# The keys of a schema (and of each property) the Prefect UI's form keeps when it sends the
# schema to `/ui/schemas/validate` for the errors it shows beside the fields (its `Schema` to
# `SchemaResponse` mapper, prefect 3.9.1's ui/assets); `items`, `anyOf` and `allOf` go as they are.
_UI_KEEPS = (
    "definitions", "position", "block_type_slug", "$ref", "anyOf", "allOf", "example",
    "default", "const", "description", "enum", "format", "items", "prefixItems",
    "properties", "required", "title", "type", "maxItems", "minItems",
)  # fmt: skip


def _as_the_ui_sends_it(schema: dict[str, Any]) -> dict[str, Any]:
    kept = {key: schema[key] for key in _UI_KEEPS if key in schema}
    if "properties" in kept:
        kept["properties"] = {k: _as_the_ui_sends_it(v) for k, v in kept["properties"].items()}
    return kept


def _paused(client: Any, flow_name: str, after: Any = None) -> Any:
    """The flow run of `flow_name` once it is paused (on a pause other than `after`'s)."""
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )

    for _ in range(240):
        runs = client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])),
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=["PAUSED"]))
            ),
        )
        if runs and runs[0].state.state_details.run_input_keyset != after:
            return runs[0]
        time.sleep(0.25)
    raise AssertionError(f"{flow_name} never paused")


def _ask(name: str, answer: Any) -> tuple[GateDecision, list[PlannedRun]]:
    """Run a flow that asks the gate in the UI while `answer(client)` answers from a thread."""
    from prefect import flow
    from prefect.client.orchestration import get_client

    from flows.gate_ui import ask_in_ui

    recommendation = GateDecision(
        decision="continue",
        reason="the control is healthy",
        numbers={"projected_hours": 0.123456789, "slots": 2},
    )
    main = _main_runs()

    def answering() -> None:
        with get_client(sync_client=True) as client:
            answer(client)

    @flow(name=name)
    def probe() -> GateDecision:
        return ask_in_ui(recommendation, main, timeout_s=60)

    thread = threading.Thread(target=answering, daemon=True)
    thread.start()
    decision = probe()
    thread.join(timeout=10)
    return decision, main


def test_the_gate_form_refuses_a_bad_answer_in_one_line_beside_the_field_and_stays_paused(
    prefect_server: None,
) -> None:
    """Both refusals as the UI meets them: the errors the form shows beside the fields (the
    server's `/ui/schemas/validate` on the schema as the UI sends it) and the resume's
    rejection (what the UI's toast shows): one line each, the run still paused."""
    import httpx
    from prefect.settings import PREFECT_API_URL

    seen: dict[str, Any] = {}
    control_runs = [r.run_id for r in _main_runs() if r.variant == "control"]
    bad = {
        "continue": {"decision": "continue", "drop": ["width=8"]},
        "continue by default": {"drop": ["width=8-s0-abc"]},  # the form's default: continue
        "control": {"decision": "trim", "drop": ["control"]},
        "control run": {"decision": "trim", "drop": ["width=8", control_runs[0]]},
    }

    def answer(client: Any) -> None:
        run = _paused(client, "gate-probe")
        keyset = run.state.state_details.run_input_keyset
        schema = json.loads(client.read_flow_run_input(run.id, keyset["schema"]))
        seen["schema"] = schema
        seen["description"] = json.loads(client.read_flow_run_input(run.id, keyset["description"]))
        ui_schema = _as_the_ui_sends_it(schema)
        for name, values in bad.items():
            shown = httpx.post(
                f"{PREFECT_API_URL.value()}/ui/schemas/validate",
                json={"schema": ui_schema, "values": values},
            ).json()
            refused = client.resume_flow_run(run.id, run_input=values)
            seen[name] = (shown, refused, client.read_flow_run(run.id).state)
        seen["unknown"] = client.resume_flow_run(
            run.id, run_input={"decision": "trim", "drop": ["width=16"]}
        )
        client.resume_flow_run(
            run.id, run_input={"decision": "trim", "drop": ["width=8"], "note": "settled"}
        )

    decision, main = _ask("gate-probe", answer)

    for name, line in [
        ("continue", CONTINUE_LINE),
        ("continue by default", CONTINUE_LINE),
        ("control", CONTROL_LINE),
        ("control run", CONTROL_LINE),
    ]:
        shown, refused, state = seen[name]
        assert shown["valid"] is False, name
        # beside the Drop field, first: the line (quoted by jsonschema's `const` message);
        # a control's item is also out of the list of names the form offers (its enum)
        [beside_drop] = [e for e in shown["errors"] if e.get("property") == "drop"]
        assert beside_drop["errors"][0] == f"{line!r} was expected", name
        assert refused.status.value == "REJECT", name
        assert refused.details.reason == (
            f"Reason: Validation failed for field 'drop'. Failure reason: {line!r} was expected"
        ), name
        assert "is not one of" not in refused.details.reason  # no list of allowed names
        assert state.is_paused(), name
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
    assert CONTROL_LINE in properties["drop"]["description"]
    unknown = seen["unknown"]
    assert unknown.status.value == "REJECT" and "width=16" in unknown.details.reason


def test_an_answer_the_form_refuses_after_the_server_took_it_is_asked_again_with_why(
    prefect_server: None,
) -> None:
    """An answer written to the run's input through the API skips the server's check: the
    flow refuses it in one line and pauses again (the line above the form), never crashes."""
    seen: dict[str, Any] = {}

    def answer(client: Any) -> None:
        run = _paused(client, "gate-again-probe")
        keyset = run.state.state_details.run_input_keyset
        client.create_flow_run_input(
            run.id,
            key=keyset["response"],
            value=json.dumps({"decision": "continue", "drop": ["width=8"]}),
        )
        seen["taken"] = client.resume_flow_run(run.id)  # the form's defaults: valid
        again = _paused(client, "gate-again-probe", after=keyset)
        keyset = again.state.state_details.run_input_keyset
        seen["description"] = json.loads(
            client.read_flow_run_input(again.id, keyset["description"])
        )
        client.resume_flow_run(again.id, run_input={"decision": "trim", "drop": ["width=8"]})

    decision, main = _ask("gate-again-probe", answer)

    assert seen["taken"].status.value == "ACCEPT"
    first_line = seen["description"].splitlines()[0]
    assert first_line == f"**Your answer was refused: {CONTINUE_LINE}.** Answer again below."
    assert "## Gate: the policy recommends **continue**" in seen["description"]
    assert decision.decision == "trim" and decision.source == "ui"
    assert decision.drop == [r.run_id for r in main if r.variant == "width=8"]


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

    from flows.gate_ui import GateAnswer, gate_form, refusal

    with pytest.raises(ValidationError, match=CONTROL_LINE):
        GateAnswer(decision="trim", drop=["control"])
    form = gate_form(GateDecision(decision="continue", reason="healthy"), _main_runs())
    refused = {
        CONTROL_LINE: {"decision": "trim", "drop": ["control-s0-abc"]},
        CONTINUE_LINE: {"drop": ["width=8"]},  # continue: the form's default
        "'w16' is not a main-phase variant or run id of this plan (the Drop field's help "
        "names them)": {"decision": "trim", "drop": ["w16"]},
    }
    for line, answer in refused.items():
        with pytest.raises(ValidationError) as error:
            form(**answer)
        assert refusal(error.value) == line
    assert form(decision="trim", drop=["width=8"]).drop == ["width=8"]
