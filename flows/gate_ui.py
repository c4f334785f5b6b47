"""The gate asked in the Prefect UI: the Resume form, its help, and the recommendation shown.

The form refuses a conflicting answer instead of silently changing it. Prefect 3.9's server
checks a resume's input against the JSON schema the pause stored, and only that (the
`resume_flow_run` endpoint, `schema_tools.validate`): a refusal there keeps the run paused
and the UI shows it beside the field. A pydantic validator is not in the schema: the server
would accept the input and the flow's own `RunInput.load` would then raise, after the run was
resumed. So every refusal is written into the schema: `continue` only with an empty drop
list, and `drop`'s items an enum of what may be dropped (never the control: every variant is
compared with it). The validators below say the same for Python callers.
"""

# No `from __future__ import annotations`: pydantic builds the form's model from these
# annotations when the recommendation fills in its defaults.
from typing import Any, Literal
from uuid import UUID

from prefect import pause_flow_run
from prefect.exceptions import FlowPauseTimeout
from prefect.input import RunInput
from pydantic import ConfigDict, Field, create_model, field_validator

from ablations.campaign.gate import GateDecision, apply_answer
from ablations.plan.variants import CONTROL, PlannedRun
from ablations.text.say import say
from tasks.artifacts import markdown_artifact

DECISION_HELP = (
    "continue: run every remaining registered main run (leave Drop empty); trim: drop the runs "
    "listed in Drop, or the recommended ones when Drop is empty; reframe: end the campaign and "
    "draft a revised plan."
)
DROP_HELP = (
    "Only with trim: main-phase run ids or variant names (a variant drops every seed of it) "
    "to drop. Nothing can be added, and the control cannot be dropped (every variant is "
    "compared with it). Must be empty with continue: choose trim to drop runs."
)
NOTE_HELP = "Why, for the record (written to gate.json and the report)."

# JSON schema the server validates the answer against: `continue` allows no drops.
_CONTINUE_DROPS_NOTHING: dict[str, Any] = {
    "if": {"properties": {"decision": {"const": "continue"}}, "required": ["decision"]},
    "then": {"properties": {"drop": {"maxItems": 0}}},
}


class GateAnswer(RunInput):
    """Your decision after the pilot. The automatic recommendation is shown in the artifacts."""

    model_config = ConfigDict(json_schema_extra=_CONTINUE_DROPS_NOTHING)

    decision: Literal["continue", "trim", "reframe"] = Field(description=DECISION_HELP)
    drop: list[str] = Field(
        default_factory=list,
        description=DROP_HELP,
        json_schema_extra={"items": {"type": "string", "not": {"const": CONTROL}}},
    )
    note: str = Field(default="", description=NOTE_HELP)

    @field_validator("drop")
    @classmethod
    def _never_the_control(cls, drop: list[str]) -> list[str]:
        if CONTROL in drop:
            raise ValueError(
                "the control cannot be dropped: every variant is compared with it "
                "(choose reframe to end the campaign)"
            )
        return drop


def droppable(main: list[PlannedRun]) -> list[str]:
    """What the form may drop: every main-phase variant but the control, then their run ids
    (the control's runs are what every variant is compared with)."""
    runs = [r for r in main if r.variant != CONTROL]
    variants = list(dict.fromkeys(r.variant for r in runs))
    return variants + [r.run_id for r in runs]


def drop_help(main: list[PlannedRun]) -> str:
    """The drop field's help, naming this plan's variants and one of its run ids."""
    runs = [r for r in main if r.variant != CONTROL]
    variants = list(dict.fromkeys(r.variant for r in runs))
    if not runs:
        return DROP_HELP + " This campaign has no main-phase variant runs."
    return (
        f"{DROP_HELP} Variants: {', '.join(variants)}. Run ids: <variant>-s<seed>-<hash>, "
        f"e.g. {runs[-1].run_id}."
    ).replace("<", "\\<")  # the UI renders markdown: keep the placeholders visible


def gate_form(recommendation: GateDecision, main: list[PlannedRun]) -> type[GateAnswer]:
    """The Resume form, filled in with the recommendation and described by it.

    The drop field's items are an enum of this plan's main-phase variants and run ids: the
    server validates the answer against the schema, so an unknown name is refused beside the
    field and the run stays paused. (`RunInput.with_initial_data` would drop the fields'
    descriptions, so the defaults are set here with them.)"""
    names = droppable(main)
    item: Any = Literal[tuple(names)] if names else str
    fields: dict[str, Any] = {
        "drop": (
            list[item],
            Field(
                default=list(recommendation.drop),
                description=drop_help(main),
                examples=[names[:1]] if names else None,
            ),
        )
    }
    if recommendation.decision != "fix":  # not a choice of the form: leave it unanswered
        fields["decision"] = (
            Literal["continue", "trim", "reframe"],
            Field(default=recommendation.decision, description=DECISION_HELP),
        )
    form = create_model("GateAnswer", __base__=GateAnswer, **fields)
    form._description = recommendation_markdown(recommendation)
    return form


