"""The adapters' restart check, on Lightning: a resumable loader continues exactly, so the
check passes; a plain shuffling DataLoader restarts its epoch with a fresh order, and the
check stops the run with the `restart` rule, naming the first step that differs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablations.byo.lightning import LightningWorkload
from ablations.byo.restart import external_restart_check
from ablations.plan.sections import CheckpointSection
from tests.ablations.byo.test_lightning import spec_for

pytest.importorskip("lightning")
pytestmark = pytest.mark.slow  # six short Lightning runs: about 10 s


def check(tmp_path: Path, **params: object) -> object:
    store = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 1000})
    spec = spec_for(tmp_path, checkpoint=store, params={"lr": 0.05, **params})
    return external_restart_check(spec, LightningWorkload)


def test_a_resumable_loader_passes_the_restart_check(tmp_path: Path) -> None:
    assert check(tmp_path, resumable=True) is None


def test_a_reshuffling_loader_is_stopped_by_the_restart_rule(tmp_path: Path) -> None:
    stop = check(tmp_path)
    assert stop is not None and stop.rule == "restart"  # type: ignore[attr-defined]
    assert stop.step > 3 and "does not resume exactly" in stop.message  # type: ignore[attr-defined]
