"""A program that writes its reports as JavaScript's JSON.stringify would: a NaN or infinite
loss becomes `null`. Its "loss" grows by `--lr` per step (overflowing to infinity when the
product leaves the doubles), its `mse` stays 0.1. It asks for an answer at every step and
obeys it; it imports nothing of ablate."""

import argparse
import json
import math
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float)
args = parser.parse_args()


def stringify(value):
    """JSON.stringify's numbers: NaN and the infinities are written as null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


loss, steps, every = 1.0, int(os.environ["ABLATE_STEPS"]), int(os.environ["ABLATE_EVAL_EVERY"])
for step in range(1, steps + 1):
    loss *= args.lr
    message = {"step": step, "loss": stringify(loss), "reply": True}
    if step % every == 0 or step == steps:
        message["metrics"] = {"mse": 0.1}
    print(json.dumps(message), flush=True)
    answer = json.loads(sys.stdin.readline())
    if answer["stop"]:
        break
