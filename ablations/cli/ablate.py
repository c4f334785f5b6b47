"""The `ablate` command line. Exit codes: 0 done, 1 the infrastructure failed (a store, the
ledger, a worker, the disk) or an internal error, 2 invalid input (`ablations.errors`)."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING

from ablations.cli.arguments import add_limit_flags
from ablations.cli.registry import (
    COMMANDS,
    EXIT_INFRASTRUCTURE,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    command,
)
from ablations.errors import (
    CampaignInterrupted,
    CampaignUndecided,
    InfrastructureError,
    InputError,
)

if TYPE_CHECKING:
    from ablations.plan.model import Plan

__all__ = [
    "EXIT_INFRASTRUCTURE",
    "EXIT_INPUT",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "build_parser",
    "console",
    "main",
]


# Each command imports what it uses when it runs: `ablate --help` and a command's parser load
# no plan model, no numpy, no Prefect (`bench/cli_latency.py` measures it).


def _summary(plan: Plan, digest: str) -> str:
    from ablations.plan.runs import planned_runs, variants

    all_variants = variants(plan)
    runs = planned_runs(plan, digest)
    categories = Counter(v.category for v in all_variants)
    phases = Counter(r.phase for r in runs)
    return "\n".join(
        [
            f"campaign   {plan.campaign.id}: {plan.campaign.question}",
            f"decision   {plan.campaign.decision}",
            f"plan hash  {digest}",
            f"workload   {plan.workload.entry} ({plan.workload.steps} steps, "
            f"eval every {plan.workload.eval_every})",
            f"code       {_code_line(plan)}",
            f"variants   {len(all_variants)} "
            + "("
            + ", ".join(f"{categories[c]} {c}" for c in ("essential", "useful", "exploratory"))
            + ")",
            f"seeds      {_seeds_line(plan)}",
            f"metric     {plan.metric.name} {plan.metric.direction}, threshold "
            f"{plan.metric.threshold}, useful effect {plan.metric.useful_effect}",
            f"runs       {phases['pilot']} pilot ({plan.pilot_steps} steps) + "
            f"{phases['main']} main",
            f"gate       {plan.gate.mode}; checkpoints to {plan.checkpoint.store}; "
            f"devices {plan.resources.devices}",
        ]
    )


def _code_line(plan: Plan) -> str:
    """The user's code as a campaign would record it (`InputError` when it cannot be)."""
    from ablations.campaign.code import code_line

    return code_line(plan)


def _unhashed_warnings(plan: Plan) -> list[str]:
    """The user's code importing modules from outside what its hash covers."""
    from ablations.campaign.code import unhashed_imports

    outside = unhashed_imports(plan)
    if not outside:
        return []
    return [
        f"the workload's code imports {', '.join(outside)} from outside the code its hash "
        "covers: an edit there would not be seen; add it to workload.code"
    ]


def _seeds_line(plan: Plan) -> str:
    from ablations.plan.design import spending_words

    design = plan.sequential
    if design is None:
        return f"{plan.seeds} (paired; one look, family-wise alpha 0.05 across the variants)"
    return (
        f"{design.start} to {design.max} per variant from seed {design.first} (paired), looks "
        f"at {list(plan.look_sizes)}; family-wise alpha {design.alpha:g} across variants and "
        f"looks, spent {spending_words(design)}"
    )


@command("validate")
def _validate(args: argparse.Namespace) -> int:
    from ablations.plan.io import load_plan
    from ablations.plan.model import plan_hash
    from ablations.plan.runs import cost_warnings

    # Found and read, not imported: validate answers in a fraction of a second, without
    # torch; a module that fails as it imports is named by `ablate run`'s preflight.
    plan = load_plan(args.plan, workload="find")
    print(f"{args.plan}: valid")
    for warning in [
        *plan.pilot_warnings(),
        *plan.decision_warnings(),
        *cost_warnings(plan),
        *_unhashed_warnings(plan),
    ]:
        print(f"warning: {warning}", file=sys.stderr)
    print(_summary(plan, plan_hash(plan)))
    return EXIT_OK


