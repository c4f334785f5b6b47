"""`flows.pool` without a Prefect server: the deployment's name, the pool's slot placeholders,
results an accepted attempt already left in the store, and `write_results` on a finished folder.

tests/flows/test_work_pool_units.py covers the slot counts, bad `--devices` and the worker's
side; tests/flows/test_work_pool.py submits to a real pool. Every executor here has
`attempts=0`, so none can submit a flow run: what it returns comes from the store alone.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.campaign.campaign import Campaign
from ablations.campaign.folder import MANIFEST, RELOAD, REPORT, RUNS_CSV, CampaignFolder
from ablations.campaign.manifest import read_manifest
from ablations.campaign.opening import register
from ablations.campaign.specs import spec_for
from ablations.checkpoint import fence
from ablations.plan.infrastructure import ResourcesSection
from ablations.plan.variants import Phase
from ablations.pool.attempts import OUTPUTS, RESULT, Kind, attempt_prefix, attempt_store
from ablations.pool.trust import seal
from ablations.run.records import PreflightReport, RunRecord, RunSpec, Timings
from flows.pool import PoolExecutor, PoolSettings, pool_slots
from tests.flows.conftest import plan_text

ROOT = Path(__file__).resolve().parents[2]


def test_the_deployment_is_the_one_prefect_yaml_declares() -> None:
    from flows.run import one_run

    config = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    [deployment] = config["deployments"]
    assert deployment["entrypoint"] == f"flows.run:{one_run.fn.__name__}"
    settings = PoolSettings(deployment["work_pool"]["name"])
    assert settings.deployment == f"{one_run.name}/{deployment['name']}"
    assert PoolSettings("other").deployment == f"{one_run.name}/other"


def test_the_engine_command_skips_the_supervisor_and_is_not_the_default() -> None:
    """Given no command, Prefect 3.9's process worker starts a workspace supervisor that
    imports Prefect and then execs the engine with the worker's own interpreter: a second
    interpreter per run (1.1 CPU s). The engine as the command (docs/work-pools.md, what the
    pool tests and bench deploy) is started directly; it is not prefect.yaml's default, since
    `python` on a host's PATH may be another environment (issue 45)."""
    from prefect.client.schemas.objects import FlowRun
    from prefect.workers.process import ProcessJobConfiguration

    from tests.flows.work_pool import ENGINE_COMMAND

    config = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    [deployment] = config["deployments"]
    assert "command" not in (deployment["work_pool"].get("job_variables") or {})
    assert f'--job-variable command="{ENGINE_COMMAND}"' in (ROOT / "docs/work-pools.md").read_text()
    job = ProcessJobConfiguration(command=ENGINE_COMMAND)
    job.prepare_for_flow_run(FlowRun(flow_id=uuid.uuid4()))
    assert job._command_configured  # the worker's path without the supervisor
    default = ProcessJobConfiguration()
    default.prepare_for_flow_run(FlowRun(flow_id=uuid.uuid4()))
    assert not default._command_configured


@pytest.mark.parametrize(
    ("devices", "override"), [(["cuda:0", "cuda:7"], None), (1, "cuda:3,cuda:5"), ("auto", "2")]
)
def test_pool_slots_are_placeholders_never_devices_of_this_machine(
    devices: Any, override: str | None
) -> None:
    slots = pool_slots(PoolSettings("gpus"), ResourcesSection(devices=devices), override)
    assert len(slots) == 2
    assert {(s.device, s.cpu_threads) for s in slots} == {("pool", 1)}
    executor = PoolExecutor(PoolSettings("gpus"), slots)
    assert executor.slots == slots


def _spec(tmp_path: Path, tiny_plan: dict[str, Any], phase: Phase = "pilot") -> RunSpec:
    tiny_plan["checkpoint"]["store"] = f"file://{tmp_path / 'store'}"  # one hosts can share
    registration = register(plan_text(tiny_plan), tmp_path / "out")
    campaign = Campaign.load(Path(registration.out_dir))
    run = campaign.phase(phase)[0]
    return spec_for(campaign.plan, campaign.registration, run)


