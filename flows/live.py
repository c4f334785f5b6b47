"""The live view in the Prefect UI: one progress artifact, its bar the finished share and its
description the campaign's counts, spend and projected finish, updated as runs finish."""

from __future__ import annotations

from collections.abc import Iterable

from ablations.campaign.live import LiveCampaign
from ablations.run.records import RunRecord
from tasks.artifacts import progress_artifact, update_progress

KEY = "campaign-progress"


class LiveArtifacts:
    """A `LiveCampaign` mirrored into the flow run's progress artifact."""

    def __init__(self, live: LiveCampaign) -> None:
        self.live = live
        view = live.view()
        self._id = progress_artifact(KEY, view.percent, view.markdown())

    def _show(self) -> str:
        view = self.live.view()
        update_progress(self._id, view.percent, view.markdown())
        return view.counter()

    def start(self, run_ids: Iterable[str]) -> None:
        self.live.start(run_ids)
        self._show()

    def finish(self, record: RunRecord) -> str:
        """Count the run finished; return the counter for its progress line (`[4/17]`)."""
        self.live.finish(record)
        return self._show()

    def drop(self, run_ids: Iterable[str]) -> int:
        dropped = self.live.drop(run_ids)
        if dropped:
            self._show()
        return dropped

    def line(self) -> str:
        return self.live.view().line()
