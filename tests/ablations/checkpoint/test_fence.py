"""The attempt fence on real stores: the campaign accepts one attempt per run, an attempt
commits only while it is the accepted one, and a store that does not answer is an error the
caller retries, never a guess. (The manager's use of the fence is in test_commit.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from ablations.checkpoint import FsspecStore, open_store
from ablations.checkpoint.fence import ACCEPTED, accept, accepted, require_accepted
from ablations.errors import InfrastructureError, StoreError, SupersededAttempt
from ablations.plan.infrastructure import CheckpointSection
from tests.s3_server import BUCKET


@pytest.fixture(params=["file", "memory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> FsspecStore:
    if request.param == "file":
        section = CheckpointSection(store=f"file://{tmp_path}/store")
    elif request.param == "memory":
        section = CheckpointSection(store=f"memory://fence-{tmp_path.name}")
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        section = CheckpointSection(store=f"s3://{BUCKET}/{tmp_path.name}", endpoint_url=endpoint)
    return open_store(section)


def test_no_attempt_is_accepted_before_the_campaign_submits_one(store: FsspecStore) -> None:
    assert accepted(store, "camp", "run-a") is None
    with pytest.raises(SupersededAttempt, match=r"attempt 1-a of run run-a: .*accepts no attempt"):
        require_accepted(store, "camp", "run-a", "1-a")


def test_the_accepted_attempt_commits_and_a_rewrite_fences_the_one_before(
    store: FsspecStore,
) -> None:
    accept(store, "camp", "run-a", "1-a")
    assert accepted(store, "camp", "run-a") == "1-a"
    require_accepted(store, "camp", "run-a", "1-a")  # the accepted one passes
    # the pointer is the documented file under the run's folder
    assert store.keys("camp/run-a") == [f"camp/run-a/{ACCEPTED}"]

    accept(store, "camp", "run-a", "2-b")  # 1-a declared lost, 2-b submitted
    assert accepted(store, "camp", "run-a") == "2-b"
    require_accepted(store, "camp", "run-a", "2-b")
    with pytest.raises(SupersededAttempt) as raised:
        require_accepted(store, "camp", "run-a", "1-a")
    message = str(raised.value)
    assert "attempt 1-a of run run-a was declared lost" in message
    assert "attempt 2-b accepted instead" in message


def test_each_run_and_campaign_has_its_own_pointer(store: FsspecStore) -> None:
    accept(store, "camp", "run-a", "1-a")
    accept(store, "other", "run-b", "9-z")
    assert accepted(store, "camp", "run-b") is None
    assert accepted(store, "other", "run-a") is None
    assert accepted(store, "other", "run-b") == "9-z"
    with pytest.raises(SupersededAttempt, match="accepts no attempt"):
        require_accepted(store, "camp", "run-b", "9-z")


@pytest.mark.parametrize(
    "content",
    [b"not json", b"\xff\xfe", b"{}", b'["1-a"]', b'"1-a"', b"null", b'{"other": "1-a"}'],
)
def test_an_unreadable_pointer_fences_every_attempt(tmp_path: Path, content: bytes) -> None:
    # reading the pointer is the same on every backend (above): one store is enough here
    store = open_store(CheckpointSection(store=f"memory://fence-{tmp_path.name}"))
    accept(store, "camp", "run-a", "1-a")
    store.put(f"camp/run-a/{ACCEPTED}", content)
    assert accepted(store, "camp", "run-a") is None
    with pytest.raises(SupersededAttempt, match=r"missing or unreadable.*nothing is committed"):
        require_accepted(store, "camp", "run-a", "1-a")
    accept(store, "camp", "run-a", "1-a")  # until the campaign rewrites it
    require_accepted(store, "camp", "run-a", "1-a")


def test_a_store_that_does_not_answer_is_an_error_not_a_missing_pointer(tmp_path: Path) -> None:
    store = open_store(CheckpointSection(store=f"file://{tmp_path}/store"))
    # the pointer's path is a folder: reading it fails for a reason other than "not there"
    (tmp_path / "store" / "camp" / "run-a" / ACCEPTED).mkdir(parents=True)
    with pytest.raises(StoreError, match=r"cannot read .*accepted\.json") as raised:
        accepted(store, "camp", "run-a")
    assert not isinstance(raised.value, SupersededAttempt)
    with pytest.raises(StoreError) as raised:
        require_accepted(store, "camp", "run-a", "1-a")
    assert not isinstance(raised.value, SupersededAttempt)


def test_a_superseded_attempt_is_an_infrastructure_error() -> None:
    # the input is fine: the machine running it was taken for lost (exit 1, not 2)
    assert issubclass(SupersededAttempt, InfrastructureError)
