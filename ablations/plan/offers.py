"""What was rented and what it costs: the package, offers, other costs, estimates."""

from __future__ import annotations

from pydantic import Field

from ablations.plan.section import PositiveInt, Section


class Cost(Section):
    """A cost besides the GPU package, as the user was charged it."""

    name: str = Field(min_length=1)
    """What it is (storage, data transfer...)."""
    usd: float = Field(ge=0, allow_inf_nan=False)
    """Amount in USD."""


class Offer(Section):
    """A rental package offer: adds to or overrides the built-in catalog."""

    gpu: str = Field(min_length=1)
    """Card name, e.g. `RTX 4090`."""
    days: PositiveInt
    """Length of the rental window in days."""
    price_usd: float = Field(ge=0, allow_inf_nan=False)
    """Price of one lot for the window, in USD."""
    cards_per_lot: PositiveInt = 1
    """Cards in one lot (a B200 lot holds two)."""


class PackageSection(Section):
    """The package that was rented."""

    gpu: str = "RTX 4090"
    """Card name; must match a catalog offer unless `price_usd` is given."""
    lots: PositiveInt = 1
    """Lots rented; each holds the offer's cards."""
    days: PositiveInt = 3
    """Rental window in days."""
    price_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Price of one lot; default: the catalog price for this card and window."""


class RunEstimate(Section):
    """Per-run time estimates used for planning until the pilot has measured them."""

    load_seconds: float = Field(default=5.0, ge=0, allow_inf_nan=False)
    """Building the workload and loading data."""
    step_seconds: float = Field(default=0.01, ge=0, allow_inf_nan=False)
    """One training step."""
    eval_seconds: float = Field(default=0.1, ge=0, allow_inf_nan=False)
    """One evaluation on the held-out set."""
    checkpoint_seconds: float = Field(default=0.5, ge=0, allow_inf_nan=False)
    """One checkpoint (stall plus commit)."""
    export_seconds: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    """Writing the run's metrics and predictions."""


class BudgetSection(Section):
    """What the campaign may spend."""

    package: PackageSection = PackageSection()
    """The rented package."""
    other_costs: list[Cost] = []
    """Other costs the user pays (storage, transfer); only what is given is counted."""
    prep_hours: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """Human preparation time inside the window that does not occupy the GPU."""
    estimate: RunEstimate = RunEstimate()
    """Time estimates used before the pilot has measured real ones."""
    offers: list[Offer] = []
    """Extra or corrected catalog offers."""
