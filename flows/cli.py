"""`ablate run` and `ablate serve`: the campaign flow from the terminal or the Prefect UI.

They join `ablate` through the `ablate.commands` entry point (pyproject.toml): the command
line in `ablations.cli` never imports Prefect.
"""

from __future__ import annotations

import argparse
import contextvars
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, cast

from ablations.cli.arguments import module_name, positive_seconds, store_url, webhook_url
from ablations.cli.registry import EXIT_INTERNAL, EXIT_OK, command
from ablations.errors import CampaignInterrupted, GateUnanswerable, InputError, PlanError
from ablations.files.names import GATE, REFRAME_DRAFT, REPORT
from ablations.process.preemption import TERMINATE, listen_for_sigterm

# `ablate`'s parser loads this module for every command (`add_parsers`): what the commands
# use is imported when they run, so `ablate --help` and `ablate validate` load no campaign,
# no numpy, no Prefect (`bench/cli_latency.py`).
if TYPE_CHECKING:
    from ablations.campaign.executor import Executor
    from ablations.campaign.manifest import Manifest
    from ablations.campaign.opening import Admission
    from ablations.local.executor import LocalSlots
    from ablations.plan.io import WorkloadCheck
    from ablations.plan.model import Plan
    from ablations.slots.devices import SlotSpec
    from flows.local_server import TemporaryServer
    from flows.pool import PoolExecutor
    from flows.pool_interrupt import CampaignFlowRun


def add_parsers(sub: Any) -> None:
    """Add `run` and `serve` to the `ablate` parser."""
    p = sub.add_parser("run", help="run the campaign as a Prefect flow")
    p.add_argument("plan", type=Path)
    p.add_argument(
        "--out", type=Path, default=None, help="output folder (default: runs/<campaign id>)"
    )
    p.add_argument(
        "--gate",
        choices=["auto", "ui"],
        default=None,
        help="override the plan's gate mode (not part of the plan hash)",
    )
    p.add_argument(
        "--devices",
        default=None,
        help="override resources.devices: auto, a number of CPU slots, or cuda:0,cuda:1",
    )
    p.add_argument(
        "--pool",
        default=None,
        help="run each run on this Prefect work pool's workers (deployment run/POOL); "
        "--devices then counts the pool's devices",
    )
    p.add_argument(
        "--queue",
        default=None,
        help="with --pool: the pool's work queue for the runs (default: its default queue); "
        "a queue's priority and concurrency limit give a campaign precedence or a bounded share",
    )
    p.add_argument(
        "--heartbeat-timeout",
        type=positive_seconds,
        default=120.0,
        help="with --pool: seconds without a heartbeat before a run's host is presumed lost",
    )
    p = sub.add_parser("serve", help="serve the campaign as a deployment for the Prefect UI")
    p.add_argument("--name", default="ablate", help="deployment name")
    p.add_argument(
        "--root",
        action="append",
        type=Path,
        metavar="DIR",
        help="a folder plan_path and out_dir must lie under (repeatable; default: the working "
        "directory)",
    )
    p.add_argument(
        "--allow-entry",
        action="append",
        default=[],
        type=module_name,
        metavar="MODULE",
        help="a workload module (or package) plans may name besides the built-in ones "
        "(repeatable), e.g. mypkg.train",
    )
    p.add_argument(
        "--allow-store",
        action="append",
        default=[],
        type=store_url,
        metavar="URL",
        help="a checkpoint store plans may use besides their own folder and the --root "
        "folders (repeatable): s3://BUCKET/PREFIX, file:///PATH, and an S3 endpoint_url "
        "(https://HOST) a plan may name",
    )
    p = sub.add_parser(
        "notify",
        help="create Prefect automations that notify you: a campaign failed, a UI gate waits, "
        "a campaign finished (with its decision)",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--block",
        metavar="TYPE/NAME",
        help="a saved Prefect notification block, e.g. slack-webhook/my-team or "
        "email/me (Blocks in the UI)",
    )
    where.add_argument(
        "--webhook",
        metavar="URL",
        type=webhook_url,
        help="POST {subject, body} as JSON to URL (saved as the custom-webhook/ablate-webhook "
        "block)",
    )
    p.add_argument(
        "--flow",
        default="ablation-campaign",
        help="the flow whose runs notify (default: %(default)s)",
    )