@command("plan")
def _plan(args: argparse.Namespace) -> int:
    from ablations.plan.io import load_plan
    from ablations.plan.model import plan_hash
    from ablations.plan.runs import cost_warnings, planned_runs
    from ablations.text.units import hours, usd

    # Found and read, as validate does, not imported: nothing printed here depends on the
    # workload's code, and importing it cost torch's 2.5 s (a LoRA recipe's transformers: 6.5 s)
    # on every call; `ablate run`'s slot workers import it before any run starts.
    plan = load_plan(args.plan, workload="find")
    digest = plan_hash(plan)
    runs = planned_runs(plan, digest)
    totals = {
        "runs": len(runs),
        "pilot_runs": sum(r.phase == "pilot" for r in runs),
        "main_runs": sum(r.phase == "main" for r in runs),
        "steps": sum(r.trained_steps for r in runs),
        "by_category": dict(Counter(r.category for r in runs if r.phase == "main")),
    }
    from ablations.budget import assess_plan
    from ablations.local.executor import local_slots_for
    from ablations.probe.sweep import for_plan

    # The slots `ablate run` opens here (the same function, `--devices` alike), so the two
    # agree; `ablate budget` projects the rented package's cards instead.
    slots = local_slots_for(plan, args.plan, args.devices)
    assessment = assess_plan(plan, probe=for_plan(plan, args.plan, args.probe), slots=len(slots))
    projected = (
        {r.run_id: r.hours for r in assessment.projection.runs} if assessment.projection else {}
    )
    if args.json:
        payload = {
            "campaign_id": plan.campaign.id,
            "plan_hash": digest,
            "runs": [
                {**r.model_dump(mode="json"), "projected_hours": projected.get(r.run_id)}
                for r in runs
            ],
            "totals": totals,
            "budget": assessment.summary(),
        }
        print(json.dumps(payload, indent=2))
        return EXIT_OK
    header = ("run_id", "variant", "factor", "level", "seed", "category", "phase", "steps", "time")
    rows = [
        (
            r.run_id,
            r.variant,
            r.factor or "-",
            "-" if r.level is None else str(r.level),
            str(r.seed),
            r.category,
            r.phase,
            f"{r.start_step + 1}-{r.steps}" if r.start_step else str(r.steps),
            hours(projected.get(r.run_id, 0.0)),
        )
        for r in runs
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    for row in (header, *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    print(
        f"\n{totals['runs']} runs ({totals['pilot_runs']} pilot, {totals['main_runs']} main), "
        f"{totals['steps']} steps trained (a main run resumes from its pilot); "
        f"plan hash {digest}"
    )
    fit = assessment.fit
    price = assessment.cost.package_usd
    print(
        f"projected from the {_SOURCES[assessment.source]}: {hours(assessment.busy_hours)} busy, "
        f"{hours(fit.wall_hours)} wall on {assessment.slots} slot(s) "
        f"[{', '.join(slot.name for slot in slots)}] + {hours(fit.prep_hours)} "
        f"preparation in a {hours(fit.window_hours)} window: "
        + ("fits" if fit.fits else f"overruns by {hours(fit.overrun_hours)}")
        + (f"; package {usd(price)}" if price is not None else "")
        + " (see `ablate budget`)"
    )
    for line in assessment.sizing.lines() if assessment.sizing else []:
        print(line)
    warnings = plan.pilot_warnings() + plan.decision_warnings() + cost_warnings(plan)
    if assessment.sizing is not None and assessment.sizing.warning():
        warnings.append(str(assessment.sizing.warning()))
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return EXIT_OK


_SOURCES = {
    "plan estimate": "plan's estimates",
    "probe": "probed step times (probe.json)",
    "pilot records": "pilot's records",
    "given hours": "given hours",
}


@command("schema")
def _schema(args: argparse.Namespace) -> int:
    from ablations.plan.model import Plan

    print(json.dumps(Plan.model_json_schema(), indent=2))
    return EXIT_OK


def os_error_line(exc: OSError) -> str:
    """One line for an operating-system error that stopped a command, and what to do."""
    where = f": {exc.filename}" if exc.filename else ""
    return (
        f"{exc.strerror or exc}{where}. Finished runs are kept (nothing half-written is "
        "trusted): fix the cause (free disk space, say) and rerun the same command to continue"
    )


def infrastructure_line(exc: InfrastructureError) -> str:
    """One line for a store, ledger or worker failure that stopped a command, and what to do
    (a SIGTERM's line already says how to resume: nothing needs fixing)."""
    if isinstance(exc, CampaignInterrupted | CampaignUndecided):
        return str(exc)
    return (
        f"{str(exc).rstrip('.')}. The input is fine and finished runs are kept: rerun the same "
        "command to continue once this is fixed"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ablate", description="Ablation campaigns on rented GPUs, run as Prefect flows."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="check a plan; print a summary")
    p.add_argument("plan", type=Path)
    p = sub.add_parser("plan", help="list the registered runs")
    p.add_argument("plan", type=Path)
    p.add_argument("--json", action="store_true", help="print JSON (includes the plan hash)")
    p.add_argument(
        "--probe",
        type=Path,
        metavar="FILE",
        help="probe.json whose step times replace the estimate (default: beside the plan)",
    )
    p.add_argument(
        "--devices",
        help="the devices `ablate run --devices` would get: auto, a number of CPU slots, or "
        "cuda:0,cuda:1 (default: the plan's resources.devices, on this machine)",
    )
    sub.add_parser("schema", help="print the plan's JSON schema")
    from ablations.cli.budget import add_budget_parser  # registers `budget` on import

    add_budget_parser(sub)
    from ablations.cli.folder import add_folder_parsers  # registers `report`, `verify`

    add_folder_parsers(sub)
    from ablations.cli.probe import add_probe_parser  # registers `probe`

    add_probe_parser(sub)
    # `run` and `serve` run the Prefect flow: they live in `flows` and join here through the
    # package's entry points, so this command line never imports Prefect or `flows`.
    for extension in entry_points(group="ablate.commands"):
        extension.load()(sub)
    for name in CAPPED:  # every command that reads a plan takes this process's caps
        if name in sub.choices:
            add_limit_flags(sub.choices[name])
    return parser


CAPPED = ("validate", "plan", "budget", "probe", "run", "serve", "verify", "report")
"""The commands that read a plan: each takes `--max-runs` and `--max-steps`."""


def _install_limits(args: argparse.Namespace) -> None:
    """This process's caps: the flags given, else the environment's, else the defaults;
    installed in the environment so that the processes it starts (slot workers, a served
    campaign's flow runs) hold the same (`ablations.security.limits`)."""
    from ablations.security.limits import Limits

    if getattr(args, "max_runs", None) is None and getattr(args, "max_steps", None) is None:
        Limits.from_env()  # a bad ABLATE_MAX_RUNS is refused before anything starts
        return
    limits = Limits.from_env()
    Limits(
        max_runs=args.max_runs or limits.max_runs, max_steps=args.max_steps or limits.max_steps
    ).install()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _install_limits(args)
        return COMMANDS[args.command](args)
    except InputError as exc:  # the plan, the folder or a value given: the user fixes it
        _error(f"error: {exc}")
        return EXIT_INPUT
    except InfrastructureError as exc:  # the store, the ledger, a worker: not the input
        _error(f"error: {infrastructure_line(exc)}")
        return EXIT_INFRASTRUCTURE
    except BrokenPipeError:  # the reader stopped reading (`ablate plan x | head`): not a fault
        return _reader_gone()
    except OSError as exc:  # the machine, not the input: a full disk, a read-only folder
        if os.environ.get("ABLATE_DEBUG"):
            raise
        _error(f"error: {os_error_line(exc)}")
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the last guard: a user never sees a raw traceback
        if os.environ.get("ABLATE_DEBUG"):
            raise
        _error(
            f"internal error: {type(exc).__name__}: {exc} (set ABLATE_DEBUG=1 for the traceback)"
        )
        return EXIT_INTERNAL


EXIT_READER_GONE = 128 + 13  # what a shell reports for a writer ended by SIGPIPE


def _reader_gone() -> int:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again, and
    end quietly with the shell's code for a closed pipe, as `cat` or `git log` would."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_READER_GONE


def _error(line: str) -> None:
    """The one line a command that failed ends with, on stderr, with nothing secret in it
    (`ablations.security.credentials.redact`: URLs without user info or query, keys masked)."""
    from ablations.security.credentials import redact

    print(redact(line), file=sys.stderr)


def console() -> None:
    """`ablate` and `python -m ablations.cli`: `main`, then exit with its code.

    The objects still alive are frozen out of the garbage collector first: the interpreter's
    final collections would otherwise walk the whole heap (Prefect, pydantic, the campaign)
    just to free memory the process is about to return, 0.7 s after `ablate run` printed
    its last line (measured). Exit handlers still run, and objects freed by their last
    reference are still finalized; only cycles left at exit are not collected."""
    code = main()
    try:
        sys.stdout.flush()  # what is still buffered goes now, while a closed pipe can be told
    except BrokenPipeError:
        code = _reader_gone()
    gc.freeze()
    sys.exit(code)
