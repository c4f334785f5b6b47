"""The Prefect server restarted under a work-pool campaign: its calls ride through the outage
(`flows/api_outage.ride_api`), and a server that stays down ends them in one line.

A real `prefect server start` on loopback (`tests.flows.work_pool.Loopback`), stopped and
started again on the same port and database, as an operator's restart does. Each call opens a
new client, as the campaign's calls do: Prefect's client refuses to retry a refused
connection before its first answer (`prefect/client/base.py`), so without the ride these fail
at once.
"""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prefect.client.orchestration import get_client
from prefect.settings import PREFECT_API_URL, PREFECT_CLIENT_MAX_RETRIES, temporary_settings

from ablations.errors import ApiUnreachable
from flows.api_outage import API_OUTAGE_ENV, retries_until_gone, ride_api, server_lost
from flows.server_database import template_path
from tests.flows.work_pool import Loopback, kill_tree, loopback_env
from tests.postgres import PostgresCluster
from tests.s3_server import free_port


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loopback]:
    """A server (API only) on SQLite, started on the migrated template, this process's
    Prefect client pointed at it; killed at the end of the module."""
    folder = tmp_path_factory.mktemp("api-outage")
    port = free_port()
    loop = Loopback(folder, loopback_env(folder, port), port)
    home = folder / "prefect-home"
    home.mkdir()
    if template_path().exists():  # no migration: seconds saved at each start
        shutil.copyfile(template_path(), home / "prefect.db")
    try:
        loop.start_server()
        with temporary_settings(updates={PREFECT_API_URL: loop.env["PREFECT_API_URL"]}):
            yield loop
    finally:
        for process in loop.processes:
            if process.poll() is None:
                kill_tree(process)


@pytest.fixture
def server(started: Loopback) -> Loopback:
    """The module's server, up (started again when a test left it down)."""
    assert started.server is not None
    if started.server.poll() is not None:
        started.start_server(f"server-{time.monotonic_ns()}.log")
    return started


def _read_pools() -> list[str]:
    with get_client(sync_client=True) as client:  # a new client, as each campaign call's
        return [pool.name for pool in client.read_work_pools()]


@pytest.mark.slow
@pytest.mark.long
def test_a_restarted_server_is_ridden_through(server: Loopback) -> None:
    server.stop_server()
    with pytest.raises(httpx.ConnectError):  # what a call meets without the ride
        _read_pools()
    restart = threading.Timer(2.0, lambda: server.start_server("server-restarted.log"))
    restart.start()
    started = time.monotonic()
    try:
        assert ride_api("reading the work pools", _read_pools, seconds=90) == []
    finally:
        restart.join()
    assert time.monotonic() - started >= 2.0  # it did wait for the restart


@pytest.mark.slow
@pytest.mark.long
def test_a_server_that_stays_down_ends_the_call_in_one_line(server: Loopback) -> None:
    server.stop_server()
    started = time.monotonic()
    with pytest.raises(ApiUnreachable) as caught:
        ride_api("reading the work pools", _read_pools, seconds=3)
    assert time.monotonic() - started < 10  # bounded: about the outage given
    line = str(caught.value)
    assert "\n" not in line and server.env["PREFECT_API_URL"] in line
    assert "did not answer reading the work pools" in line and API_OUTAGE_ENV in line
    assert "ConnectError" in line


@pytest.mark.slow
@pytest.mark.long
def test_a_client_that_had_connected_gives_up_within_the_outage(server: Loopback) -> None:
    """Prefect retries a refused connection on a client that has connected (2, 4, 8... s: a
    minute): inside one of our tries, that made a 30 s outage end after 70 s (issue 45)."""
    with get_client(sync_client=True) as client:
        client.read_work_pools()  # connected, as the flow-run watch's reader is
        server.stop_server()
        started = time.monotonic()
        with pytest.raises(ApiUnreachable):
            ride_api("reading the work pools", client.read_work_pools, seconds=3)
    assert time.monotonic() - started < 10


