"""The restart check: save early, reload elsewhere, take the same steps, compare."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablations.checkpoint import open_store
from ablations.errors import StoreError
from ablations.preflight.restart_check import restart_check
from tests.ablations.checkpoint.conftest import make_spec


@pytest.mark.slow  # an end-to-end subprocess or worker start: make test, not make check
@pytest.mark.parametrize("store", ["file", "memory"])
def test_digits_restarts_exactly(tmp_path: Path, store: str) -> None:
    url = f"file://{tmp_path}/ckpt" if store == "file" else f"memory://restart-{tmp_path.name}"
    spec = make_spec(url)
    assert restart_check(spec) is None  # file: reloaded in a fresh process
    assert spec.checkpoint is not None
    assert open_store(spec.checkpoint).keys("camp") == []  # the check cleans up after itself


def test_a_missing_data_position_is_a_restart_stop(tmp_path: Path) -> None:
    spec = make_spec(f"memory://forgetful-{tmp_path.name}").with_workload(
        entry="tests.ablations.checkpoint.workloads:ForgetfulDigits"
    )
    stop = restart_check(spec)
    assert stop is not None and stop.rule == "restart" and stop.step == 2
    assert "no usable restart" in stop.message and "after reload has loss" in stop.message


def test_a_checkpoint_that_cannot_be_loaded_is_a_restart_stop(tmp_path: Path) -> None:
    spec = make_spec(f"file://{tmp_path}/ckpt").with_workload(
        entry="tests.ablations.checkpoint.workloads:UnloadableDigits"
    )
    stop = restart_check(spec)  # the fresh process refuses the checkpoint and finds no other
    assert stop is not None and stop.rule == "restart"
    assert stop.message.startswith("no usable restart: reloaded step 0, expected 2 (refused")
    assert "does not fit this workload: KeyError" in stop.message


def test_an_unusable_store_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreError, match="not usable"):
        restart_check(make_spec(f"file://{tmp_path}/file/ckpt"))
