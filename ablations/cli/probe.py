"""`ablate probe`: a few steps of every variant per input group and batch size, on one device.

    ablate probe PLAN [--devices D] [--variants a,b] [--out DIR] [--json]

The probe runs in a slot worker on the first slot of the plan's devices (or `--devices`).
Code that runs its own loop (`workload.command`, `lightning`, `hf_trainer`) is timed through
its adapter, one point per variant as planned (`ablations.byo.probe`).
With `--out`, writes `DIR/probe.json` and `DIR/PROBE.md`; a `probe.json` beside the plan file
(or the plan's `probe.result`) is what `ablate plan`, `ablate budget` and
`resources.slots_per_device: auto` then use.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ablations.cli.registry import EXIT_OK, command
from ablations.errors import InputError
from ablations.files.names import PROBE_JSON, PROBE_MD


def add_probe_parser(sub: Any) -> None:
    """Add `probe` to the `ablate` subcommands (`sub` is build_parser's subparsers)."""
    p = sub.add_parser(
        "probe",
        help="size the card: a few steps per variant, input group and batch size",
        description=(
            "Train and evaluate a few steps of each variant for each input group and batch "
            "size (the plan's probe.batch_sizes, default 1, 2, 4, plus the runs' own), "
            "stopping a group at its first error; report peak memory per phase, the largest "
            "safe batch, the smallest card memory class that fits and the measured step times. "
            "A command, Lightning or Trainer workload runs its own loop: each variant is timed "
            "as planned through its adapter, and what could not be swept is said."
        ),
    )
    p.add_argument("plan", type=Path)
    p.add_argument("--devices", help="device to probe on, e.g. cuda:0 or cpu (first slot used)")
    p.add_argument("--variants", help="comma-separated variant names (default: all)")
    p.add_argument("--out", type=Path, metavar="DIR", help="write probe.json and PROBE.md here")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


@command("probe")
def _probe(args: argparse.Namespace) -> int:
    from ablations.plan.io import load_plan
    from ablations.plan.runs import variants
    from ablations.probe import sweep as probe
    from ablations.slots.devices import plan_slots

    plan = load_plan(args.plan, workload="find")  # the probe's worker imports it, exit 2 there
    every = variants(plan)
    chosen = every
    if args.variants is not None:
        names = [n.strip() for n in args.variants.split(",") if n.strip()]
        known = {v.name for v in every}
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            raise InputError(
                f"--variants: unknown {unknown or 'empty list'}; variants are {sorted(known)}"
            )
        chosen = [v for v in every if v.name in names]
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise InputError(f"--out: {str(args.out)!r} exists and is not a folder")
    slot = plan_slots(plan.resources, args.devices)[0]
    say = (lambda line: None) if args.json else print
    say(probe.HEADER)
    result = probe.run_probe(plan, slot, chosen, say)
    if args.out is not None:
        probe.write(result, args.out)
    if args.json:
        print(probe.dumps(result))
    else:
        for line in probe.summary_lines(result):
            print(line)
        if args.out is not None:
            print(f"wrote {args.out / PROBE_JSON} and {args.out / PROBE_MD}")
    return EXIT_OK
