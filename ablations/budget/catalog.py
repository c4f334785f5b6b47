"""The rental catalog: only the facts we have, plus what the plan adds or corrects.

Known prices: an RTX 4090 for 3, 7 or 30 days. Known lot sizes: a B200 lot holds two cards;
every other offer holds one card per lot. Nothing else is assumed: no hourly rate, no tax, no
transfer fee. A card and window with no known price resolves to a package whose price is
`None`, and every cost figure built on it is left out rather than invented.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, computed_field

from ablations.errors import BudgetError
from ablations.plan.offers import Offer, PackageSection

CATALOG: tuple[Offer, ...] = (
    Offer(gpu="RTX 4090", days=3, price_usd=47.14),
    Offer(gpu="RTX 4090", days=7, price_usd=110.0),
    Offer(gpu="RTX 4090", days=30, price_usd=390.0),
)
"""Offers whose price we were actually quoted (one lot, the whole window)."""

CARDS_PER_LOT: dict[str, int] = {"B200": 2}
"""Cards in one lot where it is not one. B200 is known here without any known price."""


def gpu_key(name: str) -> str:
    """'rtx-4090', 'RTX4090' and 'RTX 4090' name the same card."""
    return re.sub(r"[\s_-]+", "", name).lower()


class Package(BaseModel):
    """A rented package, resolved against the catalog: card, window, lots and price."""

    model_config = ConfigDict(frozen=True)

    gpu: str
    days: int
    lots: int
    cards_per_lot: int
    price_per_lot_usd: float | None
    """Price of one lot for the window; None when neither the plan nor the catalog gives it."""
    price_source: Literal["plan", "offer", "catalog"] | None
    """Where the price came from: the package itself, a plan offer, or the built-in catalog."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def window_hours(self) -> float:
        """The rental window: days x 24 hours."""
        return self.days * 24.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cards(self) -> int:
        """Cards rented in all: a lot's cards x lots (a B200 lot's two cards are one price)."""
        return self.cards_per_lot * self.lots

    @computed_field  # type: ignore[prop-decorator]
    @property
    def price_usd(self) -> float | None:
        """Price of the whole package: lot price x lots (never per card)."""
        return None if self.price_per_lot_usd is None else self.price_per_lot_usd * self.lots

    def label(self) -> str:
        """'2 x RTX 4090 for 3 days'."""
        return f"{self.lots} x {self.gpu} for {self.days} days"


class Catalog:
    """The built-in offers with the plan's `budget.offers` laid over them."""

    def __init__(self, offers: Sequence[Offer] = ()) -> None:
        self._offers: dict[tuple[str, int], tuple[Offer, Literal["offer", "catalog"]]] = {
            (gpu_key(o.gpu), o.days): (o, "catalog") for o in CATALOG
        }
        self._names = {gpu_key(o.gpu): o.gpu for o in CATALOG}
        self._names.update({gpu_key(name): name for name in CARDS_PER_LOT})
        self._cards = {gpu_key(name): n for name, n in CARDS_PER_LOT.items()}
        for offer in offers:
            key = gpu_key(offer.gpu)
            self._names.setdefault(key, offer.gpu)
            if "cards_per_lot" in offer.model_fields_set:  # an explicit count corrects ours
                self._cards[key] = offer.cards_per_lot
            self._offers[(key, offer.days)] = (offer, "offer")

    def known_gpus(self) -> list[str]:
        """Every card name the catalog or the plan's offers know."""
        return sorted(self._names.values())

    def knows(self, gpu: str) -> bool:
        return gpu_key(gpu) in self._names

    def cards_per_lot(self, gpu: str) -> int:
        return self._cards.get(gpu_key(gpu), 1)

    def offers_for(self, gpu: str) -> list[Package]:
        """The priced one-lot packages for a card, shortest window first."""
        key = gpu_key(gpu)
        found = sorted(
            (days, offer, source) for (k, days), (offer, source) in self._offers.items() if k == key
        )
        return [
            Package(
                gpu=self._names[key],
                days=days,
                lots=1,
                cards_per_lot=self.cards_per_lot(gpu),
                price_per_lot_usd=offer.price_usd,
                price_source=source,
            )
            for days, offer, source in found
        ]

    def resolve(self, section: PackageSection) -> Package:
        """The package a plan (or the CLI's figures) rented, priced from what is known.

        Raises `BudgetError` for a card nobody knows when no price is given: such a card
        would otherwise be planned with a lot size and price made up on the spot.
        """
        key = gpu_key(section.gpu)
        if section.price_usd is None and key not in self._names:
            raise BudgetError(
                f"unknown GPU {section.gpu!r} and no price given: known cards are "
                f"{', '.join(self.known_gpus())}; give the price of one lot (`--price`, or "
                "`budget.package.price_usd` in a plan) or add the card to `budget.offers`"
            )
        price: float | None = section.price_usd
        source: Literal["plan", "offer", "catalog"] | None = "plan" if price is not None else None
        found = self._offers.get((key, section.days))
        if price is None and found is not None:
            price, source = found[0].price_usd, found[1]
        return Package(
            gpu=self._names.get(key, section.gpu),
            days=section.days,
            lots=section.lots,
            cards_per_lot=self.cards_per_lot(section.gpu),
            price_per_lot_usd=price,
            price_source=source,
        )