@command("run")
def run_command(args: argparse.Namespace) -> int:
    from ablations.campaign.lock import hold_folder
    from ablations.campaign.opening import admit
    from ablations.local.executor import local_slots_for
    from ablations.plan.io import read_plan_text
    from flows.environment import quiet_prefect
    from flows.local_server import require_configured_api, start_unless_configured

    quiet_prefect()
    local = args.pool is None
    if args.queue:  # only with a pool, which imports flows.pool anyway
        from flows.pool import require_queue_with_pool

        require_queue_with_pool(args.pool, args.queue)
    # Bad input exits 2 here, before any work starts: the plan is read and parsed once, a
    # conflicting folder refused before Prefect starts. A local campaign's workload is
    # imported (and so checked) in its slot workers below: this process never loads torch.
    text = read_plan_text(args.plan)
    workload: WorkloadCheck = "find" if local else "import"
    admission = admit(text, str(args.plan), args.out, workload=workload)
    plan, out_dir = admission.plan, admission.out_dir
    pool: PoolExecutor | None = None
    slots: list[SlotSpec] = []
    if local:
        slots = local_slots_for(plan, args.plan, args.devices)
    else:  # the runs go to the pool's hosts: nothing about this machine's devices matters
        from flows.pool import PoolExecutor

        pool = PoolExecutor.for_plan(
            plan, args.pool, args.devices, args.heartbeat_timeout, queue=args.queue
        )
    if local:
        refuse_unanswerable_gate(args.gate, plan, out_dir)
    opened: list[LocalSlots] = []
    if local and plan.checkpoint.on_terminate:
        _save_on_sigterm(plan, out_dir, opened)
    if local:
        _stop_on_ctrl_c(plan, opened)
    campaign_run = None
    if pool is not None:  # its runs are on their hosts: a signal ends this process at once
        from flows.pool_interrupt import CampaignFlowRun, leave_on_signal

        campaign_run = CampaignFlowRun()
        leave_on_signal(pool, campaign_run, f"ablate run {args.plan} --out {out_dir}")
    require_configured_api("run")  # a dead PREFECT_API_URL: one line, exit 1, nothing started
    # One writer per folder, before anything is written to it (or a server started for it).
    with hold_folder(out_dir):
        # Now, so it comes up while everything below runs (with --pool the runs' hosts need a
        # server they can reach, which a temporary one on loopback is not).
        server = start_unless_configured() if local else None
        try:
            with _executor(
                plan, str(args.plan), out_dir, slots, pool, opened, meanwhile=_import_the_flow
            ) as executor:
                return _run_campaign(args, admission, executor, server, campaign_run)
        except BaseException as exc:
            if server is not None:  # at once; a finished campaign stops it after Prefect's drains
                server.stop()
            if TERMINATE.requested and TERMINATE.reason == CTRL_C:
                return EXIT_INTERRUPTED  # its one line was printed when it came
            if TERMINATE.requested:  # the slots are closed: every run saved what it could
                raise CampaignInterrupted(
                    f"{TERMINATE.reason} received: every run that was running committed a "
                    f"checkpoint at its step; rerun `ablate run {args.plan} --out {out_dir}` to "
                    "go on from there"
                ) from exc
            raise


