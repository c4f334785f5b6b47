"""The restart check (stop rule `restart`): does a checkpoint continue the run exactly?

Train a few steps, save through the real store, keep training (the reference); then, in a
fresh process, build the workload anew, load the checkpoint and take the same steps. The
losses (and, where kernels are deterministic, the final weights) must agree. A save that
cannot be committed, a load that fails or a different continuation is a `restart` stop.

A `memory://` store cannot be seen from another process; there the check reloads into a
fresh workload instance in this process instead.

    python -m ablations.checkpoint.restart < spec.json   # the fresh-process half
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys

import torch

from ablations.checkpoint.manager import CheckpointManager
from ablations.checkpoint.saver import Retry
from ablations.records import RunSpec, Stop
from ablations.workload import Workload

EARLY_STEPS = 2
"""Steps before the check's save: early, so a broken restart costs seconds, not a run."""
FRESH_PROCESS_TIMEOUT = 600.0
"""Seconds for the reloading process (imports and a CUDA context included)."""
CUDA_REL_TOL = 1e-5
"""Loss agreement on CUDA when non-deterministic kernels (atomics) are allowed."""


def check_spec(spec: RunSpec) -> RunSpec:
    """The spec the check runs under: its own run id, so the real run's store is untouched."""
    return spec.model_copy(update={"run_id": f"restart-{spec.run_id}", "out_dir": None})


def _digest(workload: Workload) -> str:
    digest = hashlib.sha256()
    for name, tensor in workload.model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def continue_from_checkpoint(spec: RunSpec, until: int) -> dict[str, object]:
    """Build a fresh workload, resume it from the store, train to `until`: losses, digest."""
    from ablations.driver import open_run

    manager = CheckpointManager(spec, retry=Retry(attempts=2, backoff_seconds=0.5))
    try:
        loop = open_run(spec)
        loop.step = manager.resume(loop.workload, loop.history)
        resumed = loop.step
        stop = loop.advance(until)
    finally:
        summary = manager.close()
    return {
        "refused": summary.last_error,
        "resumed": resumed,
        "losses": loop.history.losses[resumed:],
        "digest": _digest(loop.workload),
        "stopped": stop.message if stop else None,
    }


def restart_check(spec: RunSpec) -> Stop | None:
    """None when the run restarts exactly; a `restart` stop naming the reason otherwise."""
    from ablations.driver import open_run

    spec = check_spec(spec)
    assert spec.checkpoint is not None, "the restart check needs a checkpoint section"
    early = min(EARLY_STEPS, spec.steps)
    until = min(early + spec.stop_rules.restart.check_steps, spec.steps)

    def stop(message: str, value: float | None = None) -> Stop:
        return Stop(
            rule="restart", step=early, value=value, message=f"no usable restart: {message}"
        )

    manager = CheckpointManager(spec, retry=Retry(attempts=2, backoff_seconds=0.5))
    manager.store.delete(manager.identity.prefix)  # a leftover check never resumes itself
    try:
        reference = open_run(spec)
        reference.advance(early)
        manager.save(early, reference.workload, reference.history)
        summary = manager.close()
        if summary.failures or summary.saves != 1:
            return stop(
                f"the checkpoint at step {early} could not be written: {summary.last_error}"
            )
        reference.advance(until)
        expected = reference.history.losses[early:]
        try:
            got = _reload(spec, until)
        except Exception as exc:  # any failure to reload is exactly what this check reports
            return stop(f"reloading the checkpoint failed: {type(exc).__name__}: {exc}")
        if got["resumed"] != early:
            why = f" ({got['refused']})" if got.get("refused") else ""
            return stop(f"reloaded step {got['resumed']}, expected {early}{why}")
        losses = [float(v) for v in got["losses"]]  # type: ignore[attr-defined]
        exact = reference.device.type == "cpu" or torch.are_deterministic_algorithms_enabled()
        if len(losses) != len(expected):
            return stop(f"{len(losses)} steps after reload, expected {len(expected)}")
        for i, (a, b) in enumerate(zip(expected, losses, strict=True)):
            same = a == b if exact else math.isclose(a, b, rel_tol=CUDA_REL_TOL)
            if not same:
                return stop(
                    f"step {early + i + 1} after reload has loss {b!r}, the uninterrupted "
                    f"run {a!r}: the checkpoint misses part of the training state",
                    value=abs(a - b),
                )
        if exact and got["digest"] != _digest(reference.workload):
            return stop(f"weights after {until} steps differ from the uninterrupted run's")
        return None
    finally:
        manager.store.delete(manager.identity.prefix)


def _reload(spec: RunSpec, until: int) -> dict[str, object]:
    assert spec.checkpoint is not None
    if spec.checkpoint.store.startswith("memory://"):
        return continue_from_checkpoint(spec, until)  # a fresh instance, in this process
    done = subprocess.run(
        # Same intra-op thread count as this process: CPU reductions split differently across
        # threads, so another count gives other last bits and a false "mismatch".
        [
            sys.executable,
            "-m",
            "ablations.checkpoint.restart",
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
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    if len(sys.argv) > 2:
        torch.set_num_threads(int(sys.argv[2]))
    spec_in = RunSpec.model_validate_json(sys.stdin.read())
    print(json.dumps(continue_from_checkpoint(spec_in, int(sys.argv[1]))))
