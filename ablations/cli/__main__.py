"""`python -m ablations.cli`: the same as `ablate`."""

from ablations.cli.ablate import console

console()
