"""The gate asked in the Prefect UI: the Resume form, its help, and the recommendation shown.

The form refuses a conflicting answer instead of silently changing it, in one line saying
why. Prefect 3.9's server checks a resume's input against the JSON schema the pause stored,
and only that (`POST /flow_runs/{id}/resume`: `schema_tools.validate`, python-jsonschema's
Draft 2020-12, which has no custom messages), and the UI's form asks the server the same
(`POST /ui/schemas/validate`) to show the errors beside the fields. A refusal there keeps the
run paused. A pydantic validator is not in the schema: it runs only in the flow, after the
run was resumed. So each refusal is written into the schema (`_refusals`), and the
validators below say the same for Python callers and for an answer that reached the flow
another way, which is refused and asked again (`ask_in_ui`).
"""

# No `from __future__ import annotations`: pydantic builds the form's model from these
# annotations when the recommendation fills in its defaults.
import time
from typing import Any, ClassVar, Literal
from uuid import UUID

from prefect import pause_flow_run
from prefect.exceptions import FlowPauseTimeout
from prefect.input import RunInput
from pydantic import (
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from ablations.campaign.gate import (
    CONTINUE_DROPS_NOTHING,
    CONTROL_KEPT,
    GateDecision,
    apply_answer,
)
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
    f"to drop. Nothing can be added, and {CONTROL_KEPT}. Must be empty with continue: "
    "choose trim to drop runs."
)
NOTE_HELP = "Why, for the record (written to gate.json and the report)."


def _refusals(schema: dict[str, Any], model: type) -> None:
    """Write the form's two refusals into its JSON schema, each with its line as the message.

    python-jsonschema's messages are fixed templates; `const`'s is its own value (`'<line>'
    was expected`), so a rule that fails on `const: <line>` reports the line. The rules sit
    under a root `allOf`, which the Prefect UI keeps when it sends the schema to be validated
    (it drops a root `if`/`then`): the line shows beside the Drop field. The resume endpoint
    reports one error, the shallowest: this one, before a drop item's enum of allowed names.
    """
    decision = schema.get("properties", {}).get("decision", {})
    # an answer without a decision takes the form's default: refuse its drops only if that
    # default is continue
    when_continue = [] if decision.get("default") == "continue" else ["decision"]
    refused = list(getattr(model, "refused_drops", [CONTROL]))
    rules = [
        {
            "if": {
                "properties": {"decision": {"const": "continue"}, "drop": {"minItems": 1}},
                "required": ["drop", *when_continue],
            },
            "then": {"properties": {"drop": {"const": CONTINUE_DROPS_NOTHING}}},
        },
        {
            "if": {"properties": {"drop": {"contains": {"enum": refused}}}, "required": ["drop"]},
            "then": {"properties": {"drop": {"const": CONTROL_KEPT}}},
        },
    ]
    rest = dict(schema)
    schema.clear()
    schema["allOf"] = rules  # first: the UI lists the errors of a field in this order
    schema.update(rest)


class GateAnswer(RunInput):
    """Your decision after the pilot. The automatic recommendation is shown in the artifacts."""

    model_config = ConfigDict(json_schema_extra=_refusals)

    refused_drops: ClassVar[list[str]] = [CONTROL]
    """What may never be dropped: the control and, in a plan's form, its main run ids."""

    decision: Literal["continue", "trim", "reframe"] = Field(description=DECISION_HELP)
    drop: list[str] = Field(default_factory=list, description=DROP_HELP)
    note: str = Field(default="", description=NOTE_HELP)

    @field_validator("drop", mode="before")
    @classmethod
    def _never_the_control(cls, drop: Any) -> Any:
        # before the form's list of allowed names, which would only say "not one of ..."
        if isinstance(drop, list) and set(drop) & set(cls.refused_drops):
            raise ValueError(CONTROL_KEPT)
        return drop

    @model_validator(mode="after")
    def _continue_drops_nothing(self) -> "GateAnswer":
        if self.decision == "continue" and self.drop:
            raise ValueError(CONTINUE_DROPS_NOTHING)
        return self


def refusal(error: ValidationError) -> str:
    """Why an answer was refused, in one line: the first problem, in the form's words."""
    first = error.errors()[0]
    cause = first.get("ctx", {}).get("error")
    if cause is not None:  # one of the validators above: its line as it is
        return str(cause)
    where = ".".join(str(part) for part in first["loc"])
    if first["loc"][:1] == ("drop",) and first["type"] == "literal_error":
        return (
            f"{first['input']!r} is not a main-phase variant or run id of this plan "
            "(the Drop field's help names them)"
        )
    return f"{where}: {first['msg']}"


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


def gate_form(
    recommendation: GateDecision, main: list[PlannedRun], refused: str | None = None
) -> type[GateAnswer]:
    """The Resume form, filled in with the recommendation and described by it (after why the
    last answer was refused, when it was).

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
    form.refused_drops = [CONTROL, *(r.run_id for r in main if r.variant == CONTROL)]
    form._description = recommendation_markdown(recommendation)
    if refused:
        form._description = (
            f"**Your answer was refused: {refused}.** Answer again below.\n\n{form._description}"
        )
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
    """Pause the flow run for a person's answer; the recommendation applies after the timeout.

    An answer the form's schema let through but the form's model refuses (written to the
    run's input through the API, say) does not end the campaign: the run pauses again with
    the one-line reason above the form, for the time left."""
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
    deadline = time.monotonic() + timeout_s
    refused: str | None = None
    while True:
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise FlowPauseTimeout("no time left to ask again")
            answer = pause_flow_run(
                wait_for_input=gate_form(recommendation, main, refused),
                timeout=max(1, round(left)),
                poll_interval=2,
            )
            break
        except ValidationError as error:
            refused = refusal(error)
            say(f"gate: refused the answer: {refused}; asking again")
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
