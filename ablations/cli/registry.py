"""The `ablate` subcommands' registry and exit codes, apart from `ablations.cli` so that the
modules adding a subcommand (budget, run, probe...) never import the CLI that imports them."""

from __future__ import annotations

import argparse
from collections.abc import Callable

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT = 0, 1, 2
EXIT_INFRASTRUCTURE = EXIT_INTERNAL
"""A store, the ledger, a worker or the disk failed: the same code as an internal error."""

Command = Callable[[argparse.Namespace], int]
COMMANDS: dict[str, Command] = {}
"""Each subcommand's handler by name; `ablations.cli.ablate` runs the one parsed."""


def command(name: str) -> Callable[[Command], Command]:
    """Register a subcommand handler (other modules add theirs: run, verify, budget...)."""

    def register(handler: Command) -> Command:
        COMMANDS[name] = handler
        return handler

    return register
