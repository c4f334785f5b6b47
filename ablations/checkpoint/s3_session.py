"""One parse of botocore's S3 model per process, shared by every S3 client made in it.

Each `open_store` of an S3 store makes a new client (`skip_instance_cache`: no stale endpoint
or listing), and a new botocore session parses the S3 service model, its endpoint rules and
the endpoints file again: 60 to 100 ms of CPU per client, measured, where a session given the
process's loader makes one in 3 ms. Only the loader (parsed JSON from botocore's own data
files) is shared: each store still gets its own session, so credentials are resolved from the
environment as it is when the store is opened. `warm()` parses it ahead (`ablate worker`'s
fork server: every run forked from it makes its clients in milliseconds).
"""

from __future__ import annotations

import threading
from typing import Any

_LOCK = threading.Lock()
_LOADER: Any = None


def s3_session() -> Any:
    """A new aiobotocore session that reads botocore's data through this process's loader."""
    from aiobotocore.session import AioSession
    from botocore.loaders import create_loader

    global _LOADER
    with _LOCK:
        if _LOADER is None:
            _LOADER = create_loader()
        loader = _LOADER
    session = AioSession()
    session.register_component("data_loader", loader)
    return session


def warm() -> None:
    """Parse the S3 model, endpoint rules and endpoints into the loader now: one client made
    and closed, without a request (no thread or connection is left behind). Called where an
    event loop runs, it makes it in a thread of its own, joined."""
    import asyncio

    async def make_one() -> None:
        client = s3_session().create_client(
            "s3",
            region_name="us-east-1",
            endpoint_url="http://127.0.0.1:9",  # never contacted
            aws_access_key_id="warm",
            aws_secret_access_key="warm",
        )
        async with client:
            pass

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # none here: the usual case (a fork server's preload)
        asyncio.run(make_one())
        return
    aside = threading.Thread(target=lambda: asyncio.run(make_one()), name="s3-warm")
    aside.start()
    aside.join()
