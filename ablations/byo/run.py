"""One run of an external workload, from its spec to its `RunRecord`.

    record = execute(spec, factory, checkpoints)

The same record a built-in workload's run gets (`ablations.training.driver.execute`): status,
stop (rule, reason, step), metrics, evaluations, timings, checkpoint summary, and the run files:
step losses, evaluations and (when the code wrote them) predictions. There are no final
weights: the model is the framework's, so `ablate verify` re-hashes the run's files but does
not re-evaluate it.
"""

from __future__ import annotations

import ast
import importlib.util
import statistics
import sys
import time
from pathlib import Path

from ablations.byo import ExternalWorkload, framework_versions
from ablations.byo.session import PREDICTION_COLUMNS, Session
from ablations.checkpoint.manager import CheckpointManager
from ablations.errors import Interrupted, MissingMetric, NoUsableRestart, WorkloadError
from ablations.files.names import run_file_names
from ablations.run.causes import cause_of_own_write
from ablations.run.records import (
    CheckpointSummary,
    RunEnvironment,
    RunError,
    RunRecord,
    RunSpec,
    Stop,
    rejection_of,
)
from ablations.training.outcome import interrupted_error, run_status
from ablations.training.run_files import write_csv


def execute(
    spec: RunSpec, factory: ExternalWorkload, checkpoints: CheckpointManager | None = None
) -> RunRecord:
    """Run `spec` through `factory`'s own loop; never raises for the run."""
    started_at = time.time()
    session = Session(spec, checkpoints)
    stop: Stop | None = None
    error: RunError | None = None
    try:
        factory.run_external(spec, session)
        stop = session.stop
        if session.interrupted_at is not None:
            pass  # preempted (maybe before any evaluation): recorded as interrupted below
        elif stop is None and session.step < session.end:
            raise WorkloadError(
                f"the training code ended at step {session.step} of {session.end} without "
                "being asked to stop"
            )
        elif stop is None and not session.evaluations:
            raise MissingMetric(
                f"the training code reported no {spec.metric.name!r} by step {session.step}: it "
                f"must evaluate every {spec.workload.eval_every} steps and at the last step it "
                f"trains ({session.end}{' in this pilot, ABLATE_UNTIL' if spec.until else ''})"
            )
    except NoUsableRestart as exc:
        stop = Stop(rule="restart", step=exc.step, message=exc.message)
    except Exception as exc:  # a crash of the user's code fails this run, never the caller
        error = RunError.of(exc)
        stop = None
    summary = CheckpointSummary()
    try:
        summary = session.close()
    except Exception as exc:
        error = error or RunError.of(exc)
    if session.interrupted_at is not None and error is None:
        section = spec.checkpoint
        saved = session.checkpoints is not None and section is not None and section.on_terminate
        error = interrupted_error(Interrupted(session.interrupted_at, saved=saved), summary)
    metrics = dict(session.evaluations[-1]) if session.evaluations else {}
    metrics.pop("step", None)
    artifacts: dict[str, str] = {}
    # An interrupted run is not finished: its rerun writes its run files.
    if spec.out_dir is not None and session.interrupted_at is None:
        exporting = time.perf_counter()
        try:
            artifacts = write_run_files(Path(spec.out_dir), spec.run_id, session)
        except Exception as exc:  # a full disk is the machine's
            error = error or RunError.of(exc, cause=cause_of_own_write(exc))
        session.timings.export += time.perf_counter() - exporting
    status = run_status(spec, stop, error, metrics)
    return RunRecord(
        run_id=spec.run_id,
        variant=spec.variant,
        seed=spec.seed,
        category=spec.category,
        phase=spec.phase,
        status=status,
        stop=stop if error is None else None,
        error=error,
        rejection=rejection_of(spec, metrics, session.step) if status == "rejected" else None,
        steps_done=session.step,
        metrics=metrics,
        evaluations=session.evaluations,
        timings=session.timings,
        step_seconds=statistics.median(session.step_seconds) if session.step_seconds else None,
        device=spec.device,
        environment=environment(spec, factory),
        started_at=started_at,
        ended_at=time.time(),
        checkpoint=summary,
        artifacts=artifacts,
    )


def environment(spec: RunSpec, factory: ExternalWorkload) -> RunEnvironment:
    """torch and the card as a built-in run records them, plus the framework's versions."""
    kind = spec.device.partition(":")[0]
    if "torch" not in sys.modules and kind != "cuda":
        # A command's run: its program loads torch if it needs it, this process need not.
        version, cuda_version = installed_torch()
        return RunEnvironment(
            torch=version,
            cuda=cuda_version,
            device_name=kind,
            frameworks=framework_versions(factory),
        )
    import torch

    device = torch.device(spec.device)
    cuda = device.type == "cuda" and torch.cuda.is_available()
    return RunEnvironment(
        torch=torch.__version__,
        cuda=torch.version.cuda,
        device_name=torch.cuda.get_device_name(device) if cuda else device.type,
        frameworks=framework_versions(factory),
    )


def installed_torch() -> tuple[str, str | None]:
    """`torch.__version__` and `torch.version.cuda`, read from the installed `torch/version.py`
    without importing torch (3 s of CPU)."""
    spec = importlib.util.find_spec("torch")  # finds the package, runs none of it
    assert spec is not None and spec.submodule_search_locations, "torch is a dependency"
    source = Path(spec.submodule_search_locations[0], "version.py").read_text()
    values: dict[str, object] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Constant):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    values[target.id] = node.value.value
    version, cuda = values.get("__version__"), values.get("cuda")
    if not isinstance(version, str) or not (cuda is None or isinstance(cuda, str)):
        import torch  # a layout this reading does not know: ask torch itself

        return torch.__version__, torch.version.cuda
    return version, cuda


def write_run_files(out_dir: Path, run_id: str, session: Session) -> dict[str, str]:
    """The run's reported losses and evaluations, and its predictions file when it wrote
    one; kind -> path relative to `out_dir` (the names a built-in workload's run uses)."""
    if Path(run_id).name != run_id or run_id.startswith("."):
        raise ValueError(f"run id {run_id!r} is not a plain file name")
    names_of = run_file_names(run_id)
    files = {"steps": names_of["steps"], "evals": names_of["evals"]}
    write_csv(out_dir / files["steps"], ["step", "loss"], session.losses)
    evaluations = session.evaluations
    names = list(dict.fromkeys(k for e in evaluations for k in e if k != "step"))
    rows = ([int(e["step"]), *(e.get(n, "") for n in names)] for e in evaluations)
    write_csv(out_dir / files["evals"], ["step", *names], rows)
    predictions = session.predictions
    if predictions is not None:
        files["predictions"] = names_of["predictions"]
        columns = zip(predictions.ids, predictions.labels, predictions.predicted, strict=True)
        write_csv(out_dir / files["predictions"], list(PREDICTION_COLUMNS), columns)
    return files