def refuse_unanswerable_gate(flag: str | None, plan: Plan, out_dir: Path) -> None:
    """Refuse, before anything starts, a UI gate nobody could answer: the temporary server of
    a local `ablate run` serves no UI (Prefect's ephemeral server; it ends with the command),
    so without a configured server (PREFECT_API_URL, in the environment or the Prefect
    profile) the campaign would idle its slots for `gate.timeout_minutes` waiting. A folder
    whose gate was decided asks nothing again. A configured server that does not answer is
    `require_configured_api`'s refusal (exit 1), as for any campaign."""
    if (flag or plan.gate.mode) != "ui" or (out_dir / GATE).exists():
        return
    from prefect.settings import get_current_settings

    given = "--gate ui" if flag else "the plan's gate.mode: ui"
    url = get_current_settings().api.url
    if not url:
        raise GateUnanswerable(
            f"{given} asks in the Prefect UI, and the temporary server of `ablate run` has "
            "none: set PREFECT_API_URL to a server you open (`prefect server start`, then "
            "export PREFECT_API_URL=http://127.0.0.1:4200/api), or run `ablate serve` and start "
            "the campaign from the UI"
        )


def _save_on_sigterm(plan: Plan, out_dir: Path, opened: list[LocalSlots]) -> None:
    """On SIGTERM, pass it on to the slot workers (each run commits its current step, see
    `ablations.process.preemption`); the campaign then ends with one line, exit 1. Should anything
    hang, the process exits anyway once the grace period is over."""
    grace = plan.checkpoint.terminate_grace_seconds

    def give_up() -> None:
        print(
            f"error: {TERMINATE.reason} received and the campaign did not stop within "
            f"{grace:g} s (checkpoint.terminate_grace_seconds); rerun with --out {out_dir}",
            file=sys.stderr,
        )
        os._exit(EXIT_INTERNAL)

    def forward() -> None:
        for executor in opened:
            executor.terminate()
        # os.write: a signal handler must not re-enter a buffered stream the main thread uses.
        os.write(
            sys.stderr.fileno(),
            f"{TERMINATE.reason}: the running runs commit their current step and stop "
            f"(grace {grace:g} s)\n".encode(),
        )
        # A little after the workers' own deadline, so their exits come first.
        deadline = threading.Timer(grace + 2.0, give_up)
        deadline.daemon = True
        deadline.start()

    listen_for_sigterm(then=forward)


CTRL_C = "SIGINT"
"""`TERMINATE.reason` after a Ctrl-C (the signal's name, as a SIGTERM's is `SIGTERM`)."""
EXIT_INTERRUPTED = 128 + signal.SIGINT
"""130: what a shell reports for a command a Ctrl-C ended, and what `ablate run` exits with."""


def _stop_on_ctrl_c(plan: Plan, opened: list[LocalSlots]) -> None:
    """On a Ctrl-C, stop as on a SIGTERM (each running run commits its step and nothing new
    starts), say so in one line at once, and exit 130 without tracebacks, no gate or preflight
    verdict recorded. A plan that does not save on terminate has nothing to commit: it exits
    at once, as a kill would (its runs resume from their last checkpoint). The terminal sends
    SIGINT to the whole process group: the slot workers ignore it, and a command's program and
    the temporary Prefect server are in groups of their own, so only this process acts on it.
    A second Ctrl-C exits at once (the runs resume from their last committed checkpoint)."""
    from flows.environment import silence_run_failures

    saves = plan.checkpoint.on_terminate
    grace = plan.checkpoint.terminate_grace_seconds

    def give_up() -> None:
        os.write(
            sys.stderr.fileno(),
            f"error: the campaign did not stop within {grace:g} s of the Ctrl-C "
            "(checkpoint.terminate_grace_seconds); rerun the same command to resume\n".encode(),
        )
        os._exit(EXIT_INTERRUPTED)

    def handler(signum: int, frame: FrameType | None) -> None:
        if TERMINATE.requested and TERMINATE.reason == CTRL_C:  # the second: at once
            os._exit(EXIT_INTERRUPTED)
        first = not TERMINATE.requested
        TERMINATE.request(CTRL_C)
        if not first:  # a SIGTERM came first: its own line and deadline hold
            return
        silence_run_failures()  # each run stopping fails its task: this line says it all
        # os.write: a signal handler must not re-enter a buffered stream the main thread uses.
        if not saves:  # nothing to commit: end now, as a kill would (every write is atomic)
            os.write(
                sys.stderr.fileno(),
                b"\ninterrupted: the running runs stop now and resume from their last committed "
                b"checkpoint (checkpoint.on_terminate is off); rerun the same command to resume\n",
            )
            os._exit(EXIT_INTERRUPTED)  # the workers, their programs and the server go with it
        for executor in opened:
            executor.terminate()
        line = (
            f"\ninterrupted: the running runs commit their current step and stop (within "
            f"{grace:g} s; Ctrl-C again to quit at once); rerun the same command to resume\n"
        )
        os.write(sys.stderr.fileno(), line.encode())
        deadline = threading.Timer(grace + 2.0, give_up)
        deadline.daemon = True
        deadline.start()

    signal.signal(signal.SIGINT, handler)


