"""Fixtures for the campaign flow: a real Prefect test server and a tiny, fast plan."""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.process.environment import environment_set
from flows.environment import quiet_prefect
from flows.local_server import TemporaryServer
from tests.flows.work_pool import Loopback, serve
from tests.postgres import PostgresCluster

quiet_prefect()

TINY_PLAN: dict[str, Any] = {
    "campaign": {
        "id": "tiny",
        "question": "Does width matter on digits?",
        "decision": "pick width",
    },
    "workload": {"steps": 40, "eval_every": 20, "params": {"batch_size": 32}},
    "control": {"params": {"width": 32, "depth": 1, "dropout": 0.0, "lr": 0.01, "keep_pixels": 64}},
    "factors": {
        "width": {"category": "essential", "levels": [8]},
        "keep_pixels": {"category": "exploratory", "levels": [32]},
    },
    "seeds": [0, 1],
    "metric": {"threshold": 0.5, "useful_effect": 0.01},
    "stop_rules": {"quality": {"warmup_steps": 20}},
    "pilot": {"steps": 20},
    "checkpoint": {"store": "memory://tiny-ckpt", "interval": {"steps": 20}},
    "resources": {"devices": 2},
}


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A Prefect server for the flows run in this test process.

    What `prefect_test_harness` gives (the ephemeral server with its services, a fresh
    database, PREFECT_API_URL pointed at it for this process), started as `ablate run` starts
    its own (`TemporaryServer`): on a copy of the migrated template database. The harness
    migrates a new database each time, some 15 CPU-seconds per test process."""
    import prefect.context
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, temporary_settings

    home = tmp_path_factory.mktemp("prefect-server-home")
    with environment_set({"PREFECT_HOME": str(home)}):  # the server's database goes there
        server = TemporaryServer()
    try:
        url = server.wait_ready(90)
        with (
            temporary_settings(updates={PREFECT_API_URL: url}),
            # Threads the tests start (an answering "user", a crashing "host") read the
            # process-global settings, not this thread's context: as the harness does.
            prefect.context._temporary_global_settings_context(
                prefect.context.get_settings_context()
            ),
        ):
            yield
            # What the harness does before stopping its server: logs and events still queued
            # are sent now, not to a stopped server at exit.
            with contextlib.suppress(RuntimeError):  # the log worker never started
                APILogWorker.instance().drain()
            EventsWorker.drain_all()
    finally:
        server.stop()


@pytest.fixture
def tiny_plan() -> dict[str, Any]:
    return copy.deepcopy(TINY_PLAN)


def plan_text(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False)


@pytest.fixture
def loopback(tmp_path: Path, s3_endpoint: str, postgres: PostgresCluster) -> Iterator[Loopback]:
    """A Prefect server on a free port with the `gpus` pool deployed, on a fresh PostgreSQL
    database as a team's server runs (skipped without PostgreSQL); every process it or the
    test started killed at teardown (`tests.flows.work_pool`)."""
    database = postgres.create_database(f"prefect_{uuid.uuid4().hex[:12]}")
    with serve(tmp_path, database) as loop:
        yield loop


def paused_since(client: Any, since: datetime) -> list[Any]:
    """The flow runs paused (a UI gate waiting) that started after `since`: the test's own.
    The server is the test process's, shared by its files: a run another test left paused
    must not take this test's answer (one did, and the gate waited its 5 minutes)."""
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterStartTime,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )

    return list(
        client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=["PAUSED"])),
                start_time=FlowRunFilterStartTime(after_=since),
            )
        )
    )
