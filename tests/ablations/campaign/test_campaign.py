"""`Campaign`: a registered campaign loaded once per process. Its plan is parsed once for every
step of the campaign (projection, preflight, runs, gate, looks, curves, results); its runs are
found by id; the state files the campaign writes as it goes are read when asked."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.analysis.looks import Looks
from ablations.campaign.campaign import Campaign
from ablations.campaign.executor import Executor
from ablations.campaign.folder import REPORT, CampaignFolder
from ablations.campaign.gate import GateDecision
from ablations.campaign.looks import decide_look, look_runs
from ablations.campaign.manifest import Manifest, read_manifest
from ablations.campaign.opening import register
from ablations.campaign.state import save_record
from ablations.campaign.steps import (
    execute_run,
    project_campaign,
    recommend_gate,
    record_gate_decision,
    run_preflight,
)
from ablations.errors import InputError
from ablations.plan.model import Plan
from ablations.report.artifact import curves_so_far
from ablations.report.from_folder import rebuild_report
from ablations.results.write import write_results
from ablations.run.records import PreflightReport, RunRecord, RunSpec
from ablations.slots.devices import SlotSpec
from tests.ablations.analysis.synthetic import PLAN

CPU = SlotSpec(name="cpu#0", device="cpu", cpu_threads=1)
CONTROL = [0.90, 0.92, 0.91, 0.93, 0.90, 0.92, 0.91, 0.90]
OFFSET = {"width=16": -0.05, "width=128": 0.004}


def sequential_plan() -> dict[str, Any]:
    """Three variants, a pilot of the control, three looks (as tests/.../test_looks.py)."""
    data = copy.deepcopy(PLAN)
    data["factors"] = {"width": {"category": "essential", "levels": [16, 128]}}
    data["seeds"] = {"start": 3, "max": 8, "looks": [3, 5, 8], "spending": "pocock"}
    data["pilot"] = {"variants": ["control"], "steps": 50}
    return data


class InProcess:
    """An executor without processes: each run accepted with a made-up accuracy; the results
    step in this process, from the campaign it is given (as `PoolExecutor` does)."""

    slots = [CPU]

    def run(self, spec: RunSpec) -> RunRecord:
        value = CONTROL[spec.seed] + OFFSET.get(spec.variant, 0.0)
        return RunRecord(
            run_id=spec.run_id, variant=spec.variant, seed=spec.seed, category=spec.category,
            phase=spec.phase, status="accepted", steps_done=spec.until or spec.steps,
            metrics={"accuracy": value}, started_at=1000.0, ended_at=1001.0,
        )  # fmt: skip

    def preflight(self, spec: RunSpec, expected_inputs: dict[str, int] | None) -> PreflightReport:
        return PreflightReport(passed=True, seconds=0.5)

    def write_results(self, campaign: Campaign) -> Manifest:
        return write_results(campaign)


def _conforms(executor: InProcess) -> Executor:  # mypy: the fake is an Executor
    return executor


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    register(yaml.safe_dump(sequential_plan(), sort_keys=False), folder)
    return folder


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How often, from here on, a plan is validated and plan.yaml's text read."""
    counts = {"plan": 0, "plan.yaml": 0}
    validate, read = Plan.model_validate.__func__, CampaignFolder.plan_text  # type: ignore[attr-defined]

    def counted_validate(cls: type[Plan], *args: Any, **kwargs: Any) -> Plan:
        counts["plan"] += 1
        return validate(cls, *args, **kwargs)  # type: ignore[no-any-return]

    def counted_read(self: CampaignFolder) -> str:
        counts["plan.yaml"] += 1
        return read(self)

    monkeypatch.setattr(Plan, "model_validate", classmethod(counted_validate))
    monkeypatch.setattr(CampaignFolder, "plan_text", counted_read)
    yield counts


def test_every_step_of_a_campaign_uses_the_plan_parsed_once(
    out: Path, parses: dict[str, int]
) -> None:
    executor = InProcess()
    campaign = Campaign.load(out)
    assert parses == {"plan": 1, "plan.yaml": 1}

    project_campaign(campaign, 1)
    assert run_preflight(campaign, executor).passed
    for run in campaign.phase("pilot"):
        execute_run(campaign, run.run_id, executor)
    assert curves_so_far(campaign, "the pilot") is None  # no metrics files: nothing drawn
    decision = record_gate_decision(campaign, recommend_gate(campaign, 1))
    assert decision.decision == "continue", decision.reason
    for look in range(3):
        runs = look_runs(campaign, look)
        if not runs:
            break
        for run in runs:
            execute_run(campaign, run.run_id, executor)
        if not decide_look(campaign, look, 1).still_open:
            break
    manifest = executor.write_results(campaign)

    assert parses == {"plan": 1, "plan.yaml": 1}  # none of the steps parsed it again
    assert (out / REPORT).is_file()
    assert manifest == read_manifest(out)  # the manifest written, handed back as it is
    assert manifest.decision_reached and manifest.files
    assert {r.status for r in manifest.runs} <= {"accepted", "unneeded"}


def test_the_results_step_reports_what_ablate_report_rebuilds_from_the_manifest(
    out: Path,
) -> None:
    """The report is built from the manifest in memory; `ablate report` builds it from
    manifest.json: the two are the same report."""
    campaign = Campaign.load(out)
    executor = InProcess()
    for run in campaign.runs:
        if run.phase == "pilot" or run.look == 0:
            execute_run(campaign, run.run_id, executor)
    campaign.folder.write_gate(GateDecision(decision="continue", reason="healthy", source="ui"))
    decide_look(campaign, 0, 1)
    write_results(campaign)
    written = (out / REPORT).read_text()

    rebuild_report(out)
    assert (out / REPORT).read_text() == written
    assert "**continue**" in written


def test_a_campaign_finds_its_runs_and_reads_its_state_when_asked(out: Path) -> None:
    campaign = Campaign.load(out)
    assert campaign.out_dir == out and campaign.folder.out_dir == out
    assert campaign.registration.out_dir == str(out.resolve())
    pilot, main = campaign.phase("pilot"), campaign.phase("main")
    assert [*pilot, *main] == list(campaign.runs)
    assert {r.variant for r in pilot} == {"control"} and len(main) == 3 * 8
    assert campaign.run(main[5].run_id) == main[5]
    with pytest.raises(InputError, match="run 'nope' is not registered in"):
        campaign.run("nope")

    # written as the campaign goes: read from the folder whenever asked
    assert campaign.records() == {} and campaign.gate() is None
    assert campaign.looks() == Looks() and campaign.preflight() is None
    first = InProcess().run(_spec_of(campaign, pilot[0].run_id))
    save_record(out, first)
    assert campaign.records() == {first.run_id: first}
    assert campaign.finished(first.run_id) == first
    lost = RunRecord.failed(_spec_of(campaign, main[0].run_id), "WorkerLost", "gone")
    save_record(out, lost)
    assert campaign.finished(lost.run_id) is None  # a rerun retries it


def _spec_of(campaign: Campaign, run_id: str) -> RunSpec:
    from ablations.campaign.specs import spec_for

    return spec_for(campaign.plan, campaign.registration, campaign.run(run_id))


def test_a_folder_moved_after_registration_is_loaded_where_it_is_now(
    out: Path, tmp_path: Path
) -> None:
    moved = tmp_path / "moved"
    out.rename(moved)
    assert Campaign.load(moved).registration.out_dir == str(moved.resolve())


def test_a_folder_without_a_registration_is_refused(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(sequential_plan()))
    with pytest.raises(InputError, match="holds no registered campaign"):
        Campaign.load(tmp_path)
