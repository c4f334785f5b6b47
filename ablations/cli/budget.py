"""`ablate budget`: a plan's (or given figures') fit in the package window, and the cost.

    ablate budget PLAN [--records DIR] [--accepted K] [--json]
    ablate budget --gpu "RTX 4090" --hours H [--days D] [--lots N] [--price USD]
                  [--prep-hours P] [--accepted K] [--json]

`--hours` is the busy wall time the window must hold (already spread over the cards).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ablations.cli.arguments import (
    MAX_COUNT,
    MAX_DAYS,
    MAX_HOURS,
    MAX_LOTS,
    MAX_USD,
    at_most,
    finite_non_negative,
    non_negative_int,
    positive_int,
)
from ablations.cli.registry import EXIT_OK, command


def add_budget_parser(sub: Any) -> None:
    """Add `budget` to the `ablate` subcommands (`sub` is build_parser's subparsers)."""
    p = sub.add_parser(
        "budget",
        help="window fit, overrun alternatives and cost per accepted result",
        description=(
            "Judge the work against the rented package: for a plan (its registered runs, "
            "from its estimate or the pilot's records) or for given figures. Fits means busy "
            "wall hours + preparation hours <= days x 24."
        ),
    )
    p.add_argument("plan", type=Path, nargs="?", help="plan file (omit to give figures)")
    p.add_argument(
        "--records",
        type=Path,
        metavar="DIR",
        help="campaign output folder: pilot measurements and accepted runs from its records",
    )
    p.add_argument("--gpu", help='card name, e.g. "RTX 4090" (figures mode)')
    p.add_argument(
        "--hours",
        type=at_most(finite_non_negative, MAX_HOURS),
        help="busy wall hours the window must hold, already spread over the cards",
    )
    p.add_argument(
        "--days", type=at_most(positive_int, MAX_DAYS), default=3, help="rental window in days (3)"
    )
    p.add_argument(
        "--lots", type=at_most(positive_int, MAX_LOTS), default=1, help="lots rented (1)"
    )
    p.add_argument(
        "--price",
        type=at_most(finite_non_negative, MAX_USD),
        metavar="USD",
        help="price of one lot, if known",
    )
    p.add_argument(
        "--prep-hours",
        type=at_most(finite_non_negative, MAX_HOURS),
        default=0.0,
        help="human preparation time",
    )
    p.add_argument(
        "--accepted",
        type=at_most(non_negative_int, MAX_COUNT),
        metavar="K",
        help="accepted results, for cost/K",
    )
    p.add_argument(
        "--probe",
        type=Path,
        metavar="FILE",
        help="probe.json whose step times replace the plan's estimate (default: beside the "
        "plan, or the plan's probe.result); the pilot's records still come first",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


_FIGURES_ONLY = ("gpu", "hours", "price")


@command("budget")
def _budget(args: argparse.Namespace) -> int:
    # Here, not at the top: every `ablate` command registers this parser, and the budget
    # package (through the looks' analysis: pandas, scipy) costs a third of a second to import.
    from ablations.budget import BudgetError, Catalog, assess_hours, assess_plan, budget_markdown

    if args.plan is not None:
        given = [f"--{name}" for name in _FIGURES_ONLY if getattr(args, name) is not None]
        if given:
            raise BudgetError(
                f"{', '.join(given)} describe figures without a plan; with a plan the package "
                "comes from its budget section"
            )
        records: list[Any] = []
        if args.records is not None:
            if not args.records.is_dir():
                raise BudgetError(f"--records: {str(args.records)!r} is not a folder")
            from ablations.campaign.folder import CampaignFolder

            records = list(CampaignFolder(args.records).records().values())
        from ablations.plan.io import load_plan
        from ablations.probe.sweep import for_plan

        plan = load_plan(args.plan, workload="find")  # as `ablate plan`: nothing needs torch
        probe = for_plan(plan, args.plan, args.probe)
        assessment = assess_plan(plan, records=records, accepted=args.accepted, probe=probe)
    else:
        if args.gpu is None or args.hours is None:
            raise BudgetError(
                'give a plan file, or figures: --gpu "RTX 4090" --hours H [--lots N] '
                "[--days D] [--accepted K]"
            )
        if args.records is not None:
            raise BudgetError("--records reads a campaign of a plan: give the plan file too")
        if args.probe is not None:
            raise BudgetError("--probe reads a probe of a plan: give the plan file too")
        from ablations.plan.offers import PackageSection

        catalog = Catalog()
        package = catalog.resolve(
            PackageSection(gpu=args.gpu, lots=args.lots, days=args.days, price_usd=args.price)
        )
        assessment = assess_hours(
            package,
            args.hours,
            prep_hours=args.prep_hours,
            accepted=args.accepted,
            catalog=catalog,
        )
    if args.json:
        print(json.dumps(assessment.summary(), indent=2))
    else:
        for line in budget_markdown(assessment).splitlines():
            print(line.removeprefix("- "))
    return EXIT_OK
