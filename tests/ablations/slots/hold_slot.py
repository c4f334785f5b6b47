"""A process holding a slot's lock, as a campaign's run does: `python -m
tests.ablations.slots.hold_slot LOCK_DIR SLOT RUNS SECONDS` holds `SLOT` (e.g. `cuda:0`) of
host `box` `RUNS` times for `SECONDS` each, printing `held` when it first has it and one JSON
line per hold with its start and end (wall clock, comparable across processes). The first hold
lasts until a line (or the end) on stdin too, so a test decides when it ends."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ablations.slots.devices import SlotSpec
from ablations.slots.locks import SlotLocks


def main(lock_dir: str, slot_name: str, runs: int, seconds: float) -> None:
    locks = SlotLocks(host="box", lock_dir=Path(lock_dir))
    slot = SlotSpec(name=slot_name, device=slot_name.partition("#")[0], cpu_threads=1)
    for index in range(runs):
        with locks.held(slot):
            start = time.time()
            if index == 0:
                print("held", flush=True)
                sys.stdin.readline()
            time.sleep(seconds)
            end = time.time()
        print(json.dumps({"start": start, "end": end}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
