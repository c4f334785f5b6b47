"""The campaign flow: open (register) -> preflight -> pilot -> gate -> main -> results.

It only sequences and fans out; every step is a task over one `ablations` call, and every
step is recognized as done on restart from the output folder. The plan is parsed once, when it
is admitted (by `ablate run` before the flow, or by the flow from its form), and the opened
`Campaign` (plan, registration, planned runs) is passed to every task: the tasks run in this
process (`ThreadPoolTaskRunner`), so none reads those again. The results step returns the
manifest it wrote, which the flow returns.
"""

# No `from __future__ import annotations` here: Prefect builds the deployment's parameter
# model from the flow's signature at run time, and string annotations break that.
import concurrent.futures
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from prefect import Flow, allow_failure, flow
from prefect.futures import PrefectFuture, as_completed
from prefect.states import Completed, Failed, State
from prefect.task_runners import ThreadPoolTaskRunner

from ablations.campaign.campaign import Campaign
from ablations.campaign.executor import Executor
from ablations.campaign.folder import REPORT
from ablations.campaign.live import LiveCampaign
from ablations.campaign.lock import hold_folder
from ablations.campaign.opening import Admission, one_line
from ablations.campaign.progress import look_lines, look_markdown, outcome, record_rows
from ablations.campaign.scheduling import longest_first
from ablations.campaign.steps import gate_decided, require_decidable
from ablations.errors import InputError
from ablations.local.executor import LocalSlots, local_slots_for, warmup_for
from ablations.plan.model import Plan
from ablations.plan.variants import PlannedRun
from ablations.report.md_html import plain
from ablations.results.summary import decision_sentence, final_rows
from ablations.run.records import RunRecord
from ablations.security.credentials import redact
from ablations.text.say import say
from flows.boundary import admitted
from flows.gate_ui import ask_in_ui, decision_markdown
from flows.live import LiveArtifacts
from flows.pool import PoolExecutor, require_queue_with_pool
from flows.run_log import run_logger
from flows.run_names import name_for, name_this_run
from tasks.artifacts import markdown_artifact, table_artifact
from tasks.campaign import open_campaign, project_campaign
from tasks.curves import show_curves
from tasks.gate import recommend_gate, record_gate_decision, resize_after_answer
from tasks.looks import decide_look, look_runs
from tasks.preflight import run_preflight
from tasks.results import write_results
from tasks.runs import execute_run


def _run_phase(
    campaign: Campaign,
    executor: Executor,
    runs: list[PlannedRun],
    live: LiveArtifacts,
    measured: list[RunRecord] | None = None,
) -> list[RunRecord]:
    ordered = longest_first(runs, measured or [])
    futures = [
        execute_run.submit(campaign, r.run_id, r.variant, r.seed, r.phase, executor)
        for r in ordered
    ]
    live.start([r.run_id for r in ordered])
    records = []
    for future in as_completed(futures):
        # A stopped, rejected or failed run's task state is not Completed; its record is still
        # the result, read as data. Anything else (a full disk, a lost store) is the task's
        # exception: raise it, once the other runs have stopped.
        result = future.result(raise_on_failure=False)
        if isinstance(result, BaseException):
            _stop_in_flight(executor, futures)
            raise result
        record = cast(RunRecord, result)
        records.append(record)
        counter = live.finish(record)
        # The run's one line, logged once under its task run: the task's page shows it (the
        # reason for a stopped run) and the flow's Logs tab shows it once, with the counter.
        say(
            f"  {counter} {record.phase} {record.variant} seed {record.seed}: "
            f"{record.status} ({outcome(record)})",
            # a finding to look at (stopped, rejected, failed) stands out in the Logs tab
            level=logging.INFO if record.status == "accepted" else logging.WARNING,
            about={"task_run_id": future.task_run_id},
        )
    return records


