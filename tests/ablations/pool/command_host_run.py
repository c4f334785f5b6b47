"""A 100-step command run (`tests/ablations/byo/linear_script.py`) as a pool host runs it, on
one CPU slot with a file store (and with `--preflight` first the preflight's restart check of
a program that forgets its generator on resume); prints the record, the check's stop, the
thread count the program is told and the modules this process loaded, as one JSON line.

    python -m tests.ablations.pool.command_host_run TMP_DIR [--preflight]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "byo" / "linear_script.py"


def main(tmp: Path, preflight: bool) -> None:
    os.environ.update(ABLATE_DEVICES="1", ABLATE_HOST="host-x", ABLATE_SLOT_DIR=str(tmp / "slots"))
    os.environ.pop("OMP_NUM_THREADS", None)  # so the program is told the slot's share
    from ablations.byo import command
    from ablations.checkpoint import fence
    from ablations.checkpoint.store import open_store
    from ablations.plan.infrastructure import CheckpointSection
    from ablations.plan.workload import COMMAND_ENTRY
    from ablations.pool.attempts import run_on_host
    from ablations.workers.jobs import preflight_on_slot
    from tests.specs import bare_spec

    section = CheckpointSection(store=f"file://{tmp / 'store'}", interval={"steps": 30})
    spec = bare_spec(
        run_id="control-s0-abc", campaign_id="byo", plan_hash="0" * 16, variant="control",
        category="essential", phase="main", seed=0, params={"lr": 0.05}, steps=100,
        eval_every=25, entry=COMMAND_ENTRY, command=["python", str(SCRIPT), "--lr", "{lr}"],
        metric="mse", direction="minimize", threshold=0.5, checkpoint=section,
        out_dir=str(tmp / "out"),
    )  # fmt: skip
    fence.accept(open_store(section, check=False), "byo", spec.run_id, "1")
    record = json.loads(run_on_host(spec, "run", None, "1"))
    restart = None
    if preflight:  # the check runs the program three times and finds the forgotten generator
        os.environ["FORGET_RNG"] = "1"
        restart = preflight_on_slot(spec, None).restart
        assert restart is not None
    threads = command.environment(spec, tmp, None, 0)["OMP_NUM_THREADS"]
    print(
        json.dumps(
            {
                "record": record,
                "restart": restart and restart.rule,
                "threads": threads,
                "loaded": sorted(sys.modules),
            }
        )
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), preflight="--preflight" in sys.argv[2:])
