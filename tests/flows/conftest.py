"""Fixtures for the campaign flow: a real Prefect test server and a tiny, fast plan."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from flows.environment import quiet_prefect
from tests.flows.work_pool import Loopback, serve

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
def prefect_server() -> Iterator[None]:
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield


@pytest.fixture
def tiny_plan() -> dict[str, Any]:
    return copy.deepcopy(TINY_PLAN)


def plan_text(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False)


@pytest.fixture
def loopback(tmp_path: Path, s3_endpoint: str) -> Iterator[Loopback]:
    """A Prefect server on a free port with a fresh database and the `gpus` pool deployed;
    every process it or the test started killed at teardown (`tests.flows.work_pool`)."""
    with serve(tmp_path) as loop:
        yield loop