def _offline() -> PoolExecutor:
    return PoolExecutor(PoolSettings("gpus", attempts=0, poll_s=0.01), [])


def _leave(
    spec: RunSpec, attempt: str, result: str, files: dict[str, bytes], kind: Kind = "run"
) -> None:
    """What a host leaves in the store for one attempt: its outputs, then its result (in the
    envelope naming the spec it answers)."""
    store = attempt_store(spec)
    prefix = attempt_prefix(spec, attempt)
    for relative, data in files.items():
        store.put(f"{prefix}/{OUTPUTS}/{relative}", data)
    store.put(f"{prefix}/{RESULT}", seal(spec, kind, attempt, result))


def _record(
    spec: RunSpec, artifacts: dict[str, str], files: dict[str, bytes] | None = None
) -> RunRecord:
    """A host's record: the files it exported hashed in it, as `run_on_host` leaves it."""
    hashes = {
        relative: hashlib.sha256(data).hexdigest() for relative, data in (files or {}).items()
    }
    return RunRecord(
        run_id=spec.run_id, variant=spec.variant, seed=spec.seed, category=spec.category,
        phase=spec.phase, status="accepted", steps_done=20, metrics={"accuracy": 0.75},
        artifacts=artifacts, export_sha256=hashes,
    )  # fmt: skip


def test_the_accepted_attempts_result_is_taken_and_its_files_brought_home(
    tmp_path: Path, tiny_plan: dict[str, Any]
) -> None:
    spec = _spec(tmp_path, tiny_plan)
    assert spec.out_dir is not None
    files = {
        f"metrics/{spec.run_id}.steps.csv": b"step,loss\n1,2.3\n",
        f"predictions/{spec.run_id}.csv": b"input_id,label,predicted\n0,1,1\n",
    }
    record = _record(spec, {"steps": f"metrics/{spec.run_id}.steps.csv",
                            "predictions": f"predictions/{spec.run_id}.csv"}, files)  # fmt: skip
    _leave(spec, "1-abc", record.model_dump_json(), files)
    fence.accept(attempt_store(spec), spec.campaign_id, spec.run_id, "1-abc")

    got = _offline().run(spec)
    assert got == record
    out = Path(spec.out_dir)
    for relative, data in files.items():
        assert (out / relative).read_bytes() == data
    assert not [p for p in out.rglob(".*.part")]  # written through a temporary, renamed


def test_a_result_of_an_attempt_not_accepted_is_never_taken(
    tmp_path: Path, tiny_plan: dict[str, Any]
) -> None:
    spec = _spec(tmp_path, tiny_plan)
    assert spec.out_dir is not None
    artifacts = {"steps": f"metrics/{spec.run_id}.steps.csv"}
    _leave(spec, "1-old", _record(spec, artifacts).model_dump_json(), {artifacts["steps"]: b"x"})
    fence.accept(attempt_store(spec), spec.campaign_id, spec.run_id, "2-new")  # left nothing

    got = _offline().run(spec)
    assert got.status == "failed" and got.error is not None
    assert (got.error.type, got.error.cause) == ("WorkerLost", "infrastructure")
    assert got.error.message.startswith("0 attempts on pool gpus lost")
    assert not (Path(spec.out_dir) / artifacts["steps"]).exists()


def test_preflight_takes_the_accepted_report_or_fails_as_lost(
    tmp_path: Path, tiny_plan: dict[str, Any]
) -> None:
    spec = _spec(tmp_path, tiny_plan)
    lost = _offline().preflight(spec, None)
    assert not lost.passed and lost.error is not None
    assert (lost.error.type, lost.error.cause) == ("WorkerLost", "infrastructure")

    report = PreflightReport(passed=True, seconds=2.5)
    _leave(spec, "1-pre", report.model_dump_json(), {}, kind="preflight")
    fence.accept(attempt_store(spec), spec.campaign_id, spec.run_id, "1-pre")
    assert _offline().preflight(spec, {"train": 10}) == report