def _stop_in_flight(executor: Executor, futures: Sequence[PrefectFuture[Any]]) -> None:
    """The phase failed: its runs not started never start, the ones running are asked to
    commit their step and stop, and are waited for. Without this they trained to their end
    (hours, on a card) for a campaign that had failed; and a flow that owns its executor
    (from the UI) closed it under them, so each was retried on a fresh worker. Each comes
    back as an interrupted record, which a rerun resumes."""
    running = [f for f in futures if not _cancel_unstarted(f)]
    executor.terminate()
    for future in running:
        future.wait()


def _cancel_unstarted(future: PrefectFuture[Any]) -> bool:
    """Cancel the run's task if its thread has not picked it up yet; whether it was."""
    wrapped = getattr(future, "wrapped_future", None)  # ThreadPoolTaskRunner's futures
    return isinstance(wrapped, concurrent.futures.Future) and wrapped.cancel()


def _main_phase(
    campaign: Campaign,
    executor: Executor,
    live: LiveArtifacts,
    main: list[PlannedRun],
    measured: list[RunRecord],
    drawing: list[PrefectFuture[None]],
) -> None:
    """Look by look: run the look's seeds for the open variants, then decide each of them.
    The curves after each look are drawn meanwhile, added to `drawing`, each after the one
    before it, so the UI's latest are those of the look that decided; the flow waits for
    them beside the results step."""
    plan = campaign.plan
    records: list[RunRecord] = []
    unneeded = 0  # main runs no look started (trimmed ones were dropped at the gate)
    looks = len(plan.look_sizes)
    for look in range(looks):
        runs = look_runs(campaign, look)
        if not runs:
            break
        ran = _run_phase(campaign, executor, runs, live, measured + records)
        require_decidable(ran, "main")  # a look never decides on a run the machine failed
        records += ran
        decided = decide_look(campaign, look, len(executor.slots))
        for line in look_lines(decided, plan.metric.name):
            say(line)
        markdown_artifact(f"look-{look + 1}", look_markdown(decided))
        # beside the next look's runs (or the results step): the flow does not wait for it;
        # the UI's latest curves are those of the look that decided
        title = f"after look {look + 1} of {looks}"
        if not decided.still_open:
            title += ": every variant decided"
        after = [allow_failure(f) for f in drawing[-1:]]  # a drawing that failed: draw on
        drawing.append(show_curves.submit(campaign, title, return_state=False, wait_for=after))
        if not decided.still_open:
            break
        closed = {j.variant for j in decided.judgements} - set(decided.still_open)
        unneeded += live.drop([r.run_id for r in main if r.variant in closed])
    unneeded += live.drop([r.run_id for r in main])  # whatever no look started
    if unneeded:
        say(f"main: {unneeded} registered runs were not needed (their variants were decided)")


@dataclass(frozen=True)
class Placement:
    """Where the flow's runs go, as its form says (the flow's parameters of the same names)."""

    devices: str
    pool: str
    queue: str
    heartbeat_timeout_s: float


@contextmanager
def open_executor(
    plan: Plan, out_dir: str, plan_path: str, placement: Placement
) -> Iterator[Executor]:
    """The flow's own executor (a flow run from the UI): the pool's, or this machine's slots."""
    devices = placement.devices or None
    if placement.pool:
        yield PoolExecutor.for_plan(
            plan,
            placement.pool,
            devices,
            placement.heartbeat_timeout_s,
            queue=placement.queue or None,
        )
        return
    slots = local_slots_for(plan, Path(plan_path) if plan_path else None, devices)
    with LocalSlots.open(slots, warmup_for(plan, Path(out_dir))) as executor:
        yield executor


def _campaign(
    admission: Admission,
    plan_path: str,
    gate: Literal["plan", "auto", "ui"],
    placement: Placement,
    opened: Executor | None,
) -> State:
    """The campaign flow's body, run while the flow holds the output folder's lock."""
    # Registered and loaded from the admitted plan: every task below gets this campaign
    # (plan, registration, runs), and nothing parses the plan again.
    campaign = open_campaign(admission)
    with (
        nullcontext(opened)
        if opened is not None
        else open_executor(campaign.plan, str(campaign.out_dir), plan_path, placement)
    ) as executor:
        return _phases(campaign, gate, executor)


