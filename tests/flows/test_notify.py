"""`ablate notify`: Prefect automations send a person what happened, through a notification
block, from the real test server to a webhook receiver on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from ablations.report.md_html import plain
from tests.flows.conftest import paused_since, plan_text


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A webhook receiver on 127.0.0.1: the JSON bodies it was sent, in order."""
    received: list[dict[str, Any]] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            received.append(json.loads(self.rfile.read(length)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", received
    server.shutdown()


def _wait_for(received: list[dict[str, Any]], text: str, seconds: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for message in received:
            if text in message["body"]:
                return message
        time.sleep(0.25)
    raise AssertionError(f"no notification with {text!r}; received {received}")


@pytest.mark.slow
def test_automations_notify_failure_gate_and_decision(
    prefect_server: None,
    tmp_path: Path,
    tiny_plan: dict[str, Any],
    receiver: tuple[str, list[dict[str, Any]]],
) -> None:
    from prefect.client.orchestration import get_client

    from flows.campaign import ablation_campaign
    from flows.notify import NOTICES, create_notifications, webhook_block

    url, received = receiver
    block = webhook_block(url)
    assert create_notifications(block) == [n.name for n in NOTICES]
    assert create_notifications(block) == [n.name for n in NOTICES]  # replaced, not doubled
    with get_client(sync_client=True) as client:
        assert all(len(client.read_automations_by_name(n.name)) == 1 for n in NOTICES)

    # A campaign that fails: bad input from the form, its one line in the notification.
    failed = ablation_campaign(out_dir=str(tmp_path / "bad"), return_state=True)
    assert failed.is_failed()
    notice = _wait_for(received, "no plan given")
    assert notice["subject"] == "Campaign invalid: no plan: Failed"
    # ... and one whose line would quote a secret: the notification carries none of it.
    leaky = json.loads(json.dumps(tiny_plan))
    leaky["checkpoint"] = {
        "store": "s3://bucket/x",
        "endpoint_url": "https://s3.example.com/?X-Amz-Security-Token=FwoGplanted0token",
    }
    assert ablation_campaign(
        plan_yaml=plan_text(leaky), out_dir=str(tmp_path / "leaky"), return_state=True
    ).is_failed()
    notice = _wait_for(received, "checkpoint.endpoint_url")
    assert "planted" not in json.dumps(notice)
    assert "holds a presigned URL's credentials (X-Amz-Security-Token)" in notice["body"]

    # A campaign whose UI gate waits, answered once the notification came; then its decision.
    tiny_plan["gate"] = {"mode": "ui", "timeout_minutes": 5}
    tiny_plan["checkpoint"]["store"] = f"file://{tmp_path}/ckpt"

    def answer_when_notified() -> None:
        _wait_for(received, "waits for your decision", seconds=240)
        with get_client(sync_client=True) as client:
            (paused,) = paused_since(client, began)
            client.resume_flow_run(paused.id, run_input={"decision": "continue"})

    began = datetime.now(timezone.utc)
    thread = threading.Thread(target=answer_when_notified, daemon=True)
    thread.start()
    state = ablation_campaign(
        plan_yaml=plan_text(tiny_plan), out_dir=str(tmp_path / "out"), return_state=True
    )
    thread.join(timeout=5)
    assert state.is_completed() and state.message
    waiting = _wait_for(received, "waits for your decision")
    assert waiting["subject"] == "Campaign tiny waits for your gate decision"
    finished = _wait_for(received, "finished:")
    assert finished["subject"] == "Campaign tiny finished"
    assert state.message in finished["body"]  # the decision sentence, as the run ended with
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert plain(manifest["decision_reached"]) == state.message  # REPORT.md's, in plain text
    assert "**" not in finished["body"] and "`" not in finished["body"]
