"""The restart check (stop rule `restart`): does a checkpoint continue the run exactly?

Train a few steps, save through the real store, keep training (the reference half); then,
in another process holding no run state, build the workload anew, load the checkpoint and
take the same steps (the continuation). The losses (and, where kernels are deterministic,
the final weights) must agree (`verdict.py`). A save that cannot be committed, a load that
fails or a different continuation is a `restart` stop.

A campaign runs the halves in two of its already started processes (`across.py`);
`restart_check` runs the whole check from one process, starting a new one for the
continuation. A `memory://` store cannot be seen from another process; there the
continuation is a fresh workload instance in this process instead.

    python -m ablations.preflight.restart_check UNTIL THREADS < spec.json   # the continuation
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import torch

from ablations.checkpoint.commit import Identity, remove_writer
from ablations.checkpoint.manager import CheckpointManager
from ablations.checkpoint.saver import Retry
from ablations.checkpoint.store import open_store
from ablations.preflight.verdict import (
    Continuation,
    RestartReference,
    reload_failed,
    restart_stop,
    verdict,
)
from ablations.run.records import RunSpec, Stop
from ablations.run.workload import Workload

EARLY_STEPS = 2
"""Steps before the check's save: early, so a broken restart costs seconds, not a run."""
FRESH_PROCESS_TIMEOUT = 600.0
"""Seconds for the reloading process (imports and a CUDA context included)."""


def _digest(workload: Workload) -> str:
    digest = hashlib.sha256()
    for name, tensor in workload.model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _manager(spec: RunSpec) -> CheckpointManager:
    return CheckpointManager(spec, retry=Retry(attempts=2, backoff_seconds=0.5))


def reference_half(spec: RunSpec) -> RestartReference | Stop:
    """Train `spec`'s check to its save, save, train on: the reference (or why it failed).

    `spec` is the check's own (`RunSpec.for_restart_check`); leftovers of an earlier check
    are deleted first, so a check never resumes an old one."""
    from ablations.training.driver import open_run

    assert spec.checkpoint is not None, "the restart check needs a checkpoint section"
    early = min(EARLY_STEPS, spec.steps)
    until = min(early + spec.stop_rules.restart.check_steps, spec.steps)
    manager = _manager(spec)
    remove_writer(manager.store, manager.identity)
    reference = open_run(spec)
    reference.advance(early)
    manager.save(early, reference.workload, reference.history)
    summary = manager.close()
    if summary.failures or summary.saves != 1:
        # A store unreachable through the outage is the machine's (`StoreUnreachable`, the
        # campaign stays undecided), not a workload that cannot be restarted.
        manager.store.check()
        message = f"the checkpoint at step {early} could not be written: {summary.last_error}"
        return restart_stop(early, message)
    reference.advance(until)
    return RestartReference(
        early=early,
        until=until,
        losses=reference.history.losses[early:],
        digest=_digest(reference.workload),
        exact=reference.device.type == "cpu" or torch.are_deterministic_algorithms_enabled(),
        pid=os.getpid(),
    )


def continue_from_checkpoint(spec: RunSpec, until: int) -> Continuation:
    """Build a fresh workload, resume it from the store, train to `until`; then delete the
    check's checkpoint (this is its last reader)."""
    from ablations.training.driver import open_run

    manager = _manager(spec)
    try:
        loop = open_run(spec)
        loop.step = manager.resume(loop.workload, loop.history)
        resumed = loop.step
        loop.advance(until)
    finally:
        summary = manager.close()
        remove_writer(manager.store, manager.identity)
    return Continuation(
        resumed=resumed,
        refused=summary.last_error,
        losses=loop.history.losses[resumed:],
        digest=_digest(loop.workload),
        pid=os.getpid(),
    )


def restart_check(spec: RunSpec) -> Stop | None:
    """None when the run restarts exactly; a `restart` stop naming the reason otherwise."""
    spec = spec.for_restart_check()
    assert spec.checkpoint is not None, "the restart check needs a checkpoint section"
    # A failed save or reload leaves a partial check behind; nothing of it may remain.
    store = open_store(spec.checkpoint)
    identity = Identity(spec.campaign_id, spec.run_id, spec.plan_hash)
    try:
        reference = reference_half(spec)
        if isinstance(reference, Stop):
            return reference
        try:
            got = _continue_elsewhere(spec, reference.until)
        except Exception as exc:  # any failure to reload is exactly what this check reports
            return reload_failed(reference, exc)
        return verdict(reference, got)
    finally:
        remove_writer(store, identity)


def _continue_elsewhere(spec: RunSpec, until: int) -> Continuation:
    assert spec.checkpoint is not None
    if spec.checkpoint.store.startswith("memory://"):
        return continue_from_checkpoint(spec, until)  # a fresh instance, in this process
    done = subprocess.run(
        # Same intra-op thread count as this process: CPU reductions split differently across
        # threads, so another count gives other last bits and a false "mismatch".
        [
            sys.executable,
            "-m",
            "ablations.preflight.restart_check",
            str(until),
            str(torch.get_num_threads()),
        ],
        input=spec.model_dump_json(),
        capture_output=True,
        text=True,
        timeout=FRESH_PROCESS_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        raise RuntimeError(f"fresh process exited {done.returncode}: {' | '.join(tail)}")
    return Continuation.model_validate_json(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    if len(sys.argv) > 2:
        torch.set_num_threads(int(sys.argv[2]))
    spec_in = RunSpec.model_validate_json(sys.stdin.read())
    print(continue_from_checkpoint(spec_in, int(sys.argv[1])).model_dump_json())
