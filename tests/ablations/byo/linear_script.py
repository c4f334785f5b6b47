"""A training program without torch (any language would do): SGD on y = 3x + 1.

Reports through `ablate_report`; its state is one JSON file. At its last step it writes its
held-out predictions (each row classified as above 1 or not), for the error analysis. Test
knobs in the environment: `TRAINED_LOG` (a folder: append each trained step to
`<lr>-<seed>.log`, so a test sees what a kill and a resume trained twice), `STEP_SLEEP`
(seconds per step, so a test can kill it mid-run) and `FORGET_RNG` (a resume draws from a
fresh generator instead of the saved one: the mistake the restart check must find)."""

import argparse
import json
import os
import random
import time

import ablate_report as ablate

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--noise", type=float, default=0.1)
args = parser.parse_args()

rng = random.Random(ablate.seed())
xs = [rng.uniform(-1, 1) for _ in range(64)]
ys = [3 * x + 1 + rng.gauss(0, args.noise) for x in xs]
train, heldout = list(zip(xs[:48], ys[:48], strict=True)), list(zip(xs[48:], ys[48:], strict=True))
w = b = 0.0
start = ablate.resumed_step()
if start:
    state = json.loads((ablate.resume_dir() / "state.json").read_text())
    w, b, rng = state["w"], state["b"], random.Random()
    rng.setstate((state["rng"][0], tuple(state["rng"][1]), state["rng"][2]))
    if os.environ.get("FORGET_RNG"):
        rng = random.Random(ablate.seed())
sleep, log = float(os.environ.get("STEP_SLEEP", 0)), os.environ.get("TRAINED_LOG")
if log:
    log = os.path.join(log, f"{args.lr}-{ablate.seed()}.log")


def mse(rows):
    return sum((w * x + b - y) * (w * x + b - y) for x, y in rows) / len(rows)


for step in range(start + 1, ablate.steps(100) + 1):
    x, y = rng.choice(train)
    error = w * x + b - y
    w, b = w - args.lr * 2 * error * x, b - args.lr * 2 * error
    if log:
        with open(log, "a") as handle:
            handle.write(f"{step}\n")
    time.sleep(sleep)
    last = step % ablate.eval_every(25) == 0 or step == ablate.steps(100)
    if step == ablate.steps(100):  # held-out rows classified: above the line's centre or not
        ids = range(48, 64)
        above = [int(y > 1) for _, y in heldout], [int(w * x + b > 1) for x, _ in heldout]
        ablate.write_predictions(ids, *above)
    reply = ablate.report(step, error * error, **({"mse": mse(heldout)} if last else {}))
    if reply.checkpoint:
        state = {"w": w, "b": b, "rng": rng.getstate()}
        (ablate.checkpoint_dir() / "state.json").write_text(json.dumps(state))
        ablate.saved(step)
    if reply.stop:
        break
