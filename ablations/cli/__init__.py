"""The `ablate` command line (`ablate.py`); each other module here adds subcommands.

`ablate run` and `ablate serve` run the Prefect flow, so they live in `flows/cli.py` and join
through the `ablate.commands` entry points (see pyproject.toml): nothing here imports Prefect.
"""

from ablations.cli.ablate import (
    EXIT_INFRASTRUCTURE,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    console,
    main,
)

__all__ = ["EXIT_INFRASTRUCTURE", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_OK", "console", "main"]
