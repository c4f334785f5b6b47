"""Each bring-your-own surface's overhead: the same code run bare and under the driver.

`--surface command` (the default), `lightning` or `hf`, each printing one summary line.

command: the recipe's script (ablations/recipes/command/train.py) run bare, with no
`ABLATE_*` variables (`ablate_report` calls are no-ops), and driven, through
`ablations.byo.run.execute` for the same steps (its reports, the campaign's replies and the
stop-rule checks; checkpoints off, as the bare run has none). Measured per step, not per
process: both sides run the script through the same wrapper (`TIMER`), which notes the time
each `ablate.report` call returns, so a step's time is (last report - first report) / (steps
- 1): the process start, torch's import and the data are in neither. The overhead is the
median over paired trials of the driven step time over the bare one, minus 1; `--width` sizes
the model (160: a bare step of about 0.56 ms on one thread of the shared 2-core machine).

lightning: bare is `trainer.fit` of the test suite's `Net` and `Sine` (tests/ablations/byo/
lightning_net.py) with the Trainer settings the adapter uses and no callback; driven is
`ablations.byo.run.execute` of the same classes (the callback: a report per step, the loss
read each step on CPU, validation every `eval_every` steps as bare). hf: bare is
`trainer.train()` of the LoRA recipe's `make_trainer` (a small corpus) with ablate's
`TrainingArguments`; driven is `execute` of the same (the callback and the loss hook). Both
in one process, after one warm-up pair (imports, the corpus); checkpoints off on both sides.

    .venv/bin/python bench/byo_overhead.py --steps 2000 --repeats 9 --width 160
    .venv/bin/python bench/byo_overhead.py --surface lightning --steps 400 --repeats 5
    .venv/bin/python bench/byo_overhead.py --surface hf --steps 100 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from ablations.byo.command import HELPER_DIR, CommandWorkload
from ablations.byo.run import execute
from ablations.plan.experiment import MetricSection
from ablations.plan.workload import WorkloadSection
from ablations.run.records import RunSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' Lightning classes
SCRIPT = Path(__file__).parents[1] / "ablations" / "recipes" / "command" / "train.py"


TIMER = """
import sys, time
import ablate_report as ablate

marks, report = [], ablate.report


def timed(step, loss=None, **metrics):
    reply = report(step, loss, **metrics)
    marks.append(time.perf_counter())
    return reply


ablate.report = timed
if {steps}:  # bare: the script's step count comes from ablate.steps(300)
    ablate.steps = lambda default=0: {steps}
sys.argv = [{script!r}, *sys.argv[1:]]
try:
    exec(compile(open({script!r}).read(), {script!r}, "exec"), {{"__name__": "__main__"}})
finally:
    with open({out!r}, "w") as handle:
        handle.write(repr((marks[-1] - marks[0]) / (len(marks) - 1)))
"""
"""The script, run with each `ablate.report` call's return time noted (`{steps}`: the step
count of a bare run, 0 under ablate), writing seconds per step to `{out}` at its end."""


def timer(folder: Path, steps: int) -> tuple[Path, Path]:
    """(the wrapper script, the file it writes seconds per step to)."""
    out = folder / f"step-seconds-{steps}"
    wrapper = folder / f"timed-{steps}.py"
    wrapper.write_text(TIMER.format(steps=steps, script=str(SCRIPT), out=str(out)))
    return wrapper, out


def bare(steps: int, width: int, folder: Path) -> float:
    """Seconds per step of the script run bare."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ABLATE_")}
    env["PYTHONPATH"] = str(HELPER_DIR)
    env["OMP_NUM_THREADS"] = "1"
    wrapper, out = timer(folder, steps)
    subprocess.run([sys.executable, str(wrapper), "--width", str(width)], env=env, check=True)
    return float(out.read_text())


MSE = MetricSection(name="mse", direction="minimize", threshold=10.0, useful_effect=0.01)
"""What the benchmark's runs are judged on (every run here is accepted under it)."""


def driven(steps: int, width: int, folder: Path) -> float:
    """Seconds per step of the script under `execute` (a command run's whole path)."""
    wrapper, out = timer(folder, 0)
    command = ["python", str(wrapper), "--lr", "{lr}", "--width", "{width}"]
    spec = RunSpec(
        run_id="bench", campaign_id="bench", plan_hash="0" * 16, variant="control",
        category="essential", phase="main", seed=0, params={"lr": 0.05, "width": width},
        steps=steps, workload=WorkloadSection(command=command, eval_every=50), metric=MSE,
        out_dir=str(folder / "out"),
    )  # fmt: skip
    os.environ["OMP_NUM_THREADS"] = "1"
    record = execute(spec, CommandWorkload)
    assert record.status == "accepted" and record.steps_done == steps, record
    return float(out.read_text())


