"""Kill a charlm run mid-training, resume it from its checkpoint, compare with an uninterrupted run.

    python bench/kill_resume.py --device cuda:0 --steps 300 --kill-after 150 --out DIR
    python bench/kill_resume.py --device cpu --steps 60 --kill-after 30 --params '{"n_embd": 32}'

Three processes, each with deterministic algorithms on (`torch.use_deterministic_algorithms`,
`CUBLAS_WORKSPACE_CONFIG=:4096:8`): the reference run; the same run killed with SIGKILL once
a checkpoint at or after `--kill-after` is committed; and the resume (same spec and store).
Writes `DIR/kill_resume.json` and prints one line: bitwise equal or the measured difference.
Exits 1 when the kill or the resume did not happen as planned.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ablations.checkpoint.commit import COMMIT
from ablations.plan.experiment import MetricSection
from ablations.plan.infrastructure import CheckpointSection, Interval
from ablations.plan.workload import WorkloadSection
from ablations.run.records import RunRecord, RunSpec

ENTRY = "ablations.workloads.charlm:CharLMWorkload"


def spec_for(args: argparse.Namespace, store: Path) -> RunSpec:
    return RunSpec(
        run_id="charlm-kill", campaign_id="bench", plan_hash="0" * 64, variant="control",
        category="essential", phase="main", seed=0, params=json.loads(args.params),
        steps=args.steps, workload=WorkloadSection(entry=ENTRY, eval_every=args.steps),
        metric=MetricSection(
            name="val_loss", direction="minimize", threshold=100.0, useful_effect=0.01
        ),
        device=args.device,
        checkpoint=CheckpointSection(
            store=f"file://{store}", interval=Interval(steps=args.every), keep_last=2
        ),
    )  # fmt: skip


def child(spec_path: str, result_path: str) -> None:
    """Run one spec deterministically in this process; write its record."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    from ablations.workers.jobs import run_spec

    record = run_spec(RunSpec.model_validate_json(Path(spec_path).read_text()))
    Path(result_path).write_text(record.model_dump_json())


def launch(spec: RunSpec, folder: Path, name: str) -> tuple[subprocess.Popen[bytes], Path]:
    spec_path, result = folder / f"{name}.spec.json", folder / f"{name}.record.json"
    spec_path.write_text(spec.model_dump_json())
    env = {**os.environ, "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    command = [sys.executable, __file__, "--child", str(spec_path), str(result)]
    return subprocess.Popen(command, env=env), result


def committed(store: Path, spec: RunSpec) -> list[int]:
    base = store / spec.campaign_id / spec.run_id
    return sorted(int(p.parent.name[5:]) for p in base.glob(f"step-*/{COMMIT}"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--every", type=int, default=50, help="checkpoint every N steps")
    parser.add_argument("--kill-after", type=int, default=150)
    parser.add_argument("--params", default="{}", help="charlm params as JSON")
    parser.add_argument("--out", type=Path, default=Path("kill-resume-out"))
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    reference_spec = spec_for(args, args.out / "store-reference")
    process, path = launch(reference_spec, args.out, "reference")
    if process.wait(timeout=args.timeout) != 0:
        print("FAIL: the reference run's process failed")
        return 1
    reference = RunRecord.model_validate_json(path.read_text())

    store = args.out / "store-killed"
    killed_spec = spec_for(args, store)
    process, path = launch(killed_spec, args.out, "killed")
    deadline = time.monotonic() + args.timeout
    while process.poll() is None and time.monotonic() < deadline:
        if any(step >= args.kill_after for step in committed(store, killed_spec)):
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    process.wait()
    killed_at = max(committed(store, killed_spec), default=0)
    if process.returncode != -signal.SIGKILL or killed_at >= args.steps:
        print(f"FAIL: the run was not killed mid-training (exit {process.returncode})")
        return 1
    process, path = launch(killed_spec, args.out, "resumed")
    if process.wait(timeout=args.timeout) != 0:
        print("FAIL: the resumed run's process failed")
        return 1
    resumed = RunRecord.model_validate_json(path.read_text())
    equal = resumed.metrics == reference.metrics
    diffs = {k: abs(resumed.metrics[k] - v) for k, v in reference.metrics.items()}
    result = {
        "device": args.device,
        "device_seen": resumed.device,
        "device_name": resumed.environment.device_name if resumed.environment else None,
        "steps": args.steps,
        "killed_after_checkpoint": killed_at,
        "resumed_from_step": resumed.checkpoint.resumed_from_step,
        "reference_metrics": reference.metrics,
        "resumed_metrics": resumed.metrics,
        "bitwise_equal": equal,
        "abs_difference": diffs,
        "deterministic_algorithms": True,
    }
    (args.out / "kill_resume.json").write_text(json.dumps(result, indent=2))
    verdict = "bitwise equal" if equal else f"DIFFERENT by {diffs}"
    print(
        f"kill and resume on {resumed.device} ({result['device_name']}): killed at the "
        f"checkpoint of step {killed_at}, resumed from {resumed.checkpoint.resumed_from_step}; "
        f"final metrics {verdict} ({reference.status} / {resumed.status})"
    )
    # The kill may land inside a commit (its record half written): the resume then refuses
    # it and takes the one before, which is what it must do.
    resumed_from = resumed.checkpoint.resumed_from_step or 0
    return 0 if 0 < resumed_from <= killed_at and resumed.steps_done == args.steps else 1


if __name__ == "__main__":
    sys.exit(main())