@contextmanager
def _executor(
    plan: Plan,
    source: str,
    out_dir: Path,
    slots: list[SlotSpec],
    pool: PoolExecutor | None,
    opened: list[LocalSlots],
    meanwhile: Callable[[], object],
) -> Iterator[Executor]:
    """The pool's executor, or this machine's slots: their workers start now, so their
    imports overlap the server's start and `meanwhile` (called before the workers are waited
    for), and the workload's import is checked in the first. The slots are added to `opened`
    (a SIGTERM is passed on to their workers)."""
    if pool is not None:
        meanwhile()
        yield pool
        return
    from ablations.local.executor import LocalSlots, warmup_for

    with LocalSlots.open(slots, warmup_for(plan, out_dir)) as executor:
        opened.append(executor)
        meanwhile()
        problem = executor.workload_problem()
        if problem is not None:
            raise PlanError([problem], source)
        # A SIGTERM while the workers started (before one could hold a run) ends it here: the
        # workers may have died of it before their handler was in place, nothing is running.
        if TERMINATE.requested:
            raise CampaignInterrupted(f"{TERMINATE.reason} received while starting")
        yield executor


def _import_the_flow() -> None:
    """Import the flow and Prefect's engine (about 2 CPU-seconds) while the slot workers
    start in their own processes, not after: a campaign's first line came 2 s sooner on an
    idle 2-core machine (measured)."""
    import prefect.task_runners  # noqa: F401

    import flows.campaign  # noqa: F401


def _run_campaign(
    args: argparse.Namespace,
    admission: Admission,
    executor: Executor,
    server: TemporaryServer | None,
    campaign_run: CampaignFlowRun | None = None,
) -> int:
    from prefect.task_runners import ThreadPoolTaskRunner

    from flows.api_outage import retries_until_gone, server_lost
    from flows.campaign import campaign_flow
    from flows.environment import forget_the_server, quiet_dropped_items, quiet_run_failures
    from flows.local_server import campaign_api

    quiet_run_failures(keep_lines=server is None)  # this command reports the cause
    quiet_dropped_items()  # a server restarting under a pool campaign: short lines
    out_dir = admission.out_dir
    campaign = campaign_flow(executor, admission).with_options(
        # named after the admitted plan: Prefect's name callback would read the plan again
        flow_run_name=admission.plan.campaign.id,
        task_runner=ThreadPoolTaskRunner(max_workers=executor.threads),  # type: ignore[arg-type]
        # its id, for a pool campaign's interrupt (`flows.pool_interrupt`)
        on_running=[campaign_run.remember] if campaign_run is not None else None,
    )
    # Prefect's client retries in the flow's engine until a call of ours gives up on the
    # server, none after: its reports of the failed flow to a server gone end at once.
    with campaign_api(server), retries_until_gone():
        # The flow returns a state: its data (the manifest the results step wrote) when it
        # completed; the error it carries (exit 2 for bad input) is raised otherwise. It runs
        # off the main thread, so SIGTERM reaches ablate's handler, not Prefect's.
        try:
            manifest = _off_the_main_thread(
                lambda: campaign(
                    plan_path=str(args.plan),
                    out_dir=str(out_dir),
                    gate=args.gate or "plan",  # the flow's form has no null: "not given"
                    devices=args.devices or "",
                    pool=args.pool or "",
                    queue=args.queue or "",  # the flow run's parameters show where runs went
                    heartbeat_timeout_s=args.heartbeat_timeout,
                )
            )
        except Exception as exc:
            # A configured server gone past the outage ridden through: one line, exit 1,
            # not Prefect's own error (or an "internal error") about the flow's state.
            lost = server_lost(exc) if server is None else None
            if lost is None:
                raise
            forget_the_server()
            if lost is exc:
                raise
            raise lost from exc
    _print_outcome(manifest, out_dir)
    # A defect of the workload or data stopped the campaign before its pilot: not a success.
    fixing = manifest.gate is not None and manifest.gate.decision == "fix"
    return EXIT_INTERNAL if fixing else EXIT_OK


