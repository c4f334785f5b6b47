"""Riding through the Prefect server's outage: a work-pool campaign's calls to the API (each
run's submission, the reads of its flow run's state, a lost attempt's Crashed state) are
retried with the store's bounded backoff (`ablations.checkpoint.outage.ride_out`) for up to
`api_outage_seconds()` in all per call, then fail with one line (`ApiUnreachable`, an
infrastructure cause: exit 1, and a rerun goes on from the folder).

Why Prefect's own retries are not enough (prefect 3.9, `prefect/client/base.py`): its client
retries 408, 429, 502 and 503 answers and dropped connections `PREFECT_CLIENT_MAX_RETRIES`
times (5) with a backoff of 2, 4, 8... s (about a minute), and a PostgreSQL restart reaches it
as 503s (the server maps its database's connection errors to 503). But it retries a *refused*
connection only once that client instance has connected, and every `get_client()` is a new
instance: while a restarting server is down, each new client's first request fails at once.
Nor does it retry a plain 500 (`PREFECT_CLIENT_RETRY_EXTRA_CODES` could add it, for every
route alike). Retrying here is safe: a submission carries an idempotency key (a retried one
returns the flow run the first created), the reads change nothing, and a state forced twice is
the same state.

Our tries run without Prefect's retries (`no_client_retries`): with them, each try of ours was a
whole round of theirs on a client that had connected (66 to 71 s of refused connections), so a
30 s outage setting ended after 70 s. And once a call of ours gives up, the campaign's own
settings context (`retries_until_gone`, entered by `ablate run`) drops Prefect's retries for the
rest of the process: the engine then reports the failed flow to the dead server in one refused
request, not after two more rounds of a minute each (the bench's `server-gone`: 216 s after the
fault before, for a 30 s setting).

    flow_run = ride_api("submitting control seed 0", lambda: run_deployment(...))
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

import httpx
from prefect.context import SettingsContext, get_settings_context
from prefect.settings import PREFECT_API_URL, PREFECT_CLIENT_MAX_RETRIES, Settings

from ablations.checkpoint.outage import ride_out, seconds_from_env
from ablations.errors import ApiUnreachable

API_OUTAGE_ENV = "ABLATE_API_OUTAGE_SECONDS"
"""Seconds of a Prefect server's outage a campaign on a work pool rides through per call."""
DEFAULT_API_OUTAGE_SECONDS = 120.0
"""A server restarted (10 to 30 s to answer again on a migrated database), its database
restarted: a minute or two. Longer, and a server that is gone keeps the command waiting; the
runs in flight go on and the rerun takes their results from the store. A call may take a
few seconds more than this: the last try, and the engine's one refused report after it."""
CHAIN_DEPTH = 8
"""How far down the chain of causes an `ApiUnreachable` is looked for."""
SERVER_FAILED = frozenset({408, 429})
"""Answers besides the 5xx that are the server failing, not answering: a timeout, a limit."""

T = TypeVar("T")


class _CampaignApi:
    """A campaign's view of the server: its own settings context, and whether a call of its
    gave up on the server (then the server is gone for all of them)."""

    def __init__(self, settings: SettingsContext) -> None:
        self.settings = settings
        self.gone: ApiUnreachable | None = None
        """The first call's give-up: the campaign's one line, whichever call ends it."""

    def give_up(self, unreachable: ApiUnreachable) -> None:
        """Whatever the campaign's process asks the server from now on (the engine reporting
        the failed flow, a call of ours still riding) ends at its first failure."""
        if self.gone is None:
            self.gone = unreachable
        self.settings.settings = self.settings.settings.copy_with_update(
            updates={PREFECT_CLIENT_MAX_RETRIES: 0}
        )


_CAMPAIGN: ContextVar[_CampaignApi | None] = ContextVar("ablate_campaign_api", default=None)
"""What `retries_until_gone` entered (None outside one): the flow's thread and its tasks'
threads copy the context, so each sees this one object."""


