"""A training program whose runs all end near accuracy 0.97, but one: with `--collapse-seed
S`, the run of seed S collapses to 0.41 at its last evaluation (above the plan's quality
threshold, so no stop rule fires). Each seed draws the same base for every variant (paired
seeds), and each run a small noise of its own; `--shift` moves a variant's accuracy."""

import argparse
import json
import random

import ablate_report as ablate

parser = argparse.ArgumentParser()
parser.add_argument("--shift", type=float, default=0.0)
parser.add_argument("--collapse-seed", type=int, default=-1)
args = parser.parse_args()

seed = ablate.seed()
base = 0.97 + random.Random(seed).gauss(0, 0.002)  # the seed's draw, shared by every variant
own = random.Random(f"{seed} {args.shift} {args.collapse_seed}").gauss(0, 0.002)
start = ablate.resumed_step()
if start:
    json.loads((ablate.resume_dir() / "state.json").read_text())  # nothing else to restore
steps, every = ablate.steps(4), ablate.eval_every(2)
for step in range(start + 1, steps + 1):
    accuracy = base + own + args.shift
    if step == steps and seed == args.collapse_seed:
        accuracy = 0.41
    shown = {"accuracy": accuracy} if step % every == 0 or step == steps else {}
    reply = ablate.report(step, 1.0 - accuracy, **shown)
    if reply.checkpoint:
        (ablate.checkpoint_dir() / "state.json").write_text(json.dumps({"step": step}))
        ablate.saved(step)
    if reply.stop:
        break
