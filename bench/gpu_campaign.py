"""Helpers of bench/gpu_check.sh: the charlm recipe sized for a card, and what each run saw.

    python bench/gpu_campaign.py plan --slots 2 --size gpu --out plan.yaml
    python bench/gpu_campaign.py devices FOLDER [--json OUT.json]

`plan` writes the charlm recipe with `devices: auto`, the given `slots_per_device` (a number
or `auto`) and, with `--size gpu`, a model large enough to keep a card busy (`--size cpu`
keeps the recipe's CPU size, for trying the script without a card). `devices` prints one line
per run of a campaign folder: the slot, the device the run saw, the card's name and its median
step time, and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

RECIPE = Path(__file__).resolve().parents[1] / "ablations" / "recipes" / "charlm.yaml"
GPU_PARAMS = {"n_layer": 4, "n_embd": 256, "n_head": 4, "block_size": 256, "batch_size": 64,
              "lr": 0.001, "eval_bytes": 65536}  # fmt: skip
"""A few million parameters: milliseconds per step on an H200, seconds per run."""


def write_plan(slots: str, size: str, steps: int | None, out: Path) -> None:
    data: dict[str, Any] = yaml.safe_load(RECIPE.read_text())
    data["resources"] = {
        "devices": "auto",
        "slots_per_device": slots if slots == "auto" else int(slots),
    }
    if size == "gpu":
        data["workload"]["params"].update(GPU_PARAMS)
    if steps is not None:  # a check of the machinery: every run must get to the main phase
        data["metric"]["threshold"] = 5.4  # ln(256) = 5.55: anything that learned at all
        data["workload"]["steps"] = steps
        data["workload"]["eval_every"] = max(1, steps // 2)
        data["pilot"]["steps"] = max(1, steps // 4)
    data["campaign"]["id"] = f"charlm-{size}-{slots}-slots"
    out.write_text(yaml.safe_dump(data, sort_keys=False))


def devices(folder: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted((folder / "records").glob("*.json")):
        record = json.loads(path.read_text())
        environment = record.get("environment") or {}
        rows.append(
            {
                "run_id": record["run_id"],
                "status": record["status"],
                "slot": record.get("slot"),
                "device": record.get("device"),
                "device_name": environment.get("device_name"),
                "step_seconds": record.get("step_seconds"),
                "train_seconds": record["timings"]["train"],
                "started_at": record.get("started_at"),
                "ended_at": record.get("ended_at"),
                "peak_reserved": max(
                    (m["reserved"] for m in record.get("memory", {}).values()), default=0
                ),
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan")
    p.add_argument("--slots", default="1", help="slots_per_device: a number or auto")
    p.add_argument("--size", choices=["gpu", "cpu"], default="gpu")
    p.add_argument("--steps", type=int)
    p.add_argument("--out", type=Path, required=True)
    d = sub.add_parser("devices")
    d.add_argument("folder", type=Path)
    d.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.command == "plan":
        write_plan(args.slots, args.size, args.steps, args.out)
        return 0
    rows = devices(args.folder)
    if not rows:
        print(f"no run records in {args.folder}")
        return 1
    for row in rows:
        step = row["step_seconds"]
        print(
            f"{row['run_id']}: {row['status']} on slot {row['slot']} device {row['device']} "
            f"({row['device_name']}), {step * 1e3 if step else float('nan'):.2f} ms/step, "
            f"peak reserved {row['peak_reserved'] / 2**20:.0f} MiB"
        )
    slots = sorted({str(r["slot"]) for r in rows})
    wall = max(r["ended_at"] or 0 for r in rows) - min(r["started_at"] or 0 for r in rows)
    print(f"{len(rows)} runs on slots {slots}; first start to last end {wall:.1f} s")
    if args.json is not None:
        args.json.write_text(json.dumps({"runs": rows, "slots": slots, "wall_s": wall}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