def _phases(campaign: Campaign, gate: Literal["plan", "auto", "ui"], executor: Executor) -> State:
    """preflight -> pilot -> gate -> main -> results, on the campaign's executor."""
    plan, registration = campaign.plan, campaign.registration
    slots = executor.slots
    projection = project_campaign(campaign, len(slots))
    pilot, main = campaign.phase("pilot"), campaign.phase("main")
    say(
        f"campaign {registration.campaign_id} (plan {registration.plan_hash[:12]}): "
        f"{len(pilot)} pilot + {len(main)} main runs on {len(slots)} slot(s) "
        f"[{', '.join(s.name for s in slots)}]"
    )
    live = LiveArtifacts(
        LiveCampaign.for_plan(plan, pilot + main, projection, registration.registered_at)
    )
    say("preflight: data check and restart check")
    preflight = run_preflight(campaign, executor)
    say(f"preflight: {'passed' if preflight.passed else 'FAILED'}")
    pilot_records: list[RunRecord] = []
    drawing: list[PrefectFuture[None]] = []  # the curves in the UI, drawn beside the runs
    if preflight.passed:
        say("pilot")
        pilot_records = _run_phase(campaign, executor, pilot, live)
        require_decidable(pilot_records, "pilot")  # nor the gate
        drawing.append(show_curves.submit(campaign, "the pilot"))  # while the gate decides
        table_artifact("pilot-runs", record_rows(pilot_records, plan.metric.name), "Pilot runs")
    asked_before = gate_decided(campaign)
    recommendation = recommend_gate(campaign, len(slots))
    mode = plan.gate.mode if gate == "plan" else gate
    decision = recommendation
    # a defect to fix is not a question for a person: nothing runs until it is fixed
    if mode == "ui" and not asked_before and recommendation.decision != "fix":
        decision = ask_in_ui(recommendation, main, int(plan.gate.timeout_minutes * 60))
        decision = resize_after_answer(campaign, decision, len(slots))
    decision = record_gate_decision(campaign, decision)
    say(f"gate: {decision.decision} ({decision.source}): {decision.reason}")
    markdown_artifact("gate-decision", decision_markdown(decision, main))
    if decision.decision in ("continue", "trim"):
        live.drop(decision.drop)
        looks = len(plan.look_sizes)
        say(
            f"main: up to {len(main) - len(decision.drop)} runs ({len(decision.drop)} trimmed) "
            f"in {looks} look{'s' if looks > 1 else ''} at {list(plan.look_sizes)} seeds"
        )
        _main_phase(campaign, executor, live, main, pilot_records, drawing)
    else:
        live.drop(r.run_id for r in main)
    manifest = write_results(campaign, executor)  # while the executor's slots are open
    for future in drawing:
        future.wait()
    table_artifact(
        "final-runs",
        final_rows(manifest, plan.metric.name),
        "Main-phase runs, trimmed and unneeded ones included",
    )
    decided = plain(decision_sentence(manifest))
    say(f"decision: {decided} (report: {campaign.out_dir / REPORT})")
    # The sentence is also the flow run's state message: the run page shows it, and the
    # "campaign finished" automation (`ablate notify`) sends it, as plain text (a chat or a
    # mail shows markdown's marks as they are) with nothing secret in it.
    return Completed(message=redact(decided), data=manifest)


