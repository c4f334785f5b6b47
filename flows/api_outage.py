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

    flow_run = ride_api("submitting control seed 0", lambda: run_deployment(...))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import httpx
from prefect.settings import PREFECT_API_URL

from ablations.checkpoint.outage import ride_out, seconds_from_env
from ablations.errors import ApiUnreachable

API_OUTAGE_ENV = "ABLATE_API_OUTAGE_SECONDS"
"""Seconds of a Prefect server's outage a campaign on a work pool rides through per call."""
DEFAULT_API_OUTAGE_SECONDS = 120.0
"""A server restarted (10 to 30 s to answer again on a migrated database), its database
restarted: a minute or two. Longer, and a server that is gone keeps the command waiting; the
runs in flight go on and the rerun takes their results from the store. A call may take a
minute more than this: Prefect's client retries inside each of our tries."""
CHAIN_DEPTH = 8
"""How far down the chain of causes an `ApiUnreachable` is looked for."""
SERVER_FAILED = frozenset({408, 429})
"""Answers besides the 5xx that are the server failing, not answering: a timeout, a limit."""

T = TypeVar("T")


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

    return ride_out(f"Prefect API {server}: {what}", call, limit, server_failed, unreachable)


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
