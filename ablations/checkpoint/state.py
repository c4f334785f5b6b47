"""The full training state: captured to host memory, serialized, and restored exactly.

Capture is the only part on the training loop's path: it copies every tensor to host memory
(device tensors into pinned buffers with non-blocking copies, ordered on the current stream
before any later update) and returns a `Snapshot`. Serialization happens in the background.
Loading uses `torch.load(weights_only=True)`: a pickle read from a store is never executed.
Our own state holds tensors and plain values only (numpy's RNG state as a tensor), so any
reader can load `state.pt` with `weights_only=True` alone; numpy's array types stay allowlisted
here for checkpoints written before that, and for numpy arrays in a workload's own state.
"""

from __future__ import annotations

import copy
import io
import random
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from ablations.errors import StoreError
from ablations.run.hooks import RunHistory
from ablations.run.workload import Workload

MODEL, STATE = "model.pt", "state.pt"

_multiarray = getattr(np, "_core", None) or np.core  # numpy 2 renamed numpy.core
_NUMPY_SAFE: list[Any] = [np.ndarray, np.dtype, _multiarray.multiarray._reconstruct]
_NUMPY_SAFE += [type(np.dtype(t)) for t in (np.uint32, np.int64, np.float32, np.float64, bool)]
"""What numpy's legacy RNG state (a uint32 array) and small numpy arrays in a workload's own
state need; nothing that can run code."""


@dataclass
class Snapshot:
    """A host copy of the training state at `step`, safe to serialize in another thread."""

    step: int
    model: dict[str, Any]
    state: dict[str, Any]
    ready: list[Any] = field(default_factory=list)
    """One CUDA event per device copied from, marking its device-to-host copies done."""

    def wait(self) -> None:
        for event in self.ready:
            event.synchronize()

    def serialize(self) -> dict[str, bytes]:
        """The payload objects, by name (call off the training thread)."""
        self.wait()
        return {MODEL: _dumps(self.model), STATE: _dumps(self.state)}


def _dumps(obj: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


class _HostCopier:
    def __init__(self) -> None:
        self.devices: set[torch.device] = set()

    def __call__(self, obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            if obj.device.type == "cpu":
                return obj.detach().clone()
            self.devices.add(obj.device)
            host = torch.empty(obj.shape, dtype=obj.dtype, pin_memory=torch.cuda.is_available())
            return host.copy_(obj.detach(), non_blocking=True)
        if isinstance(obj, dict):
            return type(obj)((k, self(v)) for k, v in obj.items())
        if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
            return type(obj)(self(v) for v in obj)
        return copy.deepcopy(obj)


def rng_state() -> dict[str, Any]:
    """Every RNG the process has: python, numpy, torch CPU and CUDA on every device."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": _numpy_state(),
        "torch": torch.get_rng_state(),
    }
    # Only once CUDA is in use: querying it otherwise would create a context on every card.
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _numpy_state() -> dict[str, Any]:
    """numpy's legacy global RNG state as a tensor and plain numbers (no numpy objects)."""
    name, key, pos, has_gauss, cached_gaussian = np.random.get_state(legacy=True)
    return {
        "bit_generator": str(name),
        "key": torch.from_numpy(np.asarray(key, dtype=np.int64)),  # uint32 values, exact
        "pos": int(pos),
        "has_gauss": int(has_gauss),
        "cached_gaussian": float(cached_gaussian),
    }


def _set_numpy_state(state: Any) -> None:
    if not isinstance(state, dict):  # a checkpoint from before: numpy's own tuple
        np.random.set_state(state)
        return
    key = state["key"].numpy().astype(np.uint32)
    np.random.set_state(
        (state["bit_generator"], key, state["pos"], state["has_gauss"], state["cached_gaussian"])
    )


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(_as_tuples(state["python"]))
    _set_numpy_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda")
    if cuda and torch.cuda.is_available():
        count = torch.cuda.device_count()
        if len(cuda) != count:
            raise StoreError(
                f"checkpoint holds CUDA RNG states for {len(cuda)} devices, this process "
                f"sees {count}: an exact resume needs the same devices"
            )
        torch.cuda.set_rng_state_all(cuda)


def _as_tuples(value: Any) -> Any:
    """random.setstate wants tuples all the way down (a round trip may yield lists)."""
    return tuple(_as_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def capture(step: int, workload: Workload, history: RunHistory) -> Snapshot:
    """Copy the full state to host memory; the only part of a save the loop waits for."""
    copier = _HostCopier()
    model = copier(workload.model.state_dict())
    scheduler, scaler = workload.scheduler, workload.scaler
    state = copier(
        {
            "step": step,
            "optimizer": workload.optimizer.state_dict(),
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "scaler": scaler.state_dict() if scaler is not None else None,
            "workload": workload.state_dict(),
            "history": asdict(history),
        }
    )
    state["rng"] = copier(rng_state())
    ready = []
    for device in copier.devices:
        # The copies were queued on each device's current stream: the loop's later updates
        # queue behind them, so the loop need not wait; the saver waits on these events.
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))
        ready.append(event)
    return Snapshot(step, model, state, ready)


def loads(data: bytes, name: str) -> dict[str, Any]:
    """Deserialize one payload object without executing any pickled code."""
    try:
        with torch.serialization.safe_globals(_NUMPY_SAFE):
            obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise StoreError(f"{name} cannot be loaded safely: {type(exc).__name__}: {exc}") from exc
    if not isinstance(obj, dict):
        raise StoreError(f"{name} holds a {type(obj).__name__}, expected a dict")
    return obj


def restore(payload: dict[str, bytes], workload: Workload, history: RunHistory) -> int:
    """Load a verified payload into `workload` and `history` in place; return its step."""
    model, state = loads(payload[MODEL], MODEL), loads(payload[STATE], STATE)
    try:
        workload.model.load_state_dict(model)
        workload.optimizer.load_state_dict(state["optimizer"])
        if workload.scheduler is not None and state["scheduler"] is not None:
            workload.scheduler.load_state_dict(state["scheduler"])
        if workload.scaler is not None and state["scaler"] is not None:
            workload.scaler.load_state_dict(state["scaler"])
        workload.load_state_dict(state["workload"])
        saved = state["history"]
        history.losses[:] = saved["losses"]
        history.evaluations[:] = saved["evaluations"]
        history.step_seconds[:] = saved["step_seconds"]
        set_rng_state(state["rng"])
    except (KeyError, RuntimeError, ValueError, TypeError) as exc:
        raise StoreError(
            f"checkpoint does not fit this workload: {type(exc).__name__}: {exc}"
        ) from exc
    return int(state["step"])
