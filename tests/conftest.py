"""Shared fixtures: the demo plan as data, and a helper writing plans to files; the order in
which the test files are handed to pytest's processes (`tests/durations.py`)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.process.environment import environment_set
from tests import durations

ROOT = Path(__file__).resolve().parents[1]
DEMO_PLAN = ROOT / "ablations" / "recipes" / "demo.yaml"


@pytest.fixture
def demo_data() -> dict[str, Any]:
    """The demo plan as plain data, a fresh copy per test, with a fixed list of seeds (one
    look): these tests count its runs; the sequential design has tests of its own."""
    data = copy.deepcopy(yaml.safe_load(DEMO_PLAN.read_text()))
    data["seeds"] = [0, 1, 2]
    return data


@pytest.fixture
def write_plan(tmp_path: Path) -> Callable[[Any], Path]:
    """Write data (or raw text) as a plan file and return its path."""

    def write(content: Any, name: str = "plan.yaml") -> Path:
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
        return path

    return write


def pytest_configure(config: pytest.Config) -> None:
    """One intra-op thread for torch in the test processes themselves. Two pytest processes
    share two cores; torch's default of a thread per core made each process's in-process
    training spin against the other's (tests/gpu's CPU charlm resume took 18 s instead of 3).
    The campaigns' slot workers are separate processes and set their own threads per slot."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session", autouse=True)
def private_slot_locks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The slot locks of this test process's campaigns in a folder of its own: every local
    campaign locks its slots (`ablations.slots.locks`), and the machine-wide default would
    make the two pytest processes (and anyone else's tests on the machine) wait for each
    other's `cpu#0`. A test's own campaigns still share it, as two on one machine would."""
    with environment_set({"ABLATE_SLOT_DIR": str(tmp_path_factory.mktemp("slot-locks"))}):
        yield


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest files first: with `-n 2 --no-loadscope-reorder`, xdist hands them out in this
    order, and the short ones fill in at the end (tests/durations.py says why)."""
    durations.longest_files_first(items, durations.load())


from tests.postgres import postgres  # noqa: E402, F401  (session PostgreSQL cluster fixture)
from tests.s3_server import s3_endpoint  # noqa: E402, F401  (session S3 server fixture)