@pytest.mark.slow
@pytest.mark.long
def test_once_a_call_gave_up_the_campaigns_other_requests_fail_at_once(server: Loopback) -> None:
    """Within `retries_until_gone` (`ablate run`'s campaign): after one call of ours gave up,
    Prefect's own requests (the engine reporting the failed flow) and our other calls end at
    their first refusal, not after a minute of retries or an outage of their own."""
    configured = PREFECT_CLIENT_MAX_RETRIES.value()
    assert configured > 0
    with retries_until_gone(), get_client(sync_client=True) as client:
        client.read_work_pools()  # connected: Prefect would retry a refusal for a minute
        assert PREFECT_CLIENT_MAX_RETRIES.value() == configured
        server.stop_server()
        with pytest.raises(ApiUnreachable) as first:
            ride_api("reading the work pools", _read_pools, seconds=2)
        started = time.monotonic()
        with pytest.raises(httpx.ConnectError):
            client.read_work_pools()
        with pytest.raises(ApiUnreachable) as then:
            ride_api("reading them again", _read_pools, seconds=60)
        assert time.monotonic() - started < 8
        assert str(then.value) == str(first.value)  # the campaign's one line, the first call's
    assert PREFECT_CLIENT_MAX_RETRIES.value() == configured  # the campaign's context ended


@pytest.mark.slow
@pytest.mark.long
def test_a_wrong_request_is_not_retried(server: Loopback) -> None:
    """An answer (a 404 for a pool that is not there) is the server's word: raised at once."""
    from prefect.exceptions import ObjectNotFound

    def read_missing() -> object:
        with get_client(sync_client=True) as client:
            return client.read_work_pool("no-such-pool")

    started = time.monotonic()
    with pytest.raises(ObjectNotFound):
        ride_api("reading a pool", read_missing, seconds=60)
    assert time.monotonic() - started < 5


@pytest.mark.slow
@pytest.mark.long
def test_a_restarted_postgresql_under_the_server_is_ridden_through(
    tmp_path: Path, postgres: PostgresCluster
) -> None:
    """PostgreSQL stopped as a crash and started again: the server's requests fail meanwhile
    (500s and 503s), and a new client's reads ride through to the same data."""
    port = free_port()
    url = postgres.create_database(f"outage_{uuid.uuid4().hex[:12]}")
    loop = Loopback(tmp_path, loopback_env(tmp_path, port, url), port)
    try:
        loop.start_server()
        with temporary_settings(updates={PREFECT_API_URL: loop.env["PREFECT_API_URL"]}):
            loop.prefect("work-pool", "create", "after-restart", "--type", "process")
            restart = threading.Thread(target=postgres.restart, kwargs={"down_s": 4.0})
            restart.start()
            time.sleep(1.0)  # down now: the server's pooled connections are dead
            try:
                pools = ride_api("reading the work pools", _read_pools, seconds=90)
            finally:
                restart.join()
        assert pools == ["after-restart"]
    finally:
        for process in loop.processes:
            if process.poll() is None:
                kill_tree(process)


def test_a_flow_ended_by_the_servers_absence_says_so_in_one_line() -> None:
    """What `ablate run --pool` raises when its flow ended on the server: a call's own
    `ApiUnreachable`, also under Prefect's error about the flow's state; else one made of
    the engine's connection error; nothing for any other failure."""
    ours = ApiUnreachable("the Prefect server X did not answer the submission of control")
    try:
        try:
            raise ours
        except ApiUnreachable:  # the engine then fails to report the flow's Failed state
            raise httpx.ConnectError("All connection attempts failed")  # noqa: B904
    except httpx.ConnectError as engine:
        assert server_lost(engine) is ours
    made = server_lost(httpx.ConnectError("All connection attempts failed"))
    assert made is not None and "\n" not in str(made)
    assert "stopped answering the campaign's flow run" in str(made) and "ConnectError" in str(made)
    assert server_lost(ValueError("a bad plan")) is None


def test_the_api_outage_setting_is_seconds_or_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ablations.errors import InputError
    from flows.api_outage import api_outage_seconds

    monkeypatch.setenv(API_OUTAGE_ENV, "30")
    assert api_outage_seconds() == 30
    monkeypatch.setenv(API_OUTAGE_ENV, "-1")
    with pytest.raises(InputError, match=API_OUTAGE_ENV):
        api_outage_seconds()


def test_our_tries_go_without_prefects_retries_under_whatever_settings_are_current() -> None:
    from prefect.settings import get_current_settings

    from flows.api_outage import no_client_retries

    configured = PREFECT_CLIENT_MAX_RETRIES.value()
    assert configured > 0
    for url in ("http://127.0.0.1:1/api", "http://127.0.0.1:2/api", "http://127.0.0.1:1/api"):
        with temporary_settings(updates={PREFECT_API_URL: url}):
            current = get_current_settings()
            with no_client_retries():
                assert PREFECT_CLIENT_MAX_RETRIES.value() == 0
                assert PREFECT_API_URL.value() == url  # the current settings', not a stale copy
                with no_client_retries():  # the copy made once per settings object
                    assert get_current_settings().client.max_retries == 0
            assert get_current_settings() is current
    assert PREFECT_CLIENT_MAX_RETRIES.value() == configured