def campaign_flow(
    opened: Executor | None = None, admission: Admission | None = None
) -> Flow[..., State]:
    """The campaign flow; it returns the `Manifest` the results step wrote. With `opened`, its
    runs go to that executor (`ablate run` opens its slots before Prefect's server is up, so
    their imports overlap the server's start); without, the flow opens its own from its
    parameters (a flow run from the UI). With `admission` (`ablate run` admitted the plan
    before it started anything), the flow takes it as it is; without, it admits the plan of
    its form itself."""

    @flow(
        name="ablation-campaign",
        task_runner=ThreadPoolTaskRunner(max_workers=16),  # type: ignore[arg-type]  # generic in stubs
        persist_result=False,
        log_prints=False,
    )
    def ablation_campaign(
        plan_path: str = "",
        plan_yaml: str = "",
        out_dir: str = "ablate-out",
        gate: Literal["plan", "auto", "ui"] = "plan",
        devices: str = "",
        pool: str = "",
        queue: str = "",
        heartbeat_timeout_s: float = 120.0,
    ) -> State:
        """Run an ablation campaign from a plan file (or inline YAML) into an output folder.

        Relative paths resolve against the working directory of the process that runs the flow:
        for the deployment, the `ablate serve` process, not the machine of your browser.

        Args:
            plan_path: Required unless plan_yaml is given. The plan's YAML file on the machine
                that runs the flow, e.g. /data/plans/digits.yaml (a relative path resolves
                against the serving process's working directory).
            plan_yaml: Required unless plan_path is given. The plan itself, pasted as YAML;
                used instead of plan_path when given.
            out_dir: The output folder (relative paths: against the serving process's working
                directory). Running again with the same plan and folder resumes the campaign.
            gate: Who decides after the pilot: plan (the plan's gate.mode), auto (the registered
                policy), or ui (the run pauses for your answer in this UI; after the plan's
                gate.timeout_minutes the policy decides).
            devices: Overrides the plan's resources.devices: auto, a number of CPU slots, or
                cuda:0,cuda:1. Empty: the plan's. With a pool: the pool's devices in all (auto:
                its online workers).
            pool: A Prefect process work pool whose workers run each run (deployment
                `run/<pool>`). Empty: the runs use this machine's devices.
            queue: With a pool: its work queue for this campaign's runs (its priority puts
                them before other campaigns' runs; its limit caps them). Empty: the pool's
                default queue.
            heartbeat_timeout_s: With a pool: seconds without a run's heartbeat before its host
                is presumed lost and the run is submitted again.
        """
        run_logger()  # progress lines also go to this run's logs in the UI
        named = admission is not None  # `ablate run` named the run after the admitted plan
        try:
            # Everything a person can get wrong in the form is checked here, in the flow
            # itself: in a task it would end in Prefect's traceback instead of one line.
            # Served: the paths inside the roots and the entry allowed, before anything is
            # touched; the text bounded whether pasted or read.
            require_queue_with_pool(pool, queue)
            admitted_plan = admission or admitted(plan_path, plan_yaml, out_dir)
            if not named:  # after the campaign, from the plan as parsed: no parse for a name
                name_this_run(admitted_plan.plan.campaign.id)
                named = True
            # One writer per folder, also for a flow run launched from a deployment (`ablate
            # run` already holds it in this process: then this is a no-op).
            with hold_folder(admitted_plan.out_dir):
                placement = Placement(devices, pool, queue, heartbeat_timeout_s)
                return _campaign(admitted_plan, plan_path, gate, placement, opened)
        except InputError as error:
            if not named:  # the form's plan was refused: the run's name says so
                name_this_run(name_for({"plan_yaml": plan_yaml, "plan_path": plan_path}))
            # Bad input is the person's to fix, not a crash: one line as the state message and
            # one log line, no traceback. The error rides along as the state's data, so
            # `ablate run` (which calls this flow) still raises it and exits 2.
            line = plain(one_line(error))  # redacted; plain text for `ablate notify`
            say(f"error: {line}", level=logging.ERROR)
            return Failed(message=line, data=error)

    return ablation_campaign


ablation_campaign = campaign_flow()
"""The flow `ablate serve` deploys for the Prefect UI: it opens its own executor."""
