"""The flow runs of `ablate worker`: forked from a server that has Prefect imported, not started.

`prefect worker start` starts each flow run as a new interpreter (`python -m prefect.engine`,
by default behind Prefect's supervisor: a second one). On a host that is 1.3 to 2.4 CPU s of
imports and 2 to 5 s before the run is Running, then 1 to 2 s of interpreter shutdown after
its Completed state while the worker's slot stays taken (docs/performance.md, "Beyond one
machine"). `ablate worker` (`flows.host_worker`) starts multiprocessing's fork server once,
with this module preloaded: Prefect's engine, the `run` flow, ablate's host side and the
store's S3 client are imported there, Prefect's deferred pydantic models built and botocore's
S3 model parsed, once per host. Each flow run is a process forked from
it that runs Prefect's own engine entry point (`python -m prefect.engine`'s `__main__`, so
the engine is Prefect's, whatever its version), then exits without an interpreter's shutdown:
multiprocessing ends a child with `os._exit` after `threading._shutdown`, which runs the
exit hooks of Prefect's log and event services, so the run's last logs and events are sent.

Forking is safe here: importing these modules starts no thread and opens no connection (the
server forks before any client exists), and nothing here touches CUDA: a run on a CUDA slot
starts its own slot worker (`ablations.workers.worker`), which picks its card before torch
initialises it. Only multiprocessing's fork server imports this module as a preload; a run's
process imports it again only to find `run_engine` (already loaded: no cost), and the worker
imports it once, off its event loop, for the same name.

In each fork, two parts of Prefect 3.9's engine are left out (`run_engine`): the per-run
suspension watch and the wait for the heartbeat thread at the end (their docstrings say why);
`tests/flows/test_host_worker.py` fails when a Prefect version renames what they replace.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import runpy
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import prefect.context
import prefect.engine  # imported once here, run as __main__ per flow run below
import prefect.flow_engine
import s3fs  # noqa: F401  (a pool's store is S3: its client's imports are half of the host side's)

import flows.run  # noqa: F401  (the deployment's entry point, and ablate's host side)
from ablations.checkpoint import s3_session

RUN_IMPORTS = ("ablations.byo.command", "ablations.byo.run", "encodings.idna")
"""What each run imported on its own (a command workload's adapter; the codec of a first
request to a host by name): 12 to 45 ms before its program started."""

VERSION_CHECK = "PREFECT_CLIENT_SERVER_VERSION_CHECK_ENABLED"


def _complete_models(prefixes: tuple[str, ...] = ("prefect", "ablations", "flows")) -> int:
    """Build the validators pydantic defers to a model's first use (Prefect defers hundreds:
    a run built those it used, reading its flow run and deployment, in each fork); how many.
    Here once per host: 0.07 CPU s."""
    from pydantic import BaseModel

    built = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith(prefixes):
            continue
        for value in list(vars(module).values()):
            if (
                isinstance(value, type)
                and issubclass(value, BaseModel)
                and value.__module__ == name
                and not value.__pydantic_complete__
            ):
                with contextlib.suppress(Exception):  # left to its first use, as before
                    built += bool(value.model_rebuild())
    return built


for _module in RUN_IMPORTS:
    importlib.import_module(_module)
_complete_models()
s3_session.warm()  # every fork's S3 clients without parsing botocore's S3 model again
# What is loaded so far lives as long as the server and every run: out of the garbage
# collector's reach, so a run's collections do not walk (and so copy) the server's pages.
gc.freeze()


def run_engine(
    flow_run_id: str, environment: Mapping[str, str | None], working_dir: str | None
) -> None:
    """Run one flow run in this forked process, as `python -m prefect.engine` would.

    `environment` is the flow run's job configuration's (Prefect's settings, the flow run's
    id, the pool's and deployment's variables): applied over the worker's environment, which
    this process inherited, then Prefect's settings are read again from it. The run works in
    `working_dir`, or as Prefect's process worker does without one, in a temporary folder
    removed after it. The engine's exit code becomes this process's (`SystemExit`, which
    multiprocessing turns into the code)."""
    for key, value in environment.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    os.environ["PREFECT__FLOW_RUN_ID"] = flow_run_id
    # The worker that forked this run checked the server's version as it started, with this
    # same Prefect; each client of the run (the engine's, its log and event services') asked
    # again: a request each, one of them before the run is Running. A job's own value stands.
    os.environ.setdefault(VERSION_CHECK, "false")
    _refresh_settings()
    _without_suspension_observer()
    _heartbeats_without_join()
    sys.argv = [sys.argv[0], flow_run_id]
    scratch = None if working_dir else tempfile.mkdtemp(suffix="prefect")
    os.chdir(working_dir or scratch or ".")
    try:
        with warnings.catch_warnings():
            # runpy's note that the module it runs as __main__ is imported already: it is,
            # on purpose (above); its body only defines what the main block calls.
            warnings.filterwarnings("ignore", "'prefect.engine' found", RuntimeWarning)
            runpy.run_module("prefect.engine", run_name="__main__", alter_sys=True)
    finally:
        if scratch is not None:
            os.chdir("/")
            shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def _no_observer(*args: Any, **kwargs: Any) -> Iterator[None]:
    yield


def _without_suspension_observer() -> None:
    """No watch for a `suspend_flow_run` of this run: Prefect 3.9's engine opens one per flow
    run of a deployment (a thread, its own event loop, client and events subscription) and
    waits for it to connect before the flow starts: 11% of a host's CPU per run (py-spy),
    and a websocket per run for the server. The `run` flow never suspends itself, and a run
    stopped from outside is cancelled (`HostWorker._cancel_run`), not suspended."""
    import prefect.flow_engine

    if hasattr(prefect.flow_engine, "observe_flow_run_suspension"):
        prefect.flow_engine.observe_flow_run_suspension = _no_observer


def _heartbeats_without_join() -> None:
    """Prefect's flow-run heartbeats (every 180 s by default), their thread not waited for at
    the flow's end, as Prefect's async engine does already: it sleeps in whole seconds, so the
    sync engine's join kept each run's process, and its host's slot, half a second on average
    after its Completed state (py-spy). The thread is a daemon; it emits nothing once the run
    is final."""
    import prefect.flow_engine

    send = getattr(prefect.flow_engine, "_send_heartbeats", None)
    if send is None or getattr(send, "__wrapped_by_ablate__", False):
        return

    @contextlib.contextmanager
    def without_join(engine: Any, join_on_exit: bool = True) -> Iterator[None]:
        with send(engine, join_on_exit=False):
            yield

    without_join.__wrapped_by_ablate__ = True  # type: ignore[attr-defined]
    prefect.flow_engine._send_heartbeats = without_join


def _refresh_settings() -> None:
    """Prefect's root settings from this process's environment (the server read them as it
    imported Prefect, before the flow run's variables were applied)."""
    refresh = getattr(prefect.context, "refresh_global_settings_context", None)
    if refresh is not None:
        refresh()
    else:  # pragma: no cover - Prefect before 3.9 names no refresh
        prefect.context.GLOBAL_SETTINGS_CONTEXT = prefect.context.root_settings_context()