def test_write_results_exports_a_finished_folder_in_this_process(
    tmp_path: Path, tiny_plan: dict[str, Any]
) -> None:
    out = tmp_path / "out"
    register(plan_text(tiny_plan), out)
    folder = CampaignFolder(out)
    campaign = Campaign.load(out)
    runs = campaign.runs
    for i, run in enumerate(runs):
        folder.write_record(
            RunRecord(
                run_id=run.run_id, variant=run.variant, seed=run.seed, category=run.category,
                phase=run.phase, status="accepted", steps_done=run.steps,
                metrics={"accuracy": 0.8 + i / 100, "loss": 0.5},
                timings=Timings(load=0.5, train=1.5), started_at=1000.0 + i, ended_at=1001.0 + i,
            )
        )  # fmt: skip
    manifest = _offline().write_results(campaign)
    assert manifest == read_manifest(out)  # as written
    assert [r.run_id for r in manifest.runs] == [r.run_id for r in runs]
    assert {r.status for r in manifest.runs} == {"accepted"}
    listed = {e.path for e in manifest.files or []}
    assert {RUNS_CSV, REPORT, RELOAD} <= listed
    assert all((out / name).stat().st_size > 0 for name in listed)
    assert json.loads((out / MANIFEST).read_text())["campaign_id"] == tiny_plan["campaign"]["id"]


