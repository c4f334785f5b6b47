"""The campaign's steps over a real folder and real slot workers, without Prefect: a failed
preflight ends at `fix` and is repeated by a rerun; the main runs resume from their pilots."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from ablations.campaign.campaign import Campaign
from ablations.campaign.folder import REFRAME_DRAFT
from ablations.campaign.opening import register
from ablations.campaign.steps import (
    execute_run,
    gate_decided,
    recommend_gate,
    record_gate_decision,
    run_preflight,
    write_reframe_draft,
)
from ablations.errors import CampaignInterrupted
from ablations.local.executor import LocalSlots, warmup_for
from ablations.plan.model import parse_plan
from ablations.process.preemption import TERMINATE
from ablations.run.records import PreflightReport, RunError
from ablations.slots.devices import SlotSpec
from tests.conftest import ROOT
from tests.faults.workloads import LOSE_CURSOR
from tests.flows.conftest import TINY_PLAN, plan_text

CPU = SlotSpec(name="cpu#0", device="cpu", cpu_threads=1)


@pytest.mark.slow
def test_a_failed_preflight_is_fixed_then_rerun_and_main_runs_resume_from_their_pilots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = copy.deepcopy(TINY_PLAN)
    data["workload"]["entry"] = "tests.faults.workloads:FaultDigits"
    data["factors"] = {"width": {"category": "essential", "levels": [8]}}
    data["seeds"] = [0]
    data["checkpoint"] = {"store": "file://ckpt", "interval": {"steps": 1000}}
    out = tmp_path / "out"
    register(plan_text(data), out)
    campaign = Campaign.load(out)
    plan = campaign.plan
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the slot workers import the fault workload

    # 1. The workload's load_state_dict forgets its batch cursor: a defect to fix.
    monkeypatch.setenv(LOSE_CURSOR, "1")
    with LocalSlots.open([CPU], warmup_for(plan, out)) as executor:
        failed = run_preflight(campaign, executor)
        fix = record_gate_decision(campaign, recommend_gate(campaign, 1))
    assert not failed.passed and failed.restart is not None
    assert fix.decision == "fix" and fix.reason.startswith("restart check: ")
    assert "fix the workload's state_dict/load_state_dict" in fix.reason
    assert not (out / REFRAME_DRAFT).exists()
    assert not gate_decided(campaign)  # the recorded fix is not a decision a rerun replays

    # 2. Fixed: the same folder's rerun repeats preflight (under a key of its own), runs the
    # pilot and asks the gate again.
    monkeypatch.delenv(LOSE_CURSOR)
    control = next(r for r in campaign.phase("pilot") if r.variant == "control")
    with LocalSlots.open([CPU], warmup_for(plan, out)) as executor:
        passed = run_preflight(campaign, executor)
        pilot = [execute_run(campaign, r.run_id, executor) for r in campaign.phase("pilot")]
        decision = record_gate_decision(campaign, recommend_gate(campaign, 1))
        main = execute_run(campaign, control.continues or "", executor)
    assert passed.passed, passed
    assert failed.check_id and passed.check_id and failed.check_id != passed.check_id
    assert {failed.check_id[:-9], passed.check_id[:-9]} == {f"preflight-{control.run_id}"}
    assert decision.decision == "continue" and gate_decided(campaign)
    assert all(r.steps_done == plan.pilot_steps for r in pilot)

    # The control's main run resumed where its pilot ended and trained only the rest.
    assert main.status == "accepted", main
    assert main.checkpoint.resumed_from_step == plan.pilot_steps
    assert main.steps_done == plan.workload.steps
    assert len(main.evaluations) == plan.workload.steps // plan.workload.eval_every


def test_a_reframe_draft_keeps_the_question_and_comments_the_reason(tmp_path: Path) -> None:
    out = tmp_path / "out"
    register(plan_text(copy.deepcopy(TINY_PLAN)), out)
    reason = "the control's accuracy in the pilot is 0.41 against the threshold 0.5\nsecond line"

    text = (write_reframe_draft(Campaign.load(out), reason)).read_text()

    draft = parse_plan(yaml.safe_load(text))  # a valid plan, ready to edit
    assert draft.campaign.id == "tiny-reframed"
    assert draft.campaign.question == TINY_PLAN["campaign"]["question"]
    comments = [line for line in text.splitlines() if line.startswith("#")]
    assert "#   the control's accuracy in the pilot is 0.41 against the threshold 0.5" in comments
    assert "#   second line" in comments
    assert "REVISE" not in text


class _InterruptedPreflight:
    """An executor whose preflight is cut short by a terminate request (a Ctrl-C or SIGTERM
    passed on): it reports what the worker made of it, an error of the infrastructure."""

    def preflight(self, spec: object, expected_inputs: object) -> PreflightReport:
        TERMINATE.request("SIGINT")
        error = RunError(
            type="Interrupted", message="interrupted at step 3", cause="infrastructure"
        )
        return PreflightReport(passed=False, error=error)


def test_a_preflight_cut_short_records_no_verdict(tmp_path: Path) -> None:
    """No preflight.json and no gate on an interruption: the rerun checks again, and the gate
    never answers `fix` (nor a crash of the workload) for what was only a Ctrl-C."""
    out = tmp_path / "out"
    register(plan_text(copy.deepcopy(TINY_PLAN)), out)
    campaign = Campaign.load(out)
    try:
        with pytest.raises(CampaignInterrupted, match="preflight stopped: SIGINT received"):
            run_preflight(campaign, _InterruptedPreflight())  # type: ignore[arg-type]
    finally:
        TERMINATE.clear()
    assert campaign.preflight() is None
    assert not (out / "preflight.json").exists() and not gate_decided(campaign)