def _number(value: float | str) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def numbers_table(numbers: dict[str, float | str]) -> str:
    """The gate's numbers as a markdown table, floats to 4 significant figures."""
    if not numbers:
        return ""
    rows = [f"| {key.replace('_', ' ')} | {_number(value)} |" for key, value in numbers.items()]
    return "\n".join(["| quantity | value |", "| --- | --- |", *rows])


def recommendation_markdown(recommendation: GateDecision) -> str:
    """What the policy recommends and why, with its numbers."""
    return (
        f"## Gate: the policy recommends **{recommendation.decision}**\n\n"
        f"{recommendation.reason}\n\n"
        f"Runs it would drop: {', '.join(recommendation.drop) or 'none'}\n\n"
        f"{numbers_table(recommendation.numbers)}\n{sizing_markdown(recommendation)}"
    )


def dropped_markdown(drop: list[str], main: list[PlannedRun]) -> str:
    """The dropped runs by variant: `width=8: seeds 0, 1, 2 (every seed)` and their ids."""
    if not drop:
        return "Dropped: no runs."
    dropped = set(drop)
    lines = [f"Dropped {len(drop)} run{'s' if len(drop) != 1 else ''}:", ""]
    for variant in dict.fromkeys(r.variant for r in main):
        runs = [r for r in main if r.variant == variant]
        gone = [r for r in runs if r.run_id in dropped]
        if gone:
            every = " (every seed)" if len(gone) == len(runs) else f" of {len(runs)} seeds"
            seeds = ", ".join(str(r.seed) for r in gone)
            ids = ", ".join(f"`{r.run_id}`" for r in gone)
            lines.append(f"- {variant}: seeds {seeds}{every}: {ids}")
    return "\n".join(lines)


def decision_markdown(decision: GateDecision, main: list[PlannedRun]) -> str:
    """The recorded gate decision, for its artifact: the runs dropped, by name, and the
    projection of the runs that remain (`... after trim`; `projected hours` was before it)."""
    numbers = decision.numbers
    if decision.drop:  # say which figures were before the trim and which after
        before = {"projected_hours", "worst_case_hours"}
        numbers = {f"{k}_before_trim" if k in before else k: v for k, v in numbers.items()}
    return (
        f"## Gate decision: **{decision.decision}** ({decision.source})\n\n"
        f"{decision.reason}\n\n{dropped_markdown(decision.drop, main)}\n\n"
        f"{numbers_table(numbers)}\n{sizing_markdown(decision)}"
    )


def sizing_markdown(decision: GateDecision) -> str:
    """The seeds each variant needs and the expected/worst-case time, as lines."""
    if decision.sizing is None:
        return ""
    return "\n" + "\n".join(f"    {line}" for line in decision.sizing.lines()) + "\n"


def _running_again(message: str) -> None:
    """Put this flow run back to Running after its pause timed out.

    The server keeps a timed-out run Paused and refuses its later transitions ("The flow was
    completed and never resumed" turns the campaign's Completed into Failed), although the
    flow goes on by design with the policy's decision: so the flow says it is running again,
    forced past that rule."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run
    from prefect.states import Running

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(UUID(flow_run.get_id()), Running(message=message), force=True)


def ask_in_ui(recommendation: GateDecision, main: list[PlannedRun], timeout_s: int) -> GateDecision:
    """Pause the flow run for a person's answer; the recommendation applies after the timeout."""
    markdown_artifact(
        "gate-recommendation",
        recommendation_markdown(recommendation)
        + f"\nResume this flow run with your decision; after {timeout_s} s the recommendation "
        "is applied.",
    )
    say(
        f"gate: waiting up to {timeout_s} s for a decision in the Prefect UI "
        f"(recommended: {recommendation.decision})"
    )
    try:
        answer = pause_flow_run(
            wait_for_input=gate_form(recommendation, main), timeout=timeout_s, poll_interval=2
        )
    except FlowPauseTimeout:
        _running_again(f"no answer in {timeout_s} s: the gate applies the policy")
        return recommendation.model_copy(
            update={
                "source": "timeout",
                "reason": f"no answer in {timeout_s} s; "
                f"applied the policy: {recommendation.reason}",
            }
        )
    say(f"gate: answered in the UI: {answer.decision}, drop {answer.drop or 'nothing'}")
    return apply_answer(recommendation, answer.decision, answer.drop, answer.note, main)
