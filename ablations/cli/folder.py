"""`ablate report` and `ablate verify`: commands over a campaign's output folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ablations.cli.arguments import finite_non_negative
from ablations.cli.registry import EXIT_INPUT, EXIT_OK, command


def add_folder_parsers(sub: Any) -> None:
    """Add `report` and `verify` to the `ablate` parser."""
    p = sub.add_parser("report", help="rebuild REPORT.md and its plots from an output folder")
    p.add_argument("out_dir", type=Path)
    p = sub.add_parser("verify", help="check every artifact of an output folder, reloading each")
    p.add_argument("out_dir", type=Path)
    p.add_argument(
        "--tolerance",
        type=finite_non_negative,
        default=1e-6,
        help="absolute tolerance of a re-evaluated metric (CPU-trained runs; default 1e-6)",
    )
    p.add_argument("--skip-store", action="store_true", help="do not open the checkpoint store")


@command("report")
def report_cli(args: argparse.Namespace) -> int:
    from ablations.report.from_folder import rebuild_report

    print(rebuild_report(args.out_dir))
    return EXIT_OK


@command("verify")
def verify_cli(args: argparse.Namespace) -> int:
    from ablations.verify.folder import verify_command

    # A folder with problems exits 2, each named on its line: the folder is the input (1
    # stays the code of an internal error or a store that failed).
    return EXIT_OK if verify_command(args) else EXIT_INPUT