NET = "tests.ablations.byo.lightning_net"
EVAL_EVERY = 50


def spec_of(surface: str, steps: int, out: Path) -> RunSpec:
    fields: dict[str, Any] = dict(
        run_id="bench", campaign_id="bench", plan_hash="0" * 16, variant="control",
        category="essential", phase="main", seed=0, steps=steps, out_dir=str(out),
    )  # fmt: skip
    if surface == "lightning":
        # `Sine` without its `predict_dataloader`: the bare fit makes no predictions either
        lightning = {"module": f"{NET}:Net", "data": f"{NET}:Unpredicted"}
        fields["workload"] = WorkloadSection(lightning=lightning, eval_every=EVAL_EVERY)
        fields["metric"] = MSE
        fields["params"] = {"lr": 0.05, "batch_size": 32}
    else:
        trainer = "ablations.workloads.lora:make_trainer"
        fields["workload"] = WorkloadSection(hf_trainer=trainer, eval_every=EVAL_EVERY)
        fields["metric"] = MSE.model_copy(update={"name": "eval_loss"})
        fields["params"] = {"lr": 0.003, "lora_rank": 8, "max_seq_len": 64, "corpus_bytes": 200_000}
    return RunSpec.model_validate(fields)


def bare_framework(spec: RunSpec) -> float:
    """The same classes or Trainer, run by the framework alone."""
    started = time.perf_counter()
    if spec.workload.lightning is not None:
        import lightning.pytorch as pl

        from tests.ablations.byo.lightning_net import Net, Sine

        pl.seed_everything(spec.seed, verbose=False)
        module, data = Net(lr=0.05), Sine(batch_size=32)
        with tempfile.TemporaryDirectory() as scratch:
            trainer = pl.Trainer(
                max_steps=spec.steps, max_epochs=-1, val_check_interval=spec.workload.eval_every,
                check_val_every_n_epoch=None, num_sanity_val_steps=0, accelerator="cpu",
                devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False, default_root_dir=scratch,
            )  # fmt: skip
            trainer.fit(module, datamodule=data)
    else:
        from transformers import set_seed

        from ablations.byo.hf import owned_arguments
        from ablations.workloads.lora import make_trainer

        with tempfile.TemporaryDirectory() as scratch:
            set_seed(spec.seed)
            make_trainer(dict(spec.params), owned_arguments(spec, Path(scratch))).train()
    return time.perf_counter() - started


def driven_framework(spec: RunSpec) -> float:
    from ablations.byo.hf import TrainerWorkload
    from ablations.byo.lightning import LightningWorkload

    workload = LightningWorkload if spec.workload.lightning is not None else TrainerWorkload
    started = time.perf_counter()
    record = execute(spec, workload)
    seconds = time.perf_counter() - started
    assert record.status == "accepted" and record.steps_done == spec.steps, record
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--surface", choices=["command", "lightning", "hf"], default="command")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--width", type=int, default=160, help="command: the script's --width")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ratios, per_step, bare_steps = [], [], []
    with tempfile.TemporaryDirectory() as out:
        if args.surface == "command":
            for _ in range(args.repeats):
                b = bare(args.steps, args.width, Path(out))
                d = driven(args.steps, args.width, Path(out))
                ratios.append(d / b)
                per_step.append((d - b) * 1e6)
                bare_steps.append(b * 1e3)
            print(
                f"command workload, {args.steps} steps (a bare step "
                f"{statistics.median(bare_steps):.3f} ms, width {args.width}) x "
                f"{args.repeats}: overhead per step {statistics.median(ratios) - 1:+.1%}, "
                f"{statistics.median(per_step):.0f} us per step (median of paired trials; "
                f"each {', '.join(f'{r - 1:+.1%}' for r in ratios)})"
            )
            return
        torch.set_num_threads(1)  # both sides alike, and steady on a shared machine
        spec = spec_of(args.surface, args.steps, Path(out))
        bare_framework(spec), driven_framework(spec)  # warm-up: imports, the corpus
        for _ in range(args.repeats):
            b, d = bare_framework(spec), driven_framework(spec)
            ratios.append(d / b)
            per_step.append((d - b) / args.steps * 1e6)
    print(
        f"{args.surface} workload, {args.steps} steps x {args.repeats}: overhead "
        f"{statistics.median(ratios) - 1:+.1%} of wall time, "
        f"{statistics.median(per_step):.0f} us per step (median of paired trials)"
    )


if __name__ == "__main__":
    main()
