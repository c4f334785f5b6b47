"""Security: a planted pickle with code is refused and never run; ids stay inside their folder.

(Dummy credentials never reaching the manifest, report or logs is checked by the S3 outage
campaign in `test_s3_outage.py`, which runs with distinctive dummy credentials.)
"""

from __future__ import annotations

import copy
import io
import pickle
import re
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ablations.checkpoint import commit
from ablations.checkpoint.commit import Identity
from ablations.checkpoint.state import MODEL, STATE
from ablations.checkpoint.store import open_store
from ablations.plan.infrastructure import CheckpointSection
from ablations.plan.variants import run_id
from ablations.run.records import RunSpec
from ablations.workers.jobs import run_spec
from tests.specs import bare_spec


class _CreatesAFile:
    """Unpickling this opens (creates) `path` for writing: code run by a pickle."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.path), "w"))


def _spec(store: Path, out: Path) -> RunSpec:
    return bare_spec(
        run_id="control-s0-0123456789", campaign_id="sec", plan_hash="h" * 64,
        variant="control", category="essential", phase="main", seed=0,
        params={"width": 16, "depth": 1, "batch_size": 32}, steps=60, eval_every=30,
        entry="ablations.workloads.digits:DigitsWorkload", metric="accuracy",
        threshold=0.0, out_dir=str(out),
        checkpoint=CheckpointSection(store=f"file://{store}", interval={"steps": 20}),
    )  # fmt: skip


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("form", ["torch-zip", "raw-pickle"])
def test_a_planted_pickle_in_the_store_is_refused_and_never_executed(
    form: str, tmp_path: Path
) -> None:
    marker = tmp_path / "PWNED"
    evil = {"model": _CreatesAFile(marker)}
    if form == "torch-zip":
        buffer = io.BytesIO()
        torch.save(evil, buffer)
        data = buffer.getvalue()
    else:
        data = pickle.dumps(evil)
    spec = _spec(tmp_path / "store", tmp_path / "out")
    assert spec.checkpoint is not None
    store = open_store(spec.checkpoint)
    # A committed step with a consistent commit record (sizes, sha256, identity): only the
    # safe loader stands between it and the worker. It is newer than anything the run has.
    me = Identity(spec.campaign_id, spec.run_id, spec.plan_hash)
    commit.write(store, me, 40, {MODEL: data, STATE: data})

    record = run_spec(spec)  # exactly what a slot's worker does with a run

    assert not marker.exists(), "the pickle's code ran"
    assert record.status == "accepted" and record.steps_done == 60
    assert record.checkpoint.resumed_from_step is None  # trained from the start instead
    assert "refused step 40" in (record.checkpoint.last_error or "")
    assert "cannot be loaded safely" in (record.checkpoint.last_error or "")
    committed, _ = commit.scan(store, me)
    assert 40 not in committed or committed[-1] == 60  # the forged step was removed or replaced


SAFE_COMPONENT = re.compile(r"^[A-Za-z0-9._-]+$")


@settings(max_examples=200, deadline=None)
@given(
    prefix=st.text(min_size=0, max_size=80),
    seed=st.integers(min_value=0, max_value=2**31),
    level=st.one_of(st.text(max_size=30), st.integers(), st.floats(allow_nan=False)),
)
def test_run_ids_are_one_safe_path_component(prefix: str, seed: int, level: object) -> None:
    made = run_id("h" * 64, {"x": level}, seed, 10, prefix)  # type: ignore[dict-item]
    assert SAFE_COMPONENT.match(made), made
    assert made not in (".", "..") and not made.startswith(".")
    out = Path("/campaign/out")
    assert (out / "records" / f"{made}.json").resolve().parent == out / "records"
    assert commit.step_key(Identity("camp", made, "h"), 1).split("/")[:2] == ["camp", made]


def test_hostile_factor_levels_and_campaign_ids_cannot_leave_the_folder(
    tmp_path: Path,
) -> None:
    from ablations.errors import PlanError
    from ablations.plan.model import parse_plan, plan_hash
    from ablations.plan.runs import planned_runs
    from tests.flows.conftest import TINY_PLAN

    data = copy.deepcopy(TINY_PLAN)
    data["control"]["params"]["optimizer"] = "adam"
    data["factors"] = {"optimizer": {"category": "useful", "levels": ["../../../tmp/x", "/etc"]}}
    plan = parse_plan(data, "hostile")
    for run in planned_runs(plan, plan_hash(plan)):
        assert SAFE_COMPONENT.match(run.run_id) and "/" not in run.run_id, run.run_id
    for bad in ("../escape", "a/b", "/abs", "..", ".hidden", "x" * 300):
        with pytest.raises(PlanError, match=r"campaign\.id"):
            parse_plan({**TINY_PLAN, "campaign": {**TINY_PLAN["campaign"], "id": bad}}, "x")
