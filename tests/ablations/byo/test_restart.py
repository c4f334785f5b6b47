"""The adapters' restart check: correct code passes (dropout, batch norm, a resumable loader:
the project's own `ResumableLoader`), and each way of resuming inexactly is stopped by the
`restart` rule with the cause found and the fix in the adapter's framework: a loader that
reshuffles, a random generator no checkpoint holds, training that is not reproducible at all,
and a command's program (whose state the check cannot see)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ablations.byo.command import CommandWorkload
from ablations.byo.restart import external_restart_check
from ablations.plan.infrastructure import CheckpointSection
from ablations.run.records import RunSpec, Stop

pytestmark = pytest.mark.slow  # three short framework runs per check: 2-4 s each


def check(tmp_path: Path, **params: Any) -> Stop | None:
    pytest.importorskip("lightning")
    from ablations.byo.lightning import LightningWorkload
    from tests.ablations.byo.test_lightning import spec_for

    store = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 1000})
    spec = spec_for(tmp_path, checkpoint=store, params={"lr": 0.05, **params})
    return external_restart_check(spec, LightningWorkload)


def test_dropout_batch_norm_and_a_resumable_loader_pass(tmp_path: Path) -> None:
    """The reproduction: the middle run validates at step k; a validation loader draws its
    seed from torch's generator, which moved dropout's masks after it (before the check's
    runs validated at the same steps and Lightning's validation ran on a fork)."""
    assert check(tmp_path, resumable=True, dropout=0.1, norm=True) is None


def test_a_reshuffling_loader_is_named_with_the_resumable_loader_as_the_fix(
    tmp_path: Path,
) -> None:
    stop = check(tmp_path, dropout=0.1)
    assert stop is not None and stop.rule == "restart" and stop.step > 3
    assert "the training batches after the resume differ" in stop.message
    assert "ablations.byo.data.ResumableLoader(dataset" in stop.message
    assert "state_dict" not in stop.message  # a Lightning user writes none


def test_a_generator_no_checkpoint_holds_is_named_as_a_random_draw(tmp_path: Path) -> None:
    stop = check(tmp_path, resumable=True, noise=0.1)
    assert stop is not None and stop.rule == "restart"
    assert "the same batches and the same model and optimizer state give another loss" in (
        stop.message
    )
    assert "on_save_checkpoint" in stop.message


def test_training_that_is_not_reproducible_is_named_before_any_resume(tmp_path: Path) -> None:
    stop = check(tmp_path, resumable=True, noise=0.1, noise_seeded=False)
    assert stop is not None and stop.rule == "restart"
    assert "already differs from the run straight through before any resume (at step 1)" in (
        stop.message
    )


def test_a_command_that_forgets_its_generator_is_told_what_to_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.ablations.byo.test_command import spec_for

    store = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 1000})
    spec = spec_for(store, tmp_path)
    assert external_restart_check(spec, CommandWorkload) is None  # it saves its generator
    monkeypatch.setenv("FORGET_RNG", "1")
    stop = external_restart_check(spec, CommandWorkload)
    assert stop is not None and stop.rule == "restart"
    assert "the framework does not resume exactly. Fix: save into ABLATE_CHECKPOINT_DIR" in (
        stop.message
    )
    assert "the random generators" in stop.message


def test_a_trainer_passes_and_its_fixes_are_the_trainers(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from ablations.byo.hf import TrainerWorkload
    from tests.ablations.byo.test_hf import spec_for

    store = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 1000})
    assert external_restart_check(spec_for(tmp_path, checkpoint=store), TrainerWorkload) is None
    assert "ignore_data_skip" in TrainerWorkload.resume_fixes["batches"]


def _adapter(name: str, tmp_path: Path, section: CheckpointSection) -> tuple[RunSpec, Any]:
    """A short run spec of each adapter, and its workload (skipped without its extra)."""
    if name == "command":
        from tests.ablations.byo.test_command import spec_for

        return spec_for(section, tmp_path), CommandWorkload
    if name == "lightning":
        pytest.importorskip("lightning", reason="the lightning extra is not installed")
        from ablations.byo.lightning import LightningWorkload
        from tests.ablations.byo.test_lightning import spec_for as lightning_spec

        spec = lightning_spec(tmp_path, checkpoint=section, params={"lr": 0.05, "resumable": True})
        return spec, LightningWorkload
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    from ablations.byo.hf import TrainerWorkload
    from tests.ablations.byo.test_hf import spec_for as hf_spec

    return hf_spec(tmp_path, checkpoint=section), TrainerWorkload


@pytest.mark.parametrize("adapter", ["command", "lightning", "hf"])
def test_the_check_of_a_pool_attempt_leaves_the_campaigns_pointer(
    tmp_path: Path, adapter: str
) -> None:
    """On a work pool the campaign points at the preflight's accepted attempt in the run's own
    folder before the check runs: the check saves and deletes only under its own run id, so
    the attempt can still commit its result (the check once deleted the pointer, and no
    preflight of a user's own code ever passed on a pool)."""
    from ablations.checkpoint import fence
    from ablations.checkpoint.store import open_store

    section = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 1000})
    spec, workload = _adapter(adapter, tmp_path, section)
    store = open_store(section)
    fence.accept(store, spec.campaign_id, spec.run_id, "attempt-1")
    assert external_restart_check(spec, workload) is None
    assert fence.accepted(store, spec.campaign_id, spec.run_id) == "attempt-1"
    assert store.keys(f"{spec.campaign_id}/restart-{spec.run_id}") == []  # nothing left over