def test_a_refused_result_is_recorded_untrusted_and_the_run_submitted_afresh(
    tmp_path: Path,
    tiny_plan: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A forged result under the accepted pointer (a restarted campaign finds it): refused,
    and instead of failing on every rerun the run gets a fresh attempt, which a host runs
    (the host's side for real, in this process: only Prefect's submission is left out)."""
    import flows.pool
    from ablations.pool.attempts import run_on_host

    spec = _spec(tmp_path, tiny_plan)
    assert spec.out_dir is not None
    artifacts = {"steps": f"metrics/{spec.run_id}.steps.csv"}
    forged = _record(spec, artifacts).model_copy(update={"metrics": {"accuracy": 0.99}})
    _leave(spec, "1-forged", forged.model_dump_json(), {artifacts["steps"]: b"forged"})
    fence.accept(attempt_store(spec), spec.campaign_id, spec.run_id, "1-forged")
    monkeypatch.setenv("ABLATE_DEVICES", "cpu")
    monkeypatch.setenv("ABLATE_SLOT_DIR", str(tmp_path / "slots"))
    submitted: list[str] = []

    def run_deployment(name: str, parameters: dict[str, Any], **_: Any) -> Any:
        from prefect.client.schemas.objects import FlowRun

        submitted.append(parameters["attempt"])
        run_on_host(spec, "run", None, attempt=parameters["attempt"])
        return FlowRun(flow_id=uuid.uuid4(), name=parameters["attempt"])

    monkeypatch.setattr(flows.pool, "run_deployment", run_deployment)
    monkeypatch.setattr(PoolExecutor, "_wait", lambda *args: ("ended COMPLETED", False))
    executor = PoolExecutor(PoolSettings("gpus", attempts=1, poll_s=0.01), [])

    record = executor.run(spec)
    assert len(submitted) == 1 and submitted[0] != "1-forged"
    assert record.status in ("accepted", "rejected") and record.metrics["accuracy"] != 0.99
    assert set(record.export_sha256) == set(record.artifacts.values())
    for relative in record.artifacts.values():  # the folder's copy is the hashed one
        data = (Path(spec.out_dir) / relative).read_bytes()
        assert hashlib.sha256(data).hexdigest() == record.export_sha256[relative]
    said = capsys.readouterr().out  # the refusal is said, then the run retried
    assert "the result names no sha256" in said and "submitted afresh" in said

    # Refused on every attempt: failed, as `UntrustedResult` (a rerun submits it again).
    _leave(spec, "1-forged", forged.model_dump_json(), {artifacts["steps"]: b"forged"})
    fence.accept(attempt_store(spec), spec.campaign_id, spec.run_id, "1-forged")

    def forges(name: str, parameters: dict[str, Any], **_: Any) -> Any:
        from prefect.client.schemas.objects import FlowRun

        _leave(spec, parameters["attempt"], forged.model_dump_json(), {})
        return FlowRun(flow_id=uuid.uuid4(), name=parameters["attempt"])

    monkeypatch.setattr(flows.pool, "run_deployment", forges)
    failed = executor.run(spec)
    assert failed.status == "failed" and failed.error is not None
    assert (failed.error.type, failed.error.cause) == ("UntrustedResult", "infrastructure")
    assert failed.error.message.startswith("1 attempts on pool gpus lost or refused")


def test_each_submission_carries_its_campaigns_tag_and_goes_to_the_chosen_queue(
    tmp_path: Path, tiny_plan: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two campaigns on one pool: the UI tells their flow runs apart by tag, and a campaign
    given a queue (`--queue`: its priority, its limit) submits there, and nowhere else."""
    import flows.pool

    spec = _spec(tmp_path, tiny_plan)
    submitted: list[dict[str, Any]] = []

    class Submitted(Exception):
        pass

    def run_deployment(name: str, parameters: dict[str, Any], **options: Any) -> Any:
        submitted.append({"name": name, **options})
        raise Submitted  # what happens next is the other tests' business

    monkeypatch.setattr(flows.pool, "run_deployment", run_deployment)
    for queue in ("urgent", None):
        executor = PoolExecutor(PoolSettings("gpus", attempts=1, poll_s=0.01, queue=queue), [])
        with pytest.raises(Submitted):
            executor.run(spec)
    assert [s["work_queue_name"] for s in submitted] == ["urgent", None]
    assert all(s["tags"] == [f"campaign:{spec.campaign_id}"] for s in submitted)
    assert {s["name"] for s in submitted} == {"run/gpus"}


def test_a_campaign_never_has_more_flow_runs_out_than_its_slots_whatever_its_threads(
    tmp_path: Path, tiny_plan: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The campaign's share of a pool: a flow run from the UI has 16 task threads, so only the
    executor itself keeps `--devices` (here 2) flow runs submitted and not over; the others
    wait in the campaign, not in the pool's queue ahead of another campaign's runs."""
    import threading
    import time

    import flows.pool
    from ablations.plan.infrastructure import ResourcesSection

    spec = _spec(tmp_path, tiny_plan)
    out, peak, submitted = 0, 0, 0
    lock = threading.Lock()

    def run_deployment(name: str, parameters: dict[str, Any], **_: Any) -> Any:
        from prefect.client.schemas.objects import FlowRun

        nonlocal out, peak, submitted
        with lock:
            out, submitted = out + 1, submitted + 1
            peak = max(peak, out)
        return FlowRun(flow_id=uuid.uuid4(), name=parameters["attempt"])

    def wait(*_: Any) -> tuple[str, bool]:
        nonlocal out
        time.sleep(0.2)  # the flow run queued, then running on a host
        with lock:
            out -= 1
        return "ended COMPLETED", False

    monkeypatch.setattr(flows.pool, "run_deployment", run_deployment)
    monkeypatch.setattr(PoolExecutor, "_wait", wait)
    slots = pool_slots(PoolSettings("gpus"), ResourcesSection(devices=1), "2")
    executor = PoolExecutor(PoolSettings("gpus", attempts=1, poll_s=0.01), slots)
    threads = [threading.Thread(target=executor.run, args=(spec,)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert submitted == 6 and peak == 2