class _WithoutRetries:
    """The current settings with Prefect's retries off, made once per settings object: made
    afresh (`temporary_settings`) each settings copy reads the environment and the profile
    files again, which was 60% of a pool campaign's CPU (one per API call)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[int, tuple[Settings, Settings]] = {}

    def of(self, settings: Settings) -> Settings:
        if settings.client.max_retries == 0:
            return settings
        with self._lock:
            made = self._made.get(id(settings))  # held here: its id is not reused meanwhile
            if made is None:
                if len(self._made) > 16:  # settings contexts come and go (tests, the UI's)
                    self._made.clear()
                without = settings.copy_with_update(updates={PREFECT_CLIENT_MAX_RETRIES: 0})
                made = self._made[id(settings)] = (settings, without)
        return made[1]


_WITHOUT_RETRIES = _WithoutRetries()


@contextmanager
def no_client_retries() -> Iterator[None]:
    """Prefect's client without its own retries in this block: `ride_api` is the retry policy."""
    current = get_settings_context()
    with SettingsContext(profile=current.profile, settings=_WITHOUT_RETRIES.of(current.settings)):
        yield


@contextmanager
def retries_until_gone() -> Iterator[None]:
    """A settings context of the campaign's own, as the current one: Prefect's client retries
    as configured (the engine's requests ride a server restart's refused connections and 503s
    on them) until a call of ours gives up on the server (`ride_api`), none after, in every
    thread that copied this context (the flow's, its tasks'); and each call of ours still
    riding then gives up at its next failure, not at the end of its own outage."""
    current = get_settings_context()
    own = SettingsContext(profile=current.profile, settings=current.settings)
    with own:
        token = _CAMPAIGN.set(_CampaignApi(own))
        try:
            yield
        finally:
            _CAMPAIGN.reset(token)


def api_outage_seconds() -> float:
    """`ABLATE_API_OUTAGE_SECONDS`, else `DEFAULT_API_OUTAGE_SECONDS`; `InputError` for a
    value that is not a number of seconds from 0 to a day."""
    return seconds_from_env(API_OUTAGE_ENV, DEFAULT_API_OUTAGE_SECONDS)


def server_failed(exc: Exception) -> bool:
    """Whether another try may succeed: no connection, a cut one, a timeout, or an answer
    that says the server failed (a 5xx, 408, 429), not that the request was wrong."""
    if isinstance(exc, httpx.TransportError):  # refused, reset, timed out, protocol broken
        return True
    if isinstance(exc, httpx.HTTPStatusError):  # Prefect's own error is one
        code = exc.response.status_code
        return code >= 500 or code in SERVER_FAILED
    return False


def ride_api(what: str, call: Callable[[], T], seconds: float | None = None) -> T:
    """`call()` (a request to the Prefect API), ridden through an outage of up to `seconds`
    (None: `api_outage_seconds()`); `ApiUnreachable` naming the server, `what` and the last
    error after that."""
    limit = api_outage_seconds() if seconds is None else seconds
    server = PREFECT_API_URL.value() or "the Prefect API"

    def unreachable(exc: Exception, tries: int, elapsed: float) -> Exception:
        return ApiUnreachable(
            f"the Prefect server {server} did not answer {what} through {tries} "
            f"tr{'y' if tries == 1 else 'ies'} over {elapsed:.0f} s (a campaign rides through "
            f"{limit:g} s, {API_OUTAGE_ENV}): {type(exc).__name__}: {str(exc)[:200]}; the runs "
            "in flight go on, and a rerun with the same --out takes their results"
        )

    campaign = _CAMPAIGN.get()

    def once() -> T:
        try:
            with no_client_retries():
                return call()
        except Exception as exc:
            gone = campaign.gone if campaign is not None else None
            if gone is None or not server_failed(exc):
                raise
            raise ApiUnreachable(str(gone)) from exc  # the first call's line, naming the setting

    try:
        return ride_out(f"Prefect API {server}: {what}", once, limit, server_failed, unreachable)
    except ApiUnreachable as exc:
        if campaign is not None:
            campaign.give_up(exc)
        raise


def server_lost(exc: BaseException) -> ApiUnreachable | None:
    """The one line for a campaign whose flow ended because the server stopped answering:
    the `ApiUnreachable` of one of its calls (also when Prefect's engine then failed to
    report the flow's state, raising its own error over it), or one made of the engine's
    connection error. None for any other failure."""
    seen: BaseException | None = exc
    for _ in range(CHAIN_DEPTH):
        if seen is None:
            break
        if isinstance(seen, ApiUnreachable):
            return seen
        seen = seen.__cause__ or seen.__context__
    if isinstance(exc, Exception) and server_failed(exc):
        server = PREFECT_API_URL.value() or "the Prefect API"
        return ApiUnreachable(
            f"the Prefect server {server} stopped answering the campaign's flow run through "
            f"Prefect's own retries: {type(exc).__name__}: {str(exc)[:200]}; the runs in "
            "flight go on, and a rerun with the same --out takes their results"
        )
    return None
