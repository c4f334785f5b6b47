"""`ablate notify`: Prefect automations that tell a person about their campaigns.

Prefect already sends notifications (Slack, e-mail, Teams, any webhook...) through its
notification blocks, from its own server, also while no `ablate` process is left running: we
only create the automations, one per moment a person must hear about:

- a campaign failed or crashed (its state message is the one-line cause: bad input, a lost
  store...);
- a UI gate is waiting for an answer (the flow run paused), with the link to the run;
- a campaign finished, with its decision sentence (the campaign flow's Completed state
  message, see flows/campaign.py).

Each automation matches the campaign flow's runs by the flow's name, so runs launched from the
UI, by `ablate run` against the server, or by another machine are all covered. Creating them
again replaces them (same names), so the command is safe to repeat.
"""

from __future__ import annotations

from uuid import UUID

from pydantic import BaseModel

from ablations.errors import InputError

FLOW_NAME = "ablation-campaign"
PREFIX = "ablate: "


class Notice(BaseModel):
    """One automation: when (flow-run events) and what it says (Prefect's templates)."""

    name: str
    events: list[str]
    subject: str
    body: str


# `flow_run` is the run the event is about, read by the server when the action runs; `ui_url`
# is the server's link to it (its PREFECT_UI_URL).
NOTICES = [
    Notice(
        name=f"{PREFIX}campaign failed",
        events=["prefect.flow-run.Failed", "prefect.flow-run.Crashed"],
        subject="Campaign {{ flow_run.name }}: {{ flow_run.state.name }}",
        body=(
            "Campaign {{ flow_run.name }} ended {{ flow_run.state.name }}: "
            "{{ flow_run.state.message }}\n{{ flow_run|ui_url }}"
        ),
    ),
    Notice(
        name=f"{PREFIX}gate waiting",
        events=["prefect.flow-run.Paused"],
        subject="Campaign {{ flow_run.name }} waits for your gate decision",
        body=(
            "Campaign {{ flow_run.name }} finished its pilot and waits for your decision: "
            "open the run and press Resume (without an answer the policy decides when the "
            "gate times out).\n{{ flow_run|ui_url }}"
        ),
    ),
    Notice(
        name=f"{PREFIX}campaign finished",
        events=["prefect.flow-run.Completed"],
        subject="Campaign {{ flow_run.name }} finished",
        body=(
            "Campaign {{ flow_run.name }} finished: {{ flow_run.state.message }}\n"
            "{{ flow_run|ui_url }}"
        ),
    ),
]


def webhook_block(url: str, name: str = "ablate-webhook") -> UUID:
    """Save a Custom Webhook notification block that POSTs `{"subject", "body"}` as JSON."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    block = CustomWebhookNotificationBlock(
        name=name, url=url, json_data={"subject": "{{subject}}", "body": "{{body}}"}
    )
    saved = block.save(name, overwrite=True)
    assert isinstance(saved, UUID)  # called synchronously: no coroutine
    return saved


def block_id(slug_and_name: str) -> UUID:
    """The id of a saved notification block, `block-type-slug/block-name` (as the UI lists
    it, e.g. slack-webhook/my-team); InputError naming what is wrong otherwise."""
    from prefect.blocks.core import Block

    if "/" not in slug_and_name:
        raise InputError(
            f"--block {slug_and_name!r}: give the block as TYPE/NAME, e.g. slack-webhook/my-team"
        )
    try:
        block = Block.load(slug_and_name)
        assert isinstance(block, Block)  # called synchronously: no coroutine
    except ValueError as exc:
        raise InputError(
            f"--block {slug_and_name!r}: no such block on the Prefect server ({exc}); create "
            "it in the UI (Blocks -> +) or with its Python class's .save()"
        ) from exc
    if "notify" not in block.get_block_capabilities():
        raise InputError(f"--block {slug_and_name!r} is not a notification block")
    found = block._block_document_id
    assert found is not None  # a loaded block has its document's id
    return found


def create_notifications(block: UUID, flow_name: str = FLOW_NAME) -> list[str]:
    """Create (or replace) the automations for `flow_name`'s runs; return their names."""
    from prefect.client.orchestration import get_client
    from prefect.events.actions import SendNotification
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

    created = []
    with get_client(sync_client=True) as client:
        for notice in NOTICES:
            for old in client.read_automations_by_name(notice.name):
                client.delete_automation(old.id)
            client.create_automation(
                AutomationCore(
                    name=notice.name,
                    description=f"Sent by `ablate notify` for the {flow_name} flow's runs.",
                    trigger=EventTrigger(
                        expect=set(notice.events),
                        match={"prefect.resource.id": "prefect.flow-run.*"},
                        match_related={
                            "prefect.resource.role": "flow",
                            "prefect.resource.name": flow_name,
                        },
                        posture=Posture.Reactive,
                        threshold=1,
                    ),
                    actions=[
                        SendNotification(
                            block_document_id=block, subject=notice.subject, body=notice.body
                        )
                    ],
                )
            )
            created.append(notice.name)
    return created
