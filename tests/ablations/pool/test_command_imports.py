"""A command workload's run and preflight on a pool host load no heavy library: its program is
a process of its own, and the host's process (one per run) would pay torch's 3 s of CPU for
nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

from ablations.plan.infrastructure import ResourcesSection
from ablations.slots.devices import plan_slots
from tests.conftest import ROOT

HEAVY = ("torch", "numpy", "scipy", "pandas", "matplotlib", "transformers", "lightning")


def test_a_command_run_and_preflight_on_a_pool_host_import_no_torch_and_record_the_same(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.ablations.pool.command_host_run",
            str(tmp_path),
            "--preflight",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout.splitlines()[-1])
    record = found["record"]
    assert record["status"] == "accepted" and record["steps_done"] == 100, record
    assert record["checkpoint"]["saves"] == 3, record  # the folder checkpoints still commit
    assert found["restart"] == "restart"  # the preflight's restart check ran, found the cause
    assert [m for m in HEAVY if m in found["loaded"]] == []
    # What the record says of torch is what a process that imported it would say.
    environment = record["environment"]
    assert (environment["torch"], environment["cuda"]) == (torch.__version__, torch.version.cuda)
    assert environment["device_name"] == "cpu"
    (slot,) = plan_slots(ResourcesSection(), "1")
    assert found["threads"] == str(slot.cpu_threads)  # the program is told the slot's share


def test_the_command_run_path_imports_no_heavy_library() -> None:
    """The modules a slot imports for a command's run, before it runs anything."""
    modules = ", ".join(
        (
            "ablations.byo.run",
            "ablations.byo.command",
            "ablations.workers.jobs",
            "ablations.pool.attempts",
        )
    )
    check = f"import sys, {modules}; print(sorted(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = set(done.stdout.strip().strip("[]").replace("'", "").split(", "))
    assert [m for m in HEAVY if m in loaded] == []
