"""`ablate worker`: the command a GPU host runs to take a pool's runs (`flows.host_worker`).

    ablate worker --pool gpus --devices cuda:0,cuda:1 --host gpu-1

Its settings are the host's (`ablations.pool.host`): `--devices` and `--host` are
`ABLATE_DEVICES` and `ABLATE_HOST`, set for the worker and so for every run it starts; the
host's other limits (`ABLATE_ALLOW_ENTRY`, `ABLATE_ALLOW_STORE`, `ABLATE_MAX_STEPS`,
`ABLATE_RUN_SECRET`) are read from its environment as before.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ablations.cli.arguments import positive_int, positive_seconds
from ablations.cli.registry import EXIT_OK, command
from ablations.errors import InputError
from ablations.text.say import say

QUERY_SECONDS = 1.0
"""How often the worker asks for runs: a run waits half of it on average before it starts.
One request a second per host is little next to a run's own (about 20 to the server)."""


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "worker",
        help="take a work pool's runs on this host's devices (one per GPU host)",
        description="Take the runs `ablate run --pool NAME` submits, on this host's devices: "
        "Prefect's process worker, each run forked from a process that has Prefect and "
        "ablate imported (seconds less per run than `prefect worker start`).",
    )
    p.add_argument("--pool", required=True, help="the process work pool (prefect.yaml's)")
    p.add_argument(
        "--queue",
        action="append",
        default=[],
        metavar="NAME",
        help="serve only this work queue of the pool (repeatable; default: all of them)",
    )
    p.add_argument(
        "--devices",
        help="this host's devices: auto, N (CPU slots) or cuda:0,cuda:1 (default: "
        "ABLATE_DEVICES, else auto)",
    )
    p.add_argument("--host", help="the name records show (default: ABLATE_HOST, else hostname)")
    p.add_argument(
        "--limit",
        type=positive_int,
        help="the most runs at once (default: the number of devices)",
    )
    p.add_argument(
        "--query-seconds",
        type=positive_seconds,
        help="how often to ask the server for runs (default: PREFECT_WORKER_QUERY_SECONDS, "
        f"else {QUERY_SECONDS:g})",
    )
    p.add_argument("--name", help="the worker's name in the UI (default: ablate <host>)")


@command("worker")
def worker_command(args: argparse.Namespace) -> int:
    if args.devices is not None:
        os.environ["ABLATE_DEVICES"] = args.devices
    if args.host is not None:
        os.environ["ABLATE_HOST"] = args.host
    from ablations.pool.host import HostSlots

    # Bad input is named before any server call (a dead server would be exit 1 instead).
    host = HostSlots.from_env()
    query_seconds = args.query_seconds or _query_seconds_from_env()
    if not os.environ.get("PREFECT_API_URL"):
        raise InputError(
            "ablate worker takes runs from the Prefect server your campaigns submit to: set "
            "PREFECT_API_URL on this host, e.g. export PREFECT_API_URL=http://SERVER:4200/api"
        )
    from flows.local_server import require_configured_api

    require_configured_api("worker")
    from flows.host_worker import serve_pool

    limit = args.limit or len(host.slots)
    say(
        f"{args.name or f'ablate {host.host}'}: pool {args.pool}"
        + (f" (queues {', '.join(args.queue)})" if args.queue else "")
        + f", {len(host.slots)} slot(s) of {host.host} ({', '.join(s.name for s in host.slots)}),"
        f" at most {limit} run(s) at once; Ctrl-C stops it"
    )
    serve_pool(
        args.pool,
        queues=args.queue,
        limit=limit,
        name=args.name or f"ablate {host.host}",
        query_seconds=query_seconds,
    )
    return EXIT_OK


def _query_seconds_from_env() -> float:
    """PREFECT_WORKER_QUERY_SECONDS where the host sets it (Prefect's own worker reads it too);
    else `QUERY_SECONDS`, not Prefect's default of 10."""
    text = os.environ.get("PREFECT_WORKER_QUERY_SECONDS")
    if not text:
        return QUERY_SECONDS
    try:
        return positive_seconds(text)
    except argparse.ArgumentTypeError as exc:
        raise InputError(f"PREFECT_WORKER_QUERY_SECONDS: {exc}") from None
