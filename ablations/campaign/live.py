"""The campaign while it runs: runs done, running and left, money spent, projected finish.

The flow keeps one `LiveCampaign` and tells it what starts, finishes and is dropped; the
Prefect UI shows its `view()` (the progress artifact and its markdown), the terminal its
counter. Nothing here reads the folder or knows Prefect.

Money spent is the package price pro rata of the rental window elapsed since registration:
the package is paid for the window, busy or idle, so an idle card costs as much as a busy one.
The projected finish packs the runs not finished (running ones whole, a deliberate
overestimate) onto the slots with their registered projection, scaled by how long the
finished runs took against theirs.
"""

from __future__ import annotations

import base64
import struct
import time
import zlib
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from ablations.budget.catalog import Catalog, Package
from ablations.budget.projection import Projection, lpt_makespan
from ablations.plan.model import Plan
from ablations.plan.variants import PlannedRun
from ablations.run.records import RunRecord
from ablations.text.units import hours as duration


class LiveView(BaseModel):
    """A snapshot of the campaign for people: counts, spend and finish."""

    model_config = ConfigDict(frozen=True)

    done: int
    running: int
    left: int
    """Registered runs not started and not dropped (with looks: at most this many run)."""
    dropped: int
    """Runs that will not run: trimmed at the gate, or not needed by a look."""
    open_ended: bool
    """True while later looks may still drop runs: `left` is an upper bound."""
    elapsed_hours: float
    window_hours: float
    package_usd: float | None
    spent_usd: float | None
    """Package price x elapsed / window (capped at the price); None when no price is known."""
    finish_in_hours: float | None
    """Projected wall hours until the last run finishes; None when nothing is left."""
    now: float

    @property
    def planned(self) -> int:
        return self.done + self.running + self.left

    @property
    def percent(self) -> float:
        """Finished share of the runs that will (at most) run, 0-100."""
        return 100.0 * self.done / self.planned if self.planned else 100.0

    def counter(self) -> str:
        """`[4/17]`, or `[4/≤17]` while looks may still end variants early."""
        return f"[{self.done}/{'≤' if self.open_ended else ''}{self.planned}]"

    def line(self) -> str:
        """One line: counts, spend, finish."""
        upto = "up to " if self.open_ended else ""
        parts = [f"{self.done} done, {self.running} running, {upto}{self.left} left"]
        if self.spent_usd is not None and self.package_usd is not None:
            parts.append(f"${self.spent_usd:,.2f} of ${self.package_usd:,.2f} spent")
        if self.finish_in_hours is not None:
            parts.append(f"finish in about {duration(self.finish_in_hours)}")
        return "; ".join(parts)

    def markdown(self) -> str:
        """The live view as the progress artifact's description: a drawn bar of the runs
        finished (Prefect 3.9's UI shows a progress artifact's value as the text "Progress:
        53%" only), then the counts, spend and finish."""
        upto = "at most " if self.open_ended else ""
        finish = "-"
        if self.finish_in_hours is not None:
            at = time.strftime(
                "%Y-%m-%d %H:%M UTC", time.gmtime(self.now + self.finish_in_hours * 3600)
            )
            finish = f"in about {duration(self.finish_in_hours)} ({at})"
        spent = "price unknown"
        if self.spent_usd is not None and self.package_usd is not None:
            spent = f"${self.spent_usd:,.2f} of ${self.package_usd:,.2f}"
        rows = [
            "| quantity | now |",
            "|---|---|",
            f"| Runs done | {self.done} |",
            f"| Running | {self.running} |",
            f"| Left | {upto}{self.left} |",
            f"| Not run (trimmed, or not needed by a look) | {self.dropped} |",
            f"| Window elapsed | {duration(self.elapsed_hours)} of {duration(self.window_hours)} |",
            f"| Money spent | {spent} |",
            f"| Projected finish | {finish} |",
        ]
        note = (
            "\n\nMoney spent: the package price pro rata of the rental window elapsed since "
            "registration (the package is paid for the window, busy or idle). Projected "
            "finish: runs not finished packed onto the slots, from their registered "
            "projection scaled by the finished runs' measured time."
        )
        if self.open_ended:
            note += " With looks, later looks may end variants early: fewer runs may be left."
        bar = (
            f"![{self.percent:.0f}% of the runs finished]({bar_png_uri(self.percent / 100)})\n\n"
            f"**{self.done} of {'at most ' if self.open_ended else ''}{self.planned} runs "
            f"finished ({self.percent:.0f}%)**\n\n"
        )
        return "### Campaign progress\n\n" + bar + "\n".join(rows) + note


