"""The run `bench/pool_scale.py` puts on every worker: a command that mostly waits.

    python bench/sleepy_run.py --seconds 30 [--lr 0.1]

Each of its steps sleeps `seconds / steps` and reports a loss (and an `mse` at each
evaluation) through the command protocol; asked to, it saves a few bytes of state and says so,
so checkpoints, heartbeats and the store are as busy as in a real run while the two cores of a
small machine stay free for the orchestration being measured. Standard library only: no torch
import per run.
"""

import argparse
import json
import time

import ablate_report as ablate

parser = argparse.ArgumentParser()
parser.add_argument("--seconds", type=float, default=30.0, help="sleep of a whole run")
parser.add_argument("--lr", type=float, default=0.1, help="a factor the plan varies")
args = parser.parse_args()

steps = ablate.steps(10)
pause = args.seconds / steps
start = ablate.resumed_step()
if start:  # resumed: the saved state is read back, as a real script would
    json.loads((ablate.resume_dir() / "state.json").read_text())
until = ablate.until(steps)
for step in range(start + 1, steps + 1):
    time.sleep(pause)
    loss = 1.0 / (step + 1)  # the same for every variant: the gate continues, no look trims
    metrics = {}
    if step % ablate.eval_every(5) == 0 or step == until:
        metrics["mse"] = loss
    reply = ablate.report(step, loss, **metrics)
    if reply.checkpoint:
        (ablate.checkpoint_dir() / "state.json").write_text(json.dumps({"step": step}))
        ablate.saved(step)
    if reply.stop:
        break