def _off_the_main_thread(call: Callable[[], object]) -> Manifest:
    """Run the flow in a thread while the main thread waits, free to handle a SIGTERM at once.
    In the main thread Prefect would install its own handler, which ends the flow only once
    its running tasks return: the runs would train to their end before being told to save."""
    outcome: dict[str, Any] = {}

    # The caller's context too: `campaign_api` points Prefect at the temporary server through
    # context variables, which a new thread would not see (Prefect would start a server of its
    # own, one that outlives a killed campaign).
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome["value"] = context.run(call)
        except BaseException as exc:  # raised again in the main thread below
            outcome["error"] = exc

    # A daemon: a Ctrl-C in the main thread ends the process without waiting for the flow.
    thread = threading.Thread(target=target, name="campaign-flow", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.2)
    if "error" in outcome:
        raise outcome["error"]
    return cast("Manifest", outcome["value"])


def _print_outcome(manifest: Manifest, out_dir: Path) -> None:
    gate = manifest.gate
    counts: dict[str, int] = {}
    for run in manifest.runs:
        counts[run.status] = counts.get(run.status, 0) + 1
    decision = gate.decision if gate else None
    print(f"\ngate: {decision or '?'}: {gate.reason if gate else ''}")
    if manifest.decision_reached:
        print(f"decision: {manifest.decision_reached}")
    print("runs: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
    report = out_dir / REPORT
    print(f"output: {out_dir}" + (f" (report: {report})" if report.exists() else ""))
    if decision == "reframe":
        print(f"draft plan for the revised question: {out_dir / REFRAME_DRAFT}")
    if decision == "fix":
        print(
            f"fix the defect above, then rerun with --out {out_dir}: preflight runs again "
            "(the gate's fix is not kept)"
        )


@command("notify")
def notify_command(args: argparse.Namespace) -> int:
    from flows.environment import quiet_prefect

    quiet_prefect()
    from prefect.settings import PREFECT_API_URL

    from flows.notify import block_id, create_notifications, webhook_block

    if not PREFECT_API_URL.value():  # a temporary server would forget them when it stops
        raise InputError(
            "ablate notify needs the Prefect server your campaigns run on: set PREFECT_API_URL, "
            "e.g. export PREFECT_API_URL=http://127.0.0.1:4200/api"
        )
    from flows.local_server import require_configured_api

    require_configured_api("notify")
    block = webhook_block(args.webhook) if args.webhook else block_id(args.block)
    for name in create_notifications(block, args.flow):
        print(f"automation {name!r}: created")
    return EXIT_OK


@command("serve")
def serve_command(args: argparse.Namespace) -> int:
    from flows.environment import quiet_prefect

    quiet_prefect()
    from flows.boundary import Boundary

    # A run launched from the UI keeps Prefect's random name until this process picks it up
    # and names it after its campaign: poll every 2 s instead of 10.
    os.environ.setdefault("PREFECT_RUNNER_POLL_FREQUENCY", "2")
    from flows.serve import serve_campaign

    boundary = Boundary.of(args.root or [Path.cwd()], args.allow_entry, args.allow_store)
    serve_campaign(args.name, boundary)
    return EXIT_OK