BAR_WIDTH, BAR_HEIGHT = 480, 16
"""Pixels of the drawn progress bar: narrower than the UI's artifact pane."""
BAR_DONE, BAR_LEFT, BAR_EDGE = (31, 119, 180), (226, 230, 236), (120, 128, 140)


def bar_png_uri(fraction: float) -> str:
    """A progress bar `fraction` (0-1) full, as a `data:` URI of a PNG the Prefect UI shows
    in markdown (it renders `data:` images, not relative ones). Drawn by hand: a few hundred
    bytes, and no plotting library imported for it at every finished run."""
    filled = round(max(0.0, min(1.0, fraction)) * (BAR_WIDTH - 2))

    def row(edge: bool) -> bytes:
        if edge:
            return b"\x00" + bytes(BAR_EDGE) * BAR_WIDTH
        inner = bytes(BAR_DONE) * filled + bytes(BAR_LEFT) * (BAR_WIDTH - 2 - filled)
        return b"\x00" + bytes(BAR_EDGE) + inner + bytes(BAR_EDGE)

    raw = b"".join(row(y in (0, BAR_HEIGHT - 1)) for y in range(BAR_HEIGHT))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", BAR_WIDTH, BAR_HEIGHT, 8, 2, 0, 0, 0)  # 8-bit RGB
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


class LiveCampaign:
    """What the flow tells as runs start, finish and are dropped; `view()` sums it up."""

    def __init__(
        self,
        runs: Iterable[PlannedRun],
        projection: Projection,
        package: Package,
        registered_at: float,
        *,
        open_ended: bool,
    ) -> None:
        self._left = {r.run_id for r in runs}
        self._running: set[str] = set()
        self._done: dict[str, RunRecord] = {}
        self._dropped: set[str] = set()
        self._projected = {p.run_id: p.hours for p in projection.runs}
        self._slots = projection.slots
        self._package = package
        self._registered_at = registered_at
        self.open_ended = open_ended

    @classmethod
    def for_plan(
        cls, plan: Plan, runs: Iterable[PlannedRun], projection: Projection, registered_at: float
    ) -> LiveCampaign:
        """The campaign's runs against its package (looks make the count an upper bound)."""
        package = Catalog(plan.budget.offers).resolve(plan.budget.package)
        return cls(runs, projection, package, registered_at, open_ended=len(plan.look_sizes) > 1)

    def start(self, run_ids: Iterable[str]) -> None:
        """Runs handed to the executor (they wait for a slot or run)."""
        for run_id in run_ids:
            self._left.discard(run_id)
            self._running.add(run_id)

    def finish(self, record: RunRecord) -> None:
        self._running.discard(record.run_id)
        self._left.discard(record.run_id)
        self._done[record.run_id] = record

    def drop(self, run_ids: Iterable[str]) -> int:
        """Runs that will not run (trimmed at the gate, not needed after a look); returns how
        many of them were still left (started and finished runs are never dropped)."""
        dropped = self._left.intersection(run_ids)
        self._left -= dropped
        self._dropped |= dropped
        return len(dropped)

    def _speed(self) -> float:
        """Measured over projected busy time of the finished runs (1 before any finished)."""
        measured = projected = 0.0
        for run_id, record in self._done.items():
            if run_id in self._projected and record.timings.total > 0:
                measured += record.timings.total / 3600.0
                projected += self._projected[run_id]
        return measured / projected if projected > 0 else 1.0

    def view(self, now: float | None = None) -> LiveView:
        now = time.time() if now is None else now
        window = self._package.window_hours
        elapsed = max(0.0, (now - self._registered_at) / 3600.0)
        price = self._package.price_usd
        spent = None if price is None else price * min(1.0, elapsed / window)
        remaining = [
            self._projected.get(r, 0.0) * self._speed() for r in self._left | self._running
        ]
        finish = lpt_makespan(remaining, self._slots) if remaining else None
        # Every run of a batch is handed over at once; at most one per slot is really running.
        running = min(len(self._running), self._slots)
        return LiveView(
            done=len(self._done),
            running=running,
            left=len(self._left) + len(self._running) - running,
            dropped=len(self._dropped),
            open_ended=self.open_ended and bool(self._left),
            elapsed_hours=elapsed,
            window_hours=window,
            package_usd=price,
            spent_usd=spent,
            finish_in_hours=finish,
            now=now,
        )
