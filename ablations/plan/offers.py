"""What was rented and what it costs: the package, offers, other costs, estimates."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ablations.plan.section import Amount, Section

MAX_DAYS = 3650
"""A rental window of ten years: past it, a typo."""
MAX_LOTS = 10_000
MAX_CARDS_PER_LOT = 64
Days = Annotated[int, Field(gt=0, le=MAX_DAYS)]
Lots = Annotated[int, Field(gt=0, le=MAX_LOTS)]
CardsPerLot = Annotated[int, Field(gt=0, le=MAX_CARDS_PER_LOT)]


class Cost(Section):
    """A cost besides the GPU package, as the user was charged it."""

    name: str = Field(min_length=1)
    """What it is (storage, data transfer...)."""
    usd: Amount
    """Amount in USD."""


class Offer(Section):
    """A rental package offer: adds to or overrides the built-in catalog."""

    gpu: str = Field(min_length=1)
    """Card name, e.g. `RTX 4090`."""
    days: Days
    """Length of the rental window in days."""
    price_usd: Amount
    """Price of one lot for the window, in USD."""
    cards_per_lot: CardsPerLot = 1
    """Cards in one lot (a B200 lot holds two)."""


class PackageSection(Section):
    """The package that was rented."""

    gpu: str = "RTX 4090"
    """Card name; must match a catalog offer unless `price_usd` is given."""
    lots: Lots = 1
    """Lots rented; each holds the offer's cards."""
    days: Days = 3
    """Rental window in days."""
    price_usd: Amount | None = None
    """Price of one lot; default: the catalog price for this card and window."""


class RunEstimate(Section):
    """Per-run time estimates used for planning until the pilot has measured them."""

    load_seconds: Amount = 5.0
    """Building the workload and loading data."""
    step_seconds: Amount = 0.01
    """One training step."""
    eval_seconds: Amount = 0.1
    """One evaluation on the held-out set."""
    checkpoint_seconds: Amount = 0.5
    """One checkpoint (stall plus commit)."""
    export_seconds: Amount = 1.0
    """Writing the run's metrics and predictions."""


class BudgetSection(Section):
    """What the campaign may spend."""

    package: PackageSection = PackageSection()
    """The rented package."""
    other_costs: list[Cost] = []
    """Other costs the user pays (storage, transfer); only what is given is counted."""
    prep_hours: Amount = 0.0
    """Human preparation time inside the window that does not occupy the GPU."""
    estimate: RunEstimate = RunEstimate()
    """Time estimates used before the pilot has measured real ones."""
    offers: list[Offer] = []
    """Extra or corrected catalog offers."""
