"""Device packing: 16 runs of mixed lengths on 4 simulated slots versus the lower bound.

    .venv/bin/python bench/device_packing.py [--runs 16] [--slots 4] [--scale 1.0]

The runs sleep instead of training, but go through the campaign's real parts: a Prefect flow
on `ThreadPoolTaskRunner(max_workers=slots)`, every task leasing a slot from `SlotLease` for
its whole run, all of a phase submitted at once, in the order
`ablations.campaign.scheduling.longest_first` gives from (simulated) pilot measurements of each
variant's seconds per step. The plan's own order (seeded shuffle) is measured too, for
comparison. Makespan = last end - first start; lower bound = max(total / slots, longest
run). Goal (issue 5): makespan <= 1.10x the bound.
Prints one summary line.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import threading
import time

GOAL = 1.10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every duration")
    parser.add_argument("--seed", type=int, default=9)
    args = parser.parse_args()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    from flows.environment import quiet_prefect

    quiet_prefect()
    from prefect import flow, task
    from prefect.task_runners import ThreadPoolTaskRunner

    from ablations.campaign.scheduling import longest_first
    from ablations.plan.variants import PlannedRun
    from ablations.run.records import RunRecord, Timings
    from ablations.slots.devices import SlotLease

    rng = random.Random(args.seed)
    steps = 100
    # Mixed lengths: 8 variants whose seconds per step differ up to 6x, two seeds each, in a
    # shuffled plan order. Pilot records carry each variant's measured seconds per step.
    per_step = {f"v{i}": rng.uniform(0.008, 0.05) * args.scale for i in range(args.runs // 2)}
    seeds = max(1, args.runs // len(per_step))
    runs = [
        PlannedRun(
            run_id=f"{v}-s{s}", variant=v, factor=None, level=None, seed=s,
            category="essential", phase="main", steps=steps, params={},
        )
        for v in per_step
        for s in range(seeds)
    ][: args.runs]  # fmt: skip
    rng.shuffle(runs)
    pilot = [
        RunRecord(
            run_id=f"pilot-{v}", variant=v, seed=0, category="essential", phase="pilot",
            status="accepted", steps_done=10, timings=Timings(train=10 * sec),
        )
        for v, sec in per_step.items()
    ]  # fmt: skip
    seconds = {r.run_id: r.steps * per_step[r.variant] for r in runs}
    pool: SlotLease[str] = SlotLease([f"sim#{i}" for i in range(args.slots)])
    spans: list[tuple[str, float, float]] = []
    lock = threading.Lock()

    @task(name="sleeping-run")
    def sleeping_run(run_id: str) -> str:
        with pool.lease() as slot:
            started = time.perf_counter()
            time.sleep(seconds[run_id])
            with lock:
                spans.append((slot, started, time.perf_counter()))
        return run_id

    @flow(name="packing-bench", task_runner=ThreadPoolTaskRunner(max_workers=args.slots))  # type: ignore[arg-type]
    def phase(order: list[str]) -> None:
        futures = [sleeping_run.submit(run_id) for run_id in order]
        for future in futures:
            future.result()

    def makespan(order: list[PlannedRun]) -> float:
        spans.clear()
        phase([r.run_id for r in order])
        for slot in {s for s, _, _ in spans}:  # a slot never runs two runs at once
            mine = sorted((a, b) for s, a, b in spans if s == slot)
            assert all(b <= c for (_, b), (c, _) in itertools.pairwise(mine)), slot
        return max(b for _, _, b in spans) - min(a for _, a, _ in spans)

    phase([])  # start the ephemeral server before anything is timed
    bound = max(sum(seconds.values()) / args.slots, max(seconds.values()))
    plan_order = makespan(runs)
    ordered = makespan(longest_first(runs, pilot))
    ratio = ordered / bound
    print(
        f"device packing ({len(runs)} runs of {min(seconds.values()):.1f}-"
        f"{max(seconds.values()):.1f} s, total {sum(seconds.values()):.1f} s, on {args.slots} "
        f"slots): lower bound {bound:.2f} s | longest first (the campaign's order) "
        f"{ordered:.2f} s = {ratio:.3f}x (goal <= {GOAL:.2f}x: "
        f"{'met' if ratio <= GOAL else 'NOT met'}) | plan order {plan_order:.2f} s = "
        f"{plan_order / bound:.3f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
